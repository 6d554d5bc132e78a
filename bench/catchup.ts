// The availability part of `bun run bench -- --catchup`: nodes on loopback.
//   - One follower (three nodes): it is killed, --catchup-entries writes land (64 writers), and
//     it is restarted while 16 writers go on.
//   - A learner added to the same loaded cluster: a fourth, empty node is started and added
//     with add-node --learner while 16 writers go on; it must copy the whole log.
//   - Two followers at once (five nodes, so that the other three still commit): both are
//     killed, --catchup-entries writes land, and both are restarted together.
//   For each: time until every catching-up node applied what the leader had committed when it
//   began, entries/s per node, the leader's write p99 during the catch-up against before it,
//   the slowest GET /health on the leader meanwhile, the leader's event-loop lag (from
//   tensor_chain_event_loop_lag_seconds: the buckets of the largest and the 99th-percentile
//   lag) during against before, elections (term changes),
//   and which way the entries went (read back from the leader's WAL, images made, sent).
//   - The leader of a fresh three-node cluster is killed under 64 writers: the time from the
//     kill until writes succeed again.
//   - SPEC §4.6 node recovery on a fresh three-node cluster holding --catchup-entries rows: a
//     follower, then the leader, is stopped, loses the contents of raft/wal/ (recovery from
//     snapshot) or all of raft/ and store/ (full state rebuild), and is started again, once on a
//     quiet cluster and once under 16 writers: the time from its start until it is healthy and
//     has applied what the leader had committed then, how the leader gave it (log or image),
//     the writers' p99 meanwhile, and elections beyond the one a stopped leader causes.
//   - Followers crash one at a time (three nodes, --crash-seconds, default 60): kill -9 of a
//     follower every 0.5–2 s, restarted 2–6 s later, with 6 writers and 3 linearizable readers
//     spread over every node; the longest time in which no write succeeded anywhere, the
//     writes, and elections (the leader is never touched, so there should be none).
// Prints figures; asserts nothing.

import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createHttp1Client } from "./_http1.ts";
import { cpuMsOf, freePort, leaderKillMs, printRow, runLoad, startSvc, waitHealthy, type LoadResult, type Ports } from "./_lib.ts";

const value = "v".repeat(256);
type Post = ReturnType<typeof createHttp1Client>["post"];

/** Nodes on loopback, started and stopped by index; the first bootstraps the cluster. */
class BenchCluster {
  readonly members: (Ports & { id: string })[] = [];
  readonly procs: (Bun.Subprocess | null)[] = [];
  readonly dir = mkdtempSync(join(tmpdir(), "svc-bench-catchup-"));
  private key = 0;

  constructor(private readonly bin: string[]) {}

  static async start(bin: string[], count: number): Promise<BenchCluster> {
    const c = new BenchCluster(bin);
    for (let i = 0; i < count; i++) await c.allocate();
    for (let i = 0; i < count; i++) c.spawn(i, c.members.slice(0, count));
    try {
      await Promise.all(c.members.map((_, i) => waitHealthy(c.admin(i), 60_000)));
    } catch (e) {
      // Say which node and why before the directory goes: its process, and its log's end.
      for (let i = 0; i < count; i++) {
        const healthy = await fetch(`${c.admin(i)}/health`).then((r) => r.ok, () => false);
        if (healthy) continue;
        const proc = c.procs[i];
        const log = readFileSync(join(c.dir, `${c.members[i]!.id}.log`), "utf8").trimEnd().split("\n").slice(-30).join("\n");
        process.stderr.write(`${c.members[i]!.id} (${proc?.exitCode === null ? "running" : `exited ${proc?.exitCode}`}) is not healthy; its log ends:\n${log}\n`);
      }
      await c.close();
      throw e;
    }
    return c;
  }

  async allocate(): Promise<number> {
    this.members.push({ id: `node${this.members.length + 1}`, client: await freePort(), admin: await freePort(), peer: await freePort() });
    this.procs.push(null);
    return this.members.length - 1;
  }

  spawn(i: number, known = this.members): void {
    const m = this.members[i]!;
    this.procs[i] = startSvc(this.bin, this.dir, m.id, m, known, i === 0 && this.procs.every((p) => p === null));
  }

  async kill(i: number): Promise<void> {
    this.procs[i]?.kill("SIGKILL");
    await this.procs[i]?.exited;
  }

  /** A clean stop (SIGTERM), as `systemctl stop` does; the node no longer counts as running. */
  async stop(i: number): Promise<void> {
    this.procs[i]?.kill("SIGTERM");
    await this.procs[i]?.exited;
    this.procs[i] = null;
  }

  dataDir(i: number): string {
    return join(this.dir, this.members[i]!.id);
  }

  admin(i: number): string {
    return `http://127.0.0.1:${this.members[i]?.admin}`;
  }

  client(i: number): string {
    return `http://127.0.0.1:${this.members[i]?.client}`;
  }

  writeBody = (): string => JSON.stringify({ statements: [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: [++this.key, value] }] });

  async leader(): Promise<number> {
    const deadline = performance.now() + 30_000;
    while (performance.now() < deadline) {
      for (let i = 0; i < this.members.length; i++) {
        if (this.procs[i] !== null && (await metric(this.admin(i), "tensor_chain_is_leader").catch(() => 0)) === 1) return i;
      }
      await Bun.sleep(50);
    }
    throw new Error("no leader within 30 s");
  }

  /** SIGTERM first: a node run with --cpu-prof writes its profile only when it exits by itself. */
  async close(): Promise<void> {
    for (const p of this.procs) p?.kill("SIGTERM");
    const stopped = Promise.all(this.procs.map((p) => p?.exited));
    if (await Promise.race([stopped.then(() => true), Bun.sleep(15_000).then(() => false)]) === false) {
      for (const p of this.procs) p?.kill("SIGKILL");
      await stopped;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export async function benchCatchUp(options: { bin: string[]; entries: number; crashSeconds?: number; rows?: string[] }): Promise<void> {
  const http = createHttp1Client();
  const rows = new Set(options.rows ?? ["one", "two", "recover", "kill", "crash"]);
  try {
    if (rows.has("one")) await oneFollowerThenLearner(options, http.post);
    if (rows.has("two")) await twoFollowers(options, http.post);
    if (rows.has("recover")) await recoveryProcedures(options, http.post);
    if (rows.has("kill")) await leaderKillRow(options, http.post);
    if (rows.has("crash")) await followerCrashesRow({ bin: options.bin, seconds: options.crashSeconds ?? 60 }, http.post);
  } finally {
    http.close();
  }
}

async function followerCrashesRow(options: { bin: string[]; seconds: number }, post: Post): Promise<void> {
  const c = await BenchCluster.start(options.bin, 3);
  try {
    const leader = await c.leader();
    await execute(c.client(leader), { statements: ["CREATE TABLE w (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"] });
    const termBefore = await metric(c.admin(leader), "tensor_chain_term");
    const followers = c.members.map((_, i) => i).filter((i) => i !== leader);
    let stop = false;
    let nextId = 0;
    let writes = 0;
    let lastOkMs = performance.now();
    let longestGapMs = 0;
    const timedPost = (url: string, body: string, ms: number) =>
      Promise.race([post(url, body).catch(() => ({ ok: false })), Bun.sleep(ms).then(() => ({ ok: false }))]);
    // A write is sent again (same id, INSERT OR IGNORE), through the next node, until an answer says it happened.
    const writer = async (w: number): Promise<void> => {
      while (!stop) {
        const id = ++nextId;
        for (let attempt = 0; !stop; attempt++) {
          const body = JSON.stringify({ statements: [{ sql: "INSERT OR IGNORE INTO w (id, v) VALUES (?, ?)", params: [id, value] }] });
          const r = await timedPost(`${c.client((w + attempt) % c.members.length)}/v1/execute`, body, 3000);
          if (r.ok) {
            writes++;
            const now = performance.now();
            longestGapMs = Math.max(longestGapMs, now - lastOkMs);
            lastOkMs = now;
            break;
          }
          await Bun.sleep(20);
        }
      }
    };
    const reader = async (r: number): Promise<void> => {
      const body = JSON.stringify({ sql: "SELECT count(*) FROM w", consistency: "linearizable" });
      while (!stop) {
        await timedPost(`${c.client(r % c.members.length)}/v1/query`, body, 2000);
        await Bun.sleep(10);
      }
    };
    const clients = [...Array.from({ length: 6 }, (_, i) => writer(i)), ...Array.from({ length: 3 }, (_, i) => reader(i))];
    const started = performance.now();
    let kills = 0;
    while (performance.now() - started < options.seconds * 1000) {
      const victim = followers[Math.floor(Math.random() * followers.length)] ?? 0;
      await Bun.sleep(500 + Math.random() * 1500);
      await c.kill(victim);
      kills++;
      await Bun.sleep(2000 + Math.random() * 4000);
      c.spawn(victim);
    }
    for (const f of followers) await waitHealthy(c.admin(f), 60_000);
    stop = true;
    await Promise.all(clients);
    const elections = (await metric(c.admin(leader), "tensor_chain_term")) - termBefore;
    process.stdout.write(
      `followers crashing for ${options.seconds} s (${kills} kill -9, restarted 2–6 s later): ${writes.toLocaleString()} writes; ` +
      `longest time with no write succeeding anywhere ${longestGapMs.toFixed(0)} ms; elections ${elections}\n`,
    );
  } finally {
    await c.close();
  }
}

/** Remove what is inside `dir`, keeping `dir` itself (SPEC §4.6: "remove the contents of the WAL directory"). */
function emptyDir(dir: string): void {
  for (const name of readdirSync(dir)) rmSync(join(dir, name), { recursive: true, force: true });
}

/**
 * SPEC §4.6 on one cluster: for a follower and then the leader, each procedure quiet and under
 * load. A node is stopped cleanly, loses its state as the procedure says, and is started again;
 * the row ends when it is healthy and has applied what the leader had committed at its start.
 */
async function recoveryProcedures(options: { bin: string[]; entries: number }, post: Post): Promise<void> {
  const c = await BenchCluster.start(options.bin, 3);
  try {
    const first = await c.leader();
    await execute(c.client(first), { statements: ["CREATE TABLE kv (k INTEGER PRIMARY KEY, v TEXT NOT NULL)"] });
    await fill(c, first, options.entries, post);
    const procedures = [
      { name: "WAL contents removed (recovery from snapshot)", clear: (i: number) => emptyDir(join(c.dataDir(i), "raft", "wal")) },
      {
        name: "raft/ and store/ removed (full state rebuild)",
        clear: (i: number) => {
          for (const d of ["raft", "store"]) emptyDir(join(c.dataDir(i), d));
        },
      },
    ];
    for (const who of ["follower", "leader"] as const) {
      for (const procedure of procedures) {
        for (const loaded of [false, true]) {
          const leader = await c.leader();
          const node = who === "leader" ? leader : (leader + 1) % 3;
          const termBefore = await metric(c.admin(leader), "tensor_chain_term");
          await c.stop(node);
          procedure.clear(node);
          // A stopped leader: the others elect one of themselves first (not counted below).
          const serving = await c.leader();
          const termAfterStop = await metric(c.admin(serving), "tensor_chain_term");
          const pathBefore = await catchUpPath(c.admin(serving));
          let done = false;
          const load = loaded
            ? runLoad({ url: `${c.client(serving)}/v1/execute`, clients: 16, durationMs: 0, body: c.writeBody, post, until: () => done })
            : null;
          const target = await metric(c.admin(serving), "tensor_chain_commit_index");
          const started = performance.now();
          c.spawn(node);
          for (;;) {
            const healthy = await fetch(`${c.admin(node)}/health`).then((r) => r.ok, () => false);
            const applied = healthy ? await metric(c.admin(node), "tensor_chain_applied_index").catch(() => 0) : 0;
            if (applied >= target) break;
            if (performance.now() - started > 600_000) throw new Error(`${c.members[node]!.id} did not recover within 10 minutes`);
            await Bun.sleep(20);
          }
          const seconds = (performance.now() - started) / 1000;
          done = true;
          const during = await load;
          const pathAfter = await catchUpPath(c.admin(serving));
          const elections = (await metric(c.admin(serving), "tensor_chain_term")) - termAfterStop;
          const failed = pathAfter.imagesSent - pathAfter.imagesSentOk - (pathBefore.imagesSent - pathBefore.imagesSentOk);
          const sent = (failed > 0 ? `(${failed} image transfer${failed === 1 ? "" : "s"} failed) ` : "") + (pathAfter.imagesSentOk > pathBefore.imagesSentOk
            ? `an image${pathAfter.images > pathBefore.images ? " made for it" : ""} and ${(pathAfter.walEntries - pathBefore.walEntries).toLocaleString()} entries from the WAL`
            : `${(pathAfter.walEntries - pathBefore.walEntries).toLocaleString()} entries from the WAL`);
          process.stdout.write(
            `SPEC §4.6, the ${who} (${c.members[node]!.id}), ${procedure.name}, ${loaded ? "under 16 writers" : "quiet"}: ` +
            `healthy with ${target.toLocaleString()} entries applied ${seconds.toFixed(2)} s after its start; sent ${sent}; ` +
            (during === null ? "" : `writers' p99 ${during.p99Ms.toFixed(1)} ms (${during.ops.toLocaleString()} writes, ${during.errors} errors); `) +
            `elections ${elections}${who === "leader" ? ` (plus ${termAfterStop - termBefore} for the stopped leader)` : ""}\n`,
          );
        }
      }
    }
  } finally {
    await c.close();
  }
}

async function oneFollowerThenLearner(options: { bin: string[]; entries: number }, post: Post): Promise<void> {
  const c = await BenchCluster.start(options.bin, 3);
  try {
    let leader = await c.leader();
    await execute(c.client(leader), { statements: ["CREATE TABLE kv (k INTEGER PRIMARY KEY, v TEXT NOT NULL)"] });
    const follower = (leader + 1) % 3;
    const before = await loadWithLag(c, leader, post, 3000);
    printRow("leader writes, 16 clients (before)", before.load);

    const appliedAtKill = await metric(c.admin(follower), "tensor_chain_applied_index");
    await c.kill(follower);
    await fill(c, leader, options.entries, post);
    await catchUpRow(c, post, before, `one follower (3 nodes)`, [{ node: follower, appliedFrom: appliedAtKill }], () => c.spawn(follower));

    // A learner added to the loaded cluster: an empty node copies the whole log.
    leader = await c.leader();
    const learner = await c.allocate();
    c.spawn(learner);
    const m = c.members[learner]!;
    const addr = (p: number): string => `127.0.0.1:${p}`;
    await catchUpRow(c, post, before, "a learner added (3 voters)", [{ node: learner, appliedFrom: 0 }], async () => {
      const r = await fetch(`${c.admin(leader)}/admin/add-node`, {
        method: "POST",
        body: JSON.stringify({ id: m.id, peer: addr(m.peer), client: addr(m.client), admin: addr(m.admin), learner: true }),
      });
      if (!r.ok) throw new Error(`add-node answered ${r.status}: ${await r.text()}`);
    });
  } finally {
    await c.close();
  }
}

/** On a cluster of its own: the leader killed here writes no CPU profile. */
async function leaderKillRow(options: { bin: string[] }, post: Post): Promise<void> {
  const c = await BenchCluster.start(options.bin, 3);
  try {
    await execute(c.client(await c.leader()), { statements: ["CREATE TABLE kv (k INTEGER PRIMARY KEY, v TEXT NOT NULL)"] });
    await leaderKill(c, post);
  } finally {
    await c.close();
  }
}

async function twoFollowers(options: { bin: string[]; entries: number }, post: Post): Promise<void> {
  // Five nodes: with two of them down the other three still commit the writes they miss.
  const c = await BenchCluster.start(options.bin, 5);
  try {
    const leader = await c.leader();
    await execute(c.client(leader), { statements: ["CREATE TABLE kv (k INTEGER PRIMARY KEY, v TEXT NOT NULL)"] });
    const before = await loadWithLag(c, leader, post, 3000);
    printRow("leader writes, 16 clients (before, 5 nodes)", before.load);
    const followers = [(leader + 1) % 5, (leader + 2) % 5];
    const catching: { node: number; appliedFrom: number }[] = [];
    for (const f of followers) catching.push({ node: f, appliedFrom: await metric(c.admin(f), "tensor_chain_applied_index") });
    for (const f of followers) await c.kill(f);
    await fill(c, leader, options.entries, post);
    await catchUpRow(c, post, before, "two followers at once (5 nodes)", catching, () => {
      for (const f of followers) c.spawn(f);
    });
  } finally {
    await c.close();
  }
}

async function fill(c: BenchCluster, leader: number, entries: number, post: Post): Promise<void> {
  const t0 = performance.now();
  await writeCount(c.client(leader), entries, 64, c.writeBody, post);
  process.stdout.write(`${entries.toLocaleString()} writes landed in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
}

interface WithLag {
  load: LoadResult;
  lag: LagSummary;
  /** The leader's WAL fdatasync latency over the same time (its over50Ms: syncs over 50 ms). */
  sync: LagSummary;
}

/** 16 writers on the leader for `durationMs` (and until `until` says so), with its event-loop lag meanwhile. */
async function loadWithLag(c: BenchCluster, leader: number, post: Post, durationMs: number, until?: () => boolean): Promise<WithLag> {
  const lagBefore = await lagHistogram(c.admin(leader));
  const syncBefore = await lagHistogram(c.admin(leader), "tensor_chain_wal_sync_latency_seconds");
  const load = await runLoad({ url: `${c.client(leader)}/v1/execute`, clients: 16, durationMs, body: c.writeBody, post, ...(until === undefined ? {} : { until }) });
  const lag = summarizeLag(lagBefore, await lagHistogram(c.admin(leader)));
  const sync = summarizeLag(syncBefore, await lagHistogram(c.admin(leader), "tensor_chain_wal_sync_latency_seconds"));
  return { load, lag, sync };
}

/** Cumulative counts of a histogram (default tensor_chain_event_loop_lag_seconds) by bucket bound (seconds; Infinity last). */
async function lagHistogram(admin: string, name = "tensor_chain_event_loop_lag_seconds"): Promise<[number, number][]> {
  const text = await (await fetch(`${admin}/metrics`)).text();
  const out: [number, number][] = [];
  for (const m of text.matchAll(new RegExp(`^${name}_bucket\\{le="([^"]+)"\\} (\\S+)$`, "gm"))) {
    out.push([m[1] === "+Inf" ? Number.POSITIVE_INFINITY : Number(m[1]), Number(m[2])]);
  }
  return out;
}

interface LagSummary {
  /** Bucket bounds (ms) that hold the largest and the 99th-percentile lag seen between two readings. */
  maxMs: number;
  p99Ms: number;
  /** Probe samples (one per 20 ms) later than 50 ms: turns that would have made /health wait that long. */
  over50Ms: number;
}

function summarizeLag(before: [number, number][], after: [number, number][]): LagSummary {
  const delta = after.map(([le, n], i) => [le, n - (before[i]?.[1] ?? 0)] as const);
  const total = delta.at(-1)?.[1] ?? 0;
  const boundMs = (q: number): number => 1000 * (delta.find(([, n]) => n >= q * total)?.[0] ?? Number.NaN);
  const at50 = delta.find(([le]) => le >= 0.05)?.[1] ?? total;
  return { maxMs: boundMs(1), p99Ms: boundMs(0.99), over50Ms: total - at50 };
}

function lagText(l: LagSummary): string {
  const ms = (v: number): string => (Number.isFinite(v) ? `≤${v}` : ">2048");
  return `max ${ms(l.maxMs)} ms, p99 ${ms(l.p99Ms)} ms, ${l.over50Ms} samples over 50 ms`;
}

/**
 * `begin` starts the catch-up of `catching` (restarts, or adds a node); 16 writers go on at the
 * leader until every one of them applied what the leader had committed at that moment.
 */
async function catchUpRow(
  c: BenchCluster, post: Post, before: WithLag, label: string,
  catching: { node: number; appliedFrom: number }[], begin: () => void | Promise<void>,
): Promise<void> {
  const leader = await c.leader();
  const termBefore = await metric(c.admin(leader), "tensor_chain_term");
  const pathBefore = await catchUpPath(c.admin(leader));
  const target = await metric(c.admin(leader), "tensor_chain_commit_index");
  const started = performance.now();
  const cpuBefore = cpuByNode(c);
  const benchCpuBefore = process.cpuUsage();
  await begin();
  const caughtUpMs = catching.map(() => Number.NaN);
  // When each node was first seen to apply past where it stood: its process start-up (and for
  // a learner, the add-node round) comes before, and is not catching up.
  const firstAppliedMs = catching.map(() => Number.NaN);
  let healthMaxMs = 0;
  let watching = true;
  const probeLeader = (async () => {
    while (watching) {
      const t0 = performance.now();
      await fetch(`${c.admin(leader)}/health`).catch(() => undefined);
      healthMaxMs = Math.max(healthMaxMs, performance.now() - t0);
      await Bun.sleep(20);
    }
  })();
  // Each catching node is watched on its own, through the applied index in its /health (a
  // small answer): a watcher that waited on the leader's /health or on another node's whole
  // /metrics would see the moment late, and count that against the catch-up.
  const watchers = catching.map(async (k, i) => {
    while (watching && Number.isNaN(caughtUpMs[i]!)) {
      const applied = await appliedIndex(c.admin(k.node));
      const atMs = performance.now() - started;
      if (Number.isNaN(firstAppliedMs[i]!) && applied > k.appliedFrom) firstAppliedMs[i] = atMs;
      if (applied >= target) caughtUpMs[i] = atMs;
      else await Bun.sleep(10);
    }
  });
  const watch = Promise.all([probeLeader, ...watchers]);
  const allCaughtUp = (): boolean => caughtUpMs.every((ms) => !Number.isNaN(ms)) || performance.now() - started > 600_000;
  const during = await loadWithLag(c, leader, post, 2000, allCaughtUp);
  while (!allCaughtUp()) await Bun.sleep(50);
  const cpu = cpuByNode(c).map((ms, i) => ms - (catching.some((k) => k.node === i) ? 0 : cpuBefore[i]!));
  const benchCpu = process.cpuUsage(benchCpuBefore);
  watching = false;
  await watch;
  const elections = (await metric(c.admin(leader), "tensor_chain_term")) - termBefore;
  const pathAfter = await catchUpPath(c.admin(leader));
  printRow(`leader writes, 16 clients (${label})`, during.load);
  const seconds = Math.max(...caughtUpMs) / 1000;
  const entries = catching.map((k) => target - k.appliedFrom);
  const rates = catching.map((_, k) => (entries[k]! / (caughtUpMs[k]! / 1000)).toFixed(0));
  // A node seen only once it had applied everything (an image installed at once) has no rate of its own.
  const applyRates = catching.map((_, k) => (caughtUpMs[k]! > firstAppliedMs[k]! ? (entries[k]! / ((caughtUpMs[k]! - firstAppliedMs[k]!) / 1000)).toFixed(0) : "—"));
  const startUps = catching.map((_, k) => (firstAppliedMs[k]! / 1000).toFixed(2));
  process.stdout.write(
    `catch-up, ${label}: ${entries.map((n) => n.toLocaleString()).join(" + ")} entries in ${seconds.toFixed(2)} s, ${rates.join(" / ")} entries/s ` +
    `(first entry applied after ${startUps.join(" / ")} s; ${applyRates.join(" / ")} entries/s from there); ` +
    `leader p99 ${during.load.p99Ms.toFixed(1)} ms against ${before.load.p99Ms.toFixed(1)} ms before; slowest /health ${healthMaxMs.toFixed(0)} ms; ` +
    `leader event-loop lag ${lagText(during.lag)} (before: ${lagText(before.lag)}); ` +
    `leader fdatasync max ${lagText(during.sync).split(",")[0]!.slice(4)}, p99 ${lagText(during.sync).split(",")[1]!.trim().slice(4)} (before: ${lagText(before.sync).split(",")[0]!.slice(4)}, ${lagText(before.sync).split(",")[1]!.trim().slice(4)}); elections ${elections}; ` +
    `path: ${(pathAfter.walEntries - pathBefore.walEntries).toLocaleString()} entries read back from the leader's WAL, ` +
    `${pathAfter.images - pathBefore.images} images made, ${pathAfter.imagesSent - pathBefore.imagesSent} snapshots sent\n`,
  );
  // Where the machine's CPU went meanwhile: on 2 cores the catching-up nodes compete with the leader.
  const role = (i: number): string => (i === leader ? "leader" : catching.some((k) => k.node === i) ? "catching up" : "follower");
  const wallS = Math.max(...caughtUpMs) / 1000;
  process.stdout.write(
    `  CPU seconds over those ${wallS.toFixed(2)} s (${navigator.hardwareConcurrency} cores): ` +
    cpu.map((ms, i) => `${c.members[i]!.id} ${role(i)} ${(ms / 1000).toFixed(2)}`).join(", ") +
    `, load generator ${((benchCpu.user + benchCpu.system) / 1e6).toFixed(2)}\n`,
  );
}

/** CPU ms used so far by each running node (0 for one that is not running; a restarted node counts from its start). */
function cpuByNode(c: BenchCluster): number[] {
  return c.procs.map((p) => {
    if (p === null || p.exitCode !== null || p.signalCode !== null) return 0;
    try {
      return cpuMsOf(p.pid);
    } catch {
      return 0;
    }
  });
}

/** Leader kill under 64 writers (bench/_lib.ts leaderKillMs): how long until writes succeed again. */
async function leaderKill(c: BenchCluster, post: Post): Promise<void> {
  const leader = await c.leader();
  const ms = await leaderKillMs({
    leader,
    survivors: c.members.map((_, i) => i).filter((i) => i !== leader && c.procs[i] !== null),
    write: (member) => ({ url: `${c.client(member)}/v1/execute`, body: c.writeBody }),
    kill: () => c.procs[leader]?.kill("SIGKILL"),
    post,
  });
  process.stdout.write(`leader killed under 64 writers (250 ms request timeout): writes succeed again after ${ms.toFixed(0)} ms\n`);
}

async function writeCount(url: string, count: number, clients: number, body: () => string, postFn: Post): Promise<void> {
  let left = count;
  await Promise.all(Array.from({ length: clients }, async () => {
    while (left > 0) {
      left--;
      const r = await postFn(`${url}/v1/execute`, body());
      if (!r.ok) left++;
    }
  }));
}

async function catchUpPath(admin: string): Promise<{ walEntries: number; images: number; imagesSent: number; imagesSentOk: number }> {
  return {
    walEntries: await metric(admin, "tensor_chain_catch_up_log_entries_total"),
    images: await metric(admin, "tensor_chain_snapshots_total"),
    imagesSent: await metric(admin, 'tensor_chain_snapshot_transfers_total{result="sent_ok"}') + await metric(admin, 'tensor_chain_snapshot_transfers_total{result="sent_failed"}') + await metric(admin, 'tensor_chain_snapshot_transfers_total{result="sent_stalled"}'),
    imagesSentOk: await metric(admin, 'tensor_chain_snapshot_transfers_total{result="sent_ok"}'),
  };
}

async function metric(admin: string, name: string): Promise<number> {
  const text = await (await fetch(`${admin}/metrics`)).text();
  const escaped = name.replace(/[{}"=]/g, (c) => `\\${c}`);
  return Number(new RegExp(`^${escaped} (\\S+)$`, "m").exec(text)?.[1] ?? 0);
}

async function execute(base: string, body: unknown): Promise<void> {
  const r = await fetch(`${base}/v1/execute`, { method: "POST", body: JSON.stringify(body) });
  if (!r.ok) throw new Error(`write failed: ${r.status} ${await r.text()}`);
}

/** The applied index a node's /health reports; 0 while it does not answer (starting). */
async function appliedIndex(admin: string): Promise<number> {
  try {
    const body = (await (await fetch(`${admin}/health`)).json()) as { applied_index?: number };
    return body.applied_index ?? 0;
  } catch {
    return 0;
  }
}
