// Three-node benchmark: three svc nodes on loopback (fsync on), 256-byte values; writes to
// the leader with 1, 64 and 256 clients, linearizable reads with 64 clients spread over the
// nodes and all on the leader. With etcd, the same rows against three etcd members,
// alternating row by row so that both see the same background load, then svc/etcd ratios;
// with --secure, against a second svc cluster with TLS on every port (mutual TLS between
// peers) and tokens, then tls/svc ratios. The ratios include the nodes' CPU per request (the
// three nodes together, not the load generator): on a shared two-core machine throughput moves
// with whatever else runs, and CPU per request says more steadily what a change costs.
// Prints figures; asserts nothing.

import { cpuMsOf, leaderKillMs, printRow, runLoad, type LoadResult } from "./_lib.ts";
import { createHttp1Client } from "./_http1.ts";
import { startSvcTarget } from "./_svc-target.ts";
import { etcdBinary, etcdInstallHint, startEtcdTarget } from "./etcd.ts";

/** A three-member system under load: how to reach its leader and what to send. */
export interface Target {
  name: string;
  /** Which build or version runs, for the header. */
  about: string;
  pids: number[];
  /** Index of the member that leads now (a starved node can lose leadership mid-run). */
  findLeader: () => Promise<number>;
  write: (leader: number) => { url: string; body: () => string };
  /** Linearizable point reads of keys written so far, at one member or round-robin over all. */
  read: (member: number | "all") => { url: string | (() => string); body: () => string };
  stop: () => Promise<void>;
  /** How the load reaches it when it serves TLS and asks for a token. */
  http?: { ca: string; token: string };
}

interface Row {
  label: string;
  clients: number;
  load: (t: Target, leader: number) => { url: string | (() => string); body: () => string };
}

const rows: Row[] = [
  { label: "writes, 1 client", clients: 1, load: (t, leader) => t.write(leader) },
  { label: "writes, 64 clients", clients: 64, load: (t, leader) => t.write(leader) },
  { label: "writes, 256 clients", clients: 256, load: (t, leader) => t.write(leader) },
  { label: "reads, 64 clients, all nodes", clients: 64, load: (t) => t.read("all") },
  { label: "reads, 64 clients, leader", clients: 64, load: (t, leader) => t.read(leader) },
];

/** Past the load's end, requests still unanswered after this are abandoned as errors. */
const stragglerGraceMs = 30_000;
const warmupMs = 1000;

export async function benchCluster(options: { durationMs: number; bin: string[]; etcd: boolean; secure?: boolean }): Promise<void> {
  const targets: Target[] = [];
  // Interrupted, the benchmark must not leave nodes running: they outlive their parent.
  const interrupted = (): void => {
    for (const t of targets) {
      for (const pid of t.pids) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // already gone (the leader-kill row kills one on purpose)
        }
      }
    }
    process.exit(130);
  };
  process.once("SIGINT", interrupted);
  process.once("SIGTERM", interrupted);
  try {
    targets.push(await startSvcTarget(options.bin));
    // --secure: the same cluster with TLS on every port and tokens, alternating with the plain one.
    if (options.secure === true) targets.push(await startSvcTarget(options.bin, 3, true));
    const etcd = etcdBinary();
    if (options.etcd && etcd === null) process.stdout.write(`\netcd is not on PATH: ${etcdInstallHint}; running svc alone\n`);
    if (!options.etcd && etcd !== null) process.stdout.write(`\n(etcd is on PATH: add --etcd for a side-by-side run)\n`);
    if (options.etcd && etcd !== null && options.secure !== true) targets.push(await startEtcdTarget(etcd));
    process.stdout.write(
      `\nthree nodes on loopback, fsync on, 256-byte values, ${options.durationMs / 1000} s per row` +
        `${targets.length > 1 ? `; ${targets.map((t) => t.name).join(" and ")} alternate row by row` : ""}\n` +
        "writes go to the leader; reads are linearizable; cpu/op: CPU time per answered request\n" +
        targets.map((t) => `  ${t.about}\n`).join(""),
    );
    // Warm the JIT and the connections, and leave keys for the reads to find.
    for (const t of targets) await measure(t, 16, warmupMs, t.write(await t.findLeader()));
    const results = new Map<string, Measured[]>(targets.map((t) => [t.name, []]));
    for (const row of rows) {
      for (const t of targets) {
        const leader = await t.findLeader();
        const { result, cpu } = await measure(t, row.clients, options.durationMs, row.load(t, leader));
        printRow(`${t.name.padEnd(5)} ${row.label}`, result);
        process.stdout.write(`${" ".repeat(6)}${describeCpu(t, leader, cpu, result.ops)}\n`);
        results.get(t.name)?.push({ ...result, nodesCpuMs: cpu.nodesMs.reduce((sum, ms) => sum + ms, 0) });
      }
    }
    // Last, as it ends the cluster: the leader killed under 64 writers, each system in turn.
    const killRecovery = new Map<string, number>();
    for (const t of targets) {
      const ms = await leaderKill(t);
      killRecovery.set(t.name, ms);
      process.stdout.write(`${t.name.padEnd(5)} leader killed under 64 writers (250 ms request timeout): writes succeed again after ${Number.isNaN(ms) ? "(none within 30 s)" : `${ms.toFixed(0)} ms`}\n`);
    }
    const [svc, other] = targets;
    // With --secure the ratios read tls/svc: the cost of TLS and tokens.
    if (svc !== undefined && other !== undefined) {
      if (options.secure === true) printRatios(other.name, svc.name, results);
      else printRatios(svc.name, other.name, results);
      const [a, b] = options.secure === true ? [other.name, svc.name] : [svc.name, other.name];
      const x = killRecovery.get(a) ?? Number.NaN;
      const y = killRecovery.get(b) ?? Number.NaN;
      if (y > 0 && Number.isFinite(x / y)) process.stdout.write(`${"leader killed: time to writes again".padEnd(34)} ${(x / y).toFixed(2)}× (below 1 means ${a} recovers sooner)\n`);
    }
  } finally {
    for (const t of targets) await t.stop();
    process.off("SIGINT", interrupted);
    process.off("SIGTERM", interrupted);
  }
}

/** The leader-kill row on `t` (bench/_lib.ts leaderKillMs), with a client of its own. */
async function leaderKill(t: Target): Promise<number> {
  const leader = await t.findLeader();
  const http = createHttp1Client(t.http);
  try {
    return await leaderKillMs({
      leader,
      survivors: t.pids.map((_, i) => i).filter((i) => i !== leader),
      write: (member) => t.write(member),
      kill: () => process.kill(t.pids[leader] ?? 0, "SIGKILL"),
      post: http.post,
    });
  } finally {
    // A writer may have left a request on the dead leader's connection: closing frees it.
    http.close();
  }
}

async function measure(t: Target, clients: number, durationMs: number, load: { url: string | (() => string); body: () => string }) {
  const http = createHttp1Client(t.http);
  // A server that stops answering must not hang the benchmark: drop its connections.
  const watchdog = setTimeout(() => http.close(), durationMs + stragglerGraceMs);
  const nodesBefore = t.pids.map(cpuMsOf);
  const selfBefore = process.cpuUsage();
  try {
    const result = await runLoad({ ...load, clients, durationMs, post: http.post });
    const self = process.cpuUsage(selfBefore);
    const cpu = { nodesMs: t.pids.map((pid, i) => cpuMsOf(pid) - (nodesBefore[i] ?? 0)), loadMs: (self.user + self.system) / 1000 };
    return { result, cpu };
  } finally {
    clearTimeout(watchdog);
    http.close();
  }
}

function describeCpu(t: Target, leader: number, cpu: { nodesMs: number[]; loadMs: number }, ops: number): string {
  const perOpUs = (ms: number): string => (ops === 0 ? "-" : ((ms * 1000) / ops).toFixed(0));
  const followers = cpu.nodesMs.filter((_, i) => i !== leader).map(perOpUs).join(" + ");
  return `cpu/op: leader ${perOpUs(cpu.nodesMs[leader] ?? 0)} µs, followers ${followers} µs, load generator ${perOpUs(cpu.loadMs)} µs` +
    ` (${t.name} leader: member ${leader + 1})`;
}

/** A row's figures and the CPU time its nodes used (all of them, the load generator left out). */
type Measured = LoadResult & { nodesCpuMs: number };

function printRatios(a: string, b: string, results: Map<string, Measured[]>): void {
  const ratio = (x: number, y: number): string => (y > 0 && Number.isFinite(x / y) ? `${(x / y).toFixed(2)}×` : "-");
  const cpuPerOp = (m: Measured): number => (m.ops === 0 ? Number.NaN : m.nodesCpuMs / m.ops);
  process.stdout.write(
    `\n${a}/${b} (ops/s: above 1 means ${a} is faster; p50, p99: below 1 means ${a} answers sooner;` +
      ` cpu/op: the nodes' CPU per answered request, below 1 means ${a} uses less)\n`,
  );
  for (const [i, row] of rows.entries()) {
    const x = results.get(a)?.[i];
    const y = results.get(b)?.[i];
    if (x === undefined || y === undefined) continue;
    process.stdout.write(
      `${row.label.padEnd(34)} ops/s ${ratio(x.opsPerSecond, y.opsPerSecond).padStart(7)}   p50 ${ratio(x.p50Ms, y.p50Ms).padStart(7)}   p99 ${ratio(x.p99Ms, y.p99Ms).padStart(7)}` +
        `   cpu/op ${ratio(cpuPerOp(x), cpuPerOp(y)).padStart(7)}\n`,
    );
  }
}
