// The gossip part of `bun run bench -- --gossip`: 3 and 5 nodes on loopback.
//   - convergence: a member is killed (kill -9); the time until every other member sees it
//     dead through gossip; it is restarted: the time until every member sees it alive again.
//   - CPU at rest: each svc process's CPU over --gossip-rest-s seconds of an idle cluster (Raft
//     heartbeats included), and gossip alone: the same number of bare gossip members (the UDP
//     driver and the core, no Raft) against as many idle Bun processes.
// Prints figures; asserts nothing.

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cpuMsOf, freePort, startSvc, waitHealthy, type Ports } from "./_lib.ts";

interface GossipAnswer {
  gossip: { members: { id: string; state: string }[] } | null;
}

async function seenBy(admin: string, subject: string): Promise<string | null> {
  try {
    const r = await fetch(`${admin}/admin/gossip`, { signal: AbortSignal.timeout(1_000) });
    const g = (await r.json()) as GossipAnswer;
    return g.gossip?.members.find((m) => m.id === subject)?.state ?? null;
  } catch {
    return null;
  }
}

/** Milliseconds until every admin in `observers` sees `subject` in `state` (NaN after the deadline). */
async function timeUntil(observers: string[], subject: string, state: string, deadlineMs = 60_000): Promise<number> {
  const t0 = performance.now();
  while (performance.now() - t0 < deadlineMs) {
    const seen = await Promise.all(observers.map((o) => seenBy(o, subject)));
    if (seen.every((s) => s === state)) return performance.now() - t0;
    await Bun.sleep(20);
  }
  return Number.NaN;
}

/** Percent of one core a set of processes used over `ms`, each. */
async function cpuPercent(pids: number[], ms: number): Promise<number[]> {
  const before = pids.map(cpuMsOf);
  await Bun.sleep(ms);
  return pids.map((pid, i) => ((cpuMsOf(pid) - (before[i] ?? 0)) / ms) * 100);
}

const fmt = (xs: number[]): string => xs.map((x) => `${x.toFixed(2)}%`).join(" ");

export async function benchGossip(options: { bin: string[]; restMs: number }): Promise<void> {
  for (const size of [3, 5]) {
    const dir = mkdtempSync(join(tmpdir(), `svc-bench-gossip-${size}-`));
    const members: (Ports & { id: string })[] = [];
    for (let i = 0; i < size; i++) members.push({ id: `node${i + 1}`, client: await freePort(), admin: await freePort(), peer: await freePort() });
    const procs = members.map((m, i) => startSvc(options.bin, dir, m.id, m, members, i === 0));
    const admin = (i: number): string => `http://127.0.0.1:${members[i]?.admin}`;
    try {
      await Promise.all(members.map((_, i) => waitHealthy(admin(i), 60_000)));
      const all = members.map((_, i) => admin(i));
      for (const m of members) await timeUntil(all, m.id, "alive");
      const rest = await cpuPercent(procs.map((p) => p.pid), options.restMs);
      process.stdout.write(`gossip, ${size} nodes: svc CPU at rest per member (Raft heartbeats included): ${fmt(rest)}\n`);

      const victim = size - 1;
      const m = members[victim];
      if (m === undefined) throw new Error("no victim");
      const others = all.filter((_, i) => i !== victim);
      procs[victim]?.kill("SIGKILL");
      await procs[victim]?.exited;
      const deadMs = await timeUntil(others, m.id, "dead");
      procs[victim] = startSvc(options.bin, dir, m.id, m, members, false);
      const aliveMs = await timeUntil(others, m.id, "alive");
      process.stdout.write(`gossip, ${size} nodes: kill -9 → dead everywhere ${(deadMs / 1000).toFixed(2)} s; restart → alive everywhere ${(aliveMs / 1000).toFixed(2)} s (period 1 s, suspicion timeout 5 s)\n`);
    } finally {
      for (const p of procs) p.kill("SIGKILL");
      await Promise.all(procs.map((p) => p.exited));
      rmSync(dir, { recursive: true, force: true });
    }
    await bareGossipCpu(size, options.restMs);
  }
}

/** Gossip alone: `size` processes that run only the UDP driver, against idle Bun processes. */
export async function bareGossipCpu(size: number, restMs: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "svc-bench-gossip-bare-"));
  const ports: number[] = [];
  for (let i = 0; i < size; i++) ports.push(await freePort());
  const script = join(dir, "member.ts");
  const gossipIndex = join(import.meta.dir, "..", "src", "gossip", "index.ts");
  writeFileSync(script, `
import { createGossip } from ${JSON.stringify(gossipIndex)};
const [self, portsText] = process.argv.slice(2);
const ports = portsText.split(",").map(Number);
const silent = { error() {}, warn() {}, info() {}, debug() {}, trace() {}, enabled: () => false, child() { return silent; } };
const g = createGossip({ self, listen: { host: "127.0.0.1", port: ports[Number(self.slice(1))] }, logger: silent });
await g.start();
g.setClusterId("bench");
const members = ports.map((p, i) => ({ id: "m" + i, peer: "127.0.0.1:" + p }));
let n = 0;
g.setSource({ members: () => members, facts: () => ({ role: "follower", term: 1, leader: "m0", commitIndex: ++n, appliedIndex: n, version: "bench", recovery: "healthy",
  addresses: { peer: "127.0.0.1:" + ports[0], client: "127.0.0.1:1", admin: "127.0.0.1:2" }, raftLinks: {}, archive: null }) });
`);
  const idle = join(dir, "idle.ts");
  writeFileSync(idle, "setInterval(() => {}, 1 << 30);\n");
  const procs = ports.map((_, i) => Bun.spawn([process.execPath, script, `m${i}`, ports.join(",")], { stdout: "ignore", stderr: "inherit" }));
  const idles = ports.map(() => Bun.spawn([process.execPath, idle], { stdout: "ignore", stderr: "inherit" }));
  try {
    await Bun.sleep(3_000);
    const [gossip, baseline] = await Promise.all([cpuPercent(procs.map((p) => p.pid), restMs), cpuPercent(idles.map((p) => p.pid), restMs)]);
    const avg = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
    process.stdout.write(`gossip, ${size} members, gossip alone: ${fmt(gossip)} of a core each; idle bun ${fmt(baseline)}; gossip's share ≈ ${(avg(gossip) - avg(baseline)).toFixed(2)}% per member\n`);
  } finally {
    for (const p of [...procs, ...idles]) p.kill("SIGKILL");
    await Promise.all([...procs, ...idles].map((p) => p.exited));
    rmSync(dir, { recursive: true, force: true });
  }
}
