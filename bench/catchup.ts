// The availability part of `bun run bench -- --catchup`: three nodes on loopback.
//   - A follower is killed, --catchup-entries writes land (64 writers), and it is restarted
//     while 16 writers go on: time until it applied what the leader had committed at its
//     restart, entries/s, the leader's write p99 during the catch-up against before it, the
//     slowest GET /health on the leader meanwhile, and elections (term changes).
//   - The leader is killed under 64 writers: the time from the kill until writes succeed again.
// Prints figures; asserts nothing.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createHttp1Client } from "./_http1.ts";
import { freePort, printRow, runLoad, startSvc, waitHealthy, type Ports } from "./_lib.ts";

const value = "v".repeat(256);

export async function benchCatchUp(options: { bin: string[]; entries: number }): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "svc-bench-catchup-"));
  const members: (Ports & { id: string })[] = [];
  for (let i = 0; i < 3; i++) members.push({ id: `node${i + 1}`, client: await freePort(), admin: await freePort(), peer: await freePort() });
  const procs = members.map((m, i) => startSvc(options.bin, dir, m.id, m, members, i === 0));
  const admin = (i: number): string => `http://127.0.0.1:${members[i]?.admin}`;
  const client = (i: number): string => `http://127.0.0.1:${members[i]?.client}`;
  const http = createHttp1Client();
  let key = 0;
  const writeBody = (): string => JSON.stringify({ statements: [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: [++key, value] }] });
  try {
    await Promise.all(members.map((_, i) => waitHealthy(admin(i), 60_000)));
    let leader = await leaderOf(members.length, admin);
    await post(client(leader), { statements: ["CREATE TABLE kv (k INTEGER PRIMARY KEY, v TEXT NOT NULL)"] });
    const follower = (leader + 1) % members.length;
    const before = await runLoad({ url: `${client(leader)}/v1/execute`, clients: 16, durationMs: 3000, body: writeBody, post: http.post });
    printRow("leader writes, 16 clients (before)", before);

    procs[follower]?.kill("SIGKILL");
    await procs[follower]?.exited;
    const fill = performance.now();
    await writeCount(client(leader), options.entries, 64, writeBody, http.post);
    process.stdout.write(`follower down; ${options.entries.toLocaleString()} writes landed in ${((performance.now() - fill) / 1000).toFixed(1)} s\n`);

    const termBefore = await metric(admin(leader), "tensor_chain_term");
    // Which way the follower is caught up: entries read back from the leader's WAL, or an image.
    const pathBefore = await catchUpPath(admin(leader));
    const target = await metric(admin(leader), "tensor_chain_commit_index");
    const startApplied = 0;
    const restarted = performance.now();
    const m = members[follower];
    if (m === undefined) throw new Error("no follower");
    procs[follower] = startSvc(options.bin, dir, m.id, m, members, false);
    let healthMaxMs = 0;
    let caughtUpMs = Number.NaN;
    let watching = true;
    const watch = (async () => {
      while (watching) {
        const t0 = performance.now();
        await fetch(`${admin(leader)}/health`).catch(() => undefined);
        healthMaxMs = Math.max(healthMaxMs, performance.now() - t0);
        if (Number.isNaN(caughtUpMs) && (await metric(admin(follower), "tensor_chain_applied_index").catch(() => 0)) >= target) caughtUpMs = performance.now() - restarted;
        await Bun.sleep(20);
      }
    })();
    const during = await runLoad({
      url: `${client(leader)}/v1/execute`, clients: 16, body: writeBody, post: http.post,
      durationMs: 2000,
    });
    while (Number.isNaN(caughtUpMs) && performance.now() - restarted < 600_000) await Bun.sleep(50);
    watching = false;
    await watch;
    const elections = (await metric(admin(leader), "tensor_chain_term")) - termBefore;
    const pathAfter = await catchUpPath(admin(leader));
    const fromWal = pathAfter.walEntries - pathBefore.walEntries;
    const imagesMade = pathAfter.images - pathBefore.images;
    const imagesSent = pathAfter.imagesSent - pathBefore.imagesSent;
    printRow("leader writes, 16 clients (catch-up)", during);
    const seconds = caughtUpMs / 1000;
    process.stdout.write(
      `catch-up of ${(target - startApplied).toLocaleString()} entries: ${seconds.toFixed(2)} s, ${((target - startApplied) / seconds).toFixed(0)} entries/s; ` +
      `leader p99 ${during.p99Ms.toFixed(1)} ms against ${before.p99Ms.toFixed(1)} ms before; slowest /health ${healthMaxMs.toFixed(0)} ms; elections ${elections}; ` +
      `path: ${fromWal.toLocaleString()} entries read back from the leader's WAL, ${imagesMade} images made, ${imagesSent} snapshots sent\n`,
    );

    // Leader kill under 64 writers: how long until writes succeed again.
    leader = await leaderOf(members.length, admin);
    const survivors = members.map((_, i) => i).filter((i) => i !== leader);
    let killedAt = 0;
    let firstOkAfterKill = Number.NaN;
    let stop = false;
    const writers = Array.from({ length: 64 }, async (_, w) => {
      let turn = w;
      while (!stop) {
        const target = killedAt === 0 ? leader : survivors[turn++ % survivors.length] ?? 0;
        const r = await http.post(`${client(target)}/v1/execute`, writeBody()).catch(() => ({ ok: false }));
        if (r.ok && killedAt > 0 && Number.isNaN(firstOkAfterKill) && target !== leader) firstOkAfterKill = performance.now() - killedAt;
        if (!r.ok) await Bun.sleep(5);
      }
    });
    await Bun.sleep(2000);
    killedAt = performance.now();
    procs[leader]?.kill("SIGKILL");
    while (Number.isNaN(firstOkAfterKill) && performance.now() - killedAt < 30_000) await Bun.sleep(10);
    stop = true;
    await Promise.all(writers);
    process.stdout.write(`leader killed under 64 writers: writes succeed again after ${firstOkAfterKill.toFixed(0)} ms\n`);
  } finally {
    http.close();
    for (const p of procs) p?.kill("SIGKILL");
    await Promise.all(procs.map((p) => p?.exited));
    rmSync(dir, { recursive: true, force: true });
  }
}

async function writeCount(url: string, count: number, clients: number, body: () => string, postFn: (url: string, body: string) => Promise<{ ok: boolean }>): Promise<void> {
  let left = count;
  await Promise.all(Array.from({ length: clients }, async () => {
    while (left > 0) {
      left--;
      const r = await postFn(`${url}/v1/execute`, body());
      if (!r.ok) left++;
    }
  }));
}

async function leaderOf(count: number, admin: (i: number) => string): Promise<number> {
  const deadline = performance.now() + 30_000;
  while (performance.now() < deadline) {
    for (let i = 0; i < count; i++) {
      if ((await metric(admin(i), "tensor_chain_is_leader").catch(() => 0)) === 1) return i;
    }
    await Bun.sleep(50);
  }
  throw new Error("no leader within 30 s");
}

async function catchUpPath(admin: string): Promise<{ walEntries: number; images: number; imagesSent: number }> {
  return {
    walEntries: await metric(admin, "tensor_chain_catch_up_log_entries_total"),
    images: await metric(admin, "tensor_chain_snapshots_total"),
    imagesSent: await metric(admin, 'tensor_chain_snapshot_transfers_total{result="sent_ok"}') + await metric(admin, 'tensor_chain_snapshot_transfers_total{result="sent_failed"}') + await metric(admin, 'tensor_chain_snapshot_transfers_total{result="sent_stalled"}'),
  };
}

async function metric(admin: string, name: string): Promise<number> {
  const text = await (await fetch(`${admin}/metrics`)).text();
  const escaped = name.replace(/[{}"=]/g, (c) => `\\${c}`);
  return Number(new RegExp(`^${escaped} (\\S+)$`, "m").exec(text)?.[1] ?? 0);
}

async function post(base: string, body: unknown): Promise<void> {
  const r = await fetch(`${base}/v1/execute`, { method: "POST", body: JSON.stringify(body) });
  if (!r.ok) throw new Error(`write failed: ${r.status} ${await r.text()}`);
}
