// Crash safety of one node, driving the compiled binary: kill -9 under concurrent write load
// loses nothing that was acknowledged and invents nothing, the store is derived state that
// is rebuilt exactly from snapshot + WAL, and an emptied WAL restarts from the store.
//
// The kill points are drawn from seeded PRNGs (one per test, from the seed and the test's
// name); the seed is printed first and SEED=<n> makes the same choices again, for the whole
// file or one test (-t). The interleaving of 32 clients with the kill is the OS's.

import { Database } from "bun:sqlite";
import * as fs from "node:fs";
import { join } from "node:path";
import { describe, expect } from "bun:test";
import { createPrng, type Prng } from "../../src/util/prng.ts";
import { readHardState } from "../../src/storage/index.ts";
import { Store } from "../../src/store/index.ts";
import {
  Ledger, WriteLoad, execute, getJson, kvSchema, kvTable, metric, procTest, query, request, runBinary, useCompiledBinary, useProcessCleanup, waitFor,
  type NodeProcess, type ProcEnv, type SqlValue,
} from "../lib/proc.ts";

useProcessCleanup();
useCompiledBinary();

const seed = process.env.SEED !== undefined ? Number(process.env.SEED) : Date.now() % 2_147_483_647;
console.log(`test/e2e/crash.test.ts: SEED=${seed}`);

/** The random choices of one test: the same for the same seed, whichever tests run. */
function prngFor(env: ProcEnv): Prng {
  return createPrng(seed, Bun.hash.crc32(env.label));
}

const writersCount = 32;
const MIB = 1024 * 1024;

async function dumpKv(node: NodeProcess): Promise<SqlValue[][]> {
  return query(node.clientUrl, `SELECT k, v FROM ${kvTable} ORDER BY k`);
}

/** A new node with the kv table and `acked` writes acknowledged by concurrent writers, now stopped. */
async function nodeWithRows(env: ProcEnv, load: { ledger: Ledger; keyPrefix: string; clients: number; acked: number }): Promise<NodeProcess> {
  const node = await env.startSingleNode();
  await execute(node.clientUrl, [kvSchema]);
  const writers = new WriteLoad({ target: () => node.clientUrl, clients: load.clients, keyPrefix: load.keyPrefix, ledger: load.ledger });
  await writers.untilAcked(load.acked);
  await writers.stop();
  return node;
}

async function stats(node: NodeProcess): Promise<Record<string, unknown>> {
  return getJson(`${node.adminUrl}/admin/stats`);
}

/**
 * Write with `writersCount` clients until `killAfterAcks` writes are acknowledged (and
 * `before` resolves, when given), kill -9 the node with the other writes in flight, restart
 * it and check the table against everything the clients were told.
 */
async function crashCycle(
  node: NodeProcess,
  ledger: Ledger,
  label: string,
  killAfterAcks: number,
  before?: (load: WriteLoad) => Promise<void>,
): Promise<void> {
  const load = new WriteLoad({ target: () => node.clientUrl, clients: writersCount, keyPrefix: label, ledger });
  try {
    await load.untilAcked(killAfterAcks);
    if (before !== undefined) await before(load);
  } finally {
    await node.kill9();
    await load.stop();
  }
  await node.start();
  const problems = ledger.check(await dumpKv(node));
  expect(problems.slice(0, 20)).toEqual([]);
  console.log(`${label}: killed after ${load.ackedCount} acks; rows present after restart: ${ledger.seen.size}; ` +
    `unknown outcomes so far: ${ledger.count("unknown")}`);
}

describe("crash safety of one node (compiled binary)", () => {
  procTest("every acknowledged write survives five kill -9 under 32 concurrent writers, and nothing unwritten appears", async (env) => {
    const prng = prngFor(env);
    const node = await env.startSingleNode();
    await execute(node.clientUrl, [kvSchema]);
    const ledger = new Ledger(64);
    for (let cycle = 1; cycle <= 5; cycle++) {
      await crashCycle(node, ledger, `cycle${cycle}`, 50 + prng.nextInt(1500));
    }
    expect(ledger.count("acked")).toBeGreaterThan(0);

    // The store is derived state: without store/ the node rebuilds it from the Raft log and
    // must end with exactly the same rows.
    const before = await dumpKv(node);
    const appliedBefore = Number((await stats(node))["applied_index"]);
    expect(await node.stop()).toBe(0);
    fs.rmSync(join(node.dataDir, "store"), { recursive: true, force: true });
    await node.start();
    expect(await dumpKv(node)).toEqual(before);
    // Everything the old store had applied was applied again (a new term adds its own entry).
    expect(Number((await stats(node))["applied_index"])).toBeGreaterThanOrEqual(appliedBefore);
  }, 90_000);

  procTest("acknowledged writes survive kill -9 while snapshots are taken and WAL segments removed under load", async (env) => {
    const prng = prngFor(env);
    // Checkpoints every 50 entries, 1 MiB segments with 1 KiB rows, and images asked for
    // again and again (POST /admin/snapshot): segment removal after an image happens many
    // times during each cycle, so a kill can land in any part of it.
    const node = await env.startSingleNode({ snapshotIntervalEntries: 50, wal: { segmentSizeBytes: 1 * MIB } });
    await execute(node.clientUrl, [kvSchema]);
    const ledger = new Ledger(1024);
    for (let cycle = 1; cycle <= 3; cycle++) {
      await crashCycle(node, ledger, `snap${cycle}`, 200 + prng.nextInt(800), async (load) => {
        // Counters start at zero in each process: wait until this run has removed a segment,
        // then let a random number of further writes through before the kill.
        await waitForRemovedSegment(node);
        await load.untilAcked(load.ackedCount + prng.nextInt(1000));
      });
    }
    const s = await stats(node);
    expect(Number(s["snapshot_index"])).toBeGreaterThan(0);
    expect(Number(s["wal_first_index"])).toBeGreaterThan(1);

    // Rebuilding the store now starts from the newest snapshot and replays the WAL after it.
    const before = await dumpKv(node);
    expect(await node.stop()).toBe(0);
    fs.rmSync(join(node.dataDir, "store"), { recursive: true, force: true });
    await node.start();
    expect(await dumpKv(node)).toEqual(before);
  }, 90_000);

  procTest("kill -9 at random points of recovery (store rebuilt from WAL and snapshot) loses nothing", async (env) => {
    const prng = prngFor(env);
    const node = await env.startSingleNode({ snapshotIntervalEntries: 500 });
    await execute(node.clientUrl, [kvSchema]);
    const ledger = new Ledger(1024);
    const load = new WriteLoad({ target: () => node.clientUrl, clients: writersCount, keyPrefix: "data", ledger });
    await load.untilAcked(1500 + prng.nextInt(1000));
    await load.stop();
    const before = await dumpKv(node);
    expect(await node.stop()).toBe(0);

    // Without store/ every start rebuilds it (install the snapshot, replay the WAL after it);
    // a kill anywhere in that, or in the first moments of serving, must not matter.
    fs.rmSync(join(node.dataDir, "store"), { recursive: true, force: true });
    for (let attempt = 1; attempt <= 4; attempt++) {
      node.spawn();
      // A random moment after exec: the choice is what is random, nothing is asserted on time.
      await Bun.sleep(prng.nextInt(400));
      await node.kill9();
    }
    // While it recovers, /health answers 503 naming the recovery state (or nothing yet).
    node.spawn();
    const notReady = new Set<string>();
    await waitFor("the rebuilt node to be healthy", async () => {
      const r = await request<{ recovery?: string }>(`${node.clientUrl}/health`, { timeoutMs: 2_000 }).catch(() => null);
      if (r === null || r.status === 200) return r !== null;
      notReady.add(`${r.status} ${r.body?.recovery}`);
      return false;
    }, { deadlineMs: 30_000, intervalMs: 5 });
    for (const answer of notReady) expect(answer).toMatch(/^503 (starting|replaying_wal|joining)$/);
    expect(await dumpKv(node)).toEqual(before);
    expect(ledger.check(before)).toEqual([]);
  }, 60_000);

  procTest("a power loss after a checkpoint: the store as its last checkpoint synced it, plus the WAL after it, holds every acknowledged write without a rebuild", async (env) => {
    const prng = prngFor(env);
    // The node keeps, beside the store, its files as each checkpoint synced them: what a power
    // cut could leave of a store that the kernel had not written back since (a test-only hook).
    const node = await env.startSingleNode({ snapshotIntervalEntries: 50 }, { env: { SVC_TEST_KEEP_SYNCED_STORE: "1" } });
    await execute(node.clientUrl, [kvSchema]);
    const ledger = new Ledger(256);
    const load = new WriteLoad({ target: () => node.clientUrl, clients: writersCount, keyPrefix: "power", ledger });
    try {
      await load.untilAcked(300 + prng.nextInt(500));
      await waitFor("a checkpoint", async () => (await metric(node.adminUrl, "tensor_chain_checkpoints_total")) >= 2, { deadlineMs: 30_000 });
      await load.untilAcked(load.ackedCount + 50 + prng.nextInt(300));
      await node.kill9();
    } finally {
      await load.stop();
    }
    const storePath = join(node.dataDir, "store", "state.db");
    for (const suffix of ["", "-wal"]) {
      const synced = `${storePath}${suffix}.synced`;
      if (fs.existsSync(synced)) fs.copyFileSync(synced, storePath + suffix);
      else fs.rmSync(storePath + suffix, { force: true });
    }
    fs.rmSync(`${storePath}-shm`, { force: true });
    fs.writeFileSync(`${storePath}-boot`, "00000000-0000-0000-0000-000000000000\n");

    await node.start();
    expect(ledger.check(await dumpKv(node)).slice(0, 20)).toEqual([]);
    const log = fs.readFileSync(node.logPath, "utf8").split("start #2 of")[1] ?? "";
    expect(log).toContain("was open when the machine went down; it is consistent");
    expect(log).not.toContain("rebuilding it");
    const verify = await runBinary(["admin", "verify-checksums", "--node", node.adminUrl]);
    expect(verify.stdout + verify.stderr).toContain("all checks passed");
  }, 60_000);

  procTest("a store left open by a machine that went down is rebuilt, even when it lost writes the disk never got", async (env) => {
    const prng = prngFor(env);
    const ledger = new Ledger(256);
    const node = await nodeWithRows(env, { ledger, keyPrefix: "early", clients: writersCount, acked: 300 + prng.nextInt(300) });
    expect(await node.stop()).toBe(0);
    const storePath = join(node.dataDir, "store", "state.db");
    expect(fs.existsSync(`${storePath}-boot`)).toBe(false);
    // The store as it reads, its SQLite WAL applied: after a stop it may still hold part of it
    // (a checkpoint happens when the last connection closes, and the SQL processes have one).
    const older = readStoreWithWal(storePath);

    await node.start();
    expect(fs.existsSync(`${storePath}-boot`)).toBe(true);
    await crashCycle(node, ledger, "late", 500 + prng.nextInt(1000));
    await node.kill9();

    // What a power cut can leave of a store that is never flushed while open: its SQLite WAL
    // gone, and the page that records the applied index written while the pages of the rows
    // were not. SQLite finds nothing wrong with such a file; only the boot mark tells.
    const metaPage = metaRootPage(storePath);
    const latest = readStoreWithWal(storePath);
    fs.rmSync(`${storePath}-wal`, { force: true });
    fs.rmSync(`${storePath}-shm`, { force: true });
    const pageSize = older.readUInt16BE(16);
    const torn = Buffer.from(older);
    torn.set(latest.subarray((metaPage - 1) * pageSize, metaPage * pageSize), (metaPage - 1) * pageSize);
    fs.writeFileSync(storePath, torn);
    fs.writeFileSync(`${storePath}-boot`, "00000000-0000-0000-0000-000000000000\n");
    // A store with no checkpoint record was written before checkpoints existed, without syncs
    // (synchronous=OFF): nothing says it is whole, so it is rebuilt.
    fs.rmSync(join(node.dataDir, "raft", "checkpoint"), { force: true });

    await node.start();
    expect(ledger.check(await dumpKv(node)).slice(0, 20)).toEqual([]);
    const verify = await runBinary(["admin", "verify-checksums", "--node", node.adminUrl]);
    expect(verify.stdout + verify.stderr).toContain("all checks passed");
    expect(fs.readFileSync(node.logPath, "utf8")).toContain("was open when the machine went down");
  }, 60_000);

  procTest("SIGTERM under load exits 0 and keeps every acknowledged write", async (env) => {
    const prng = prngFor(env);
    const node = await env.startSingleNode();
    await execute(node.clientUrl, [kvSchema]);
    const ledger = new Ledger(64);
    const load = new WriteLoad({ target: () => node.clientUrl, clients: writersCount, keyPrefix: "term", ledger });
    let exitCode: number;
    try {
      await load.untilAcked(200 + prng.nextInt(800));
      exitCode = await node.stop();
    } finally {
      await load.stop();
    }
    expect(exitCode).toBe(0);
    await node.start();
    expect(ledger.check(await dumpKv(node))).toEqual([]);
  });

  procTest("a WAL segment left empty by a crash while it was being created does not cost acknowledged writes", async (env) => {
    const ledger = new Ledger(64);
    const node = await nodeWithRows(env, { ledger, keyPrefix: "first", clients: 4, acked: 50 });
    const lastIndex = Number((await stats(node))["wal_last_index"]);
    expect(await node.stop()).toBe(0);

    // kill -9 between creating the next segment file (O_CREAT|O_EXCL) and writing its header
    // record leaves exactly this: an empty file named for the next sequence and index.
    const walDir = join(node.dataDir, "raft", "wal");
    const segments = fs.readdirSync(walDir).filter((n) => /^[0-9a-f]{16}-[0-9a-f]{16}\.wal$/.test(n)).sort();
    const lastSeq = Number.parseInt((segments.at(-1) ?? "").slice(0, 16), 16);
    const hex16 = (n: number): string => n.toString(16).padStart(16, "0");
    fs.writeFileSync(join(walDir, `${hex16(lastSeq + 1)}-${hex16(lastIndex + 1)}.wal`), new Uint8Array(0));

    await node.start();
    const second = new WriteLoad({ target: () => node.clientUrl, clients: 4, keyPrefix: "second", ledger });
    await second.untilAcked(50);
    await second.stop();
    await node.kill9();
    await node.start();
    expect(ledger.check(await dumpKv(node))).toEqual([]);
  });

  procTest("a node whose WAL directory was emptied comes back with its store's data and a log that starts after it", async (env) => {
    const prng = prngFor(env);
    const ledger = new Ledger(64);
    const node = await nodeWithRows(env, { ledger, keyPrefix: "before", clients: writersCount, acked: 300 + prng.nextInt(300) });
    const before = await dumpKv(node);
    const appliedBefore = Number((await stats(node))["applied_index"]);
    expect(await node.stop()).toBe(0);

    const walDir = join(node.dataDir, "raft", "wal");
    for (const name of fs.readdirSync(walDir)) fs.rmSync(join(walDir, name), { recursive: true, force: true });
    await node.start();
    expect(await dumpKv(node)).toEqual(before);
    const s = await stats(node);
    expect(Number(s["snapshot_index"])).toBeGreaterThanOrEqual(appliedBefore);
    expect(Number(s["wal_first_index"] ?? 0) === 0 || Number(s["wal_first_index"]) > appliedBefore).toBe(true);

    // The new log is a real log: writes after it are durable across another kill -9.
    expect(ledger.check(before)).toEqual([]);
    await crashCycle(node, ledger, "after", 100 + prng.nextInt(400));
    const verify = await runBinary(["admin", "verify-checksums", "--node", node.adminUrl]);
    expect(verify.stdout + verify.stderr).toContain("all checks passed");
    expect(verify.exitCode).toBe(0);
    expect(node.log()).not.toContain("the WAL was emptied after this node stopped without closing its store");
  }, 60_000);

  procTest("a lone node whose raft/ was removed keeps its store, the only copy of its data, and goes on from it", async (env) => {
    const ledger = new Ledger(64);
    const node = await nodeWithRows(env, { ledger, keyPrefix: "before", clients: writersCount, acked: 200 });
    const before = await dumpKv(node);
    expect(await node.stop()).toBe(0);
    fs.rmSync(join(node.dataDir, "raft"), { recursive: true, force: true });
    await node.start();
    expect(await dumpKv(node)).toEqual(before);
    expect(node.log()).toContain("this lone node keeps its store, the only copy of its data");
    // The same cluster: bootstrapped once, at the first start.
    expect(node.log().split("bootstrapped a new cluster").length - 1).toBe(1);
    // And it is a working log again: writes after it survive a kill -9.
    await crashCycle(node, ledger, "after", 100);
  }, 60_000);

  procTest("a lone node stopped cleanly under writes, its WAL then emptied, starts from its store with every acknowledged write (its saved commit is what it applied)", async (env) => {
    const ledger = new Ledger(64);
    const node = await env.startSingleNode();
    await execute(node.clientUrl, [kvSchema]);
    const walDir = join(node.dataDir, "raft", "wal");
    for (let round = 0; round < 3; round++) {
      // Stopped while writes are in flight: some entries may be committed and not yet applied.
      const writers = new WriteLoad({ target: () => node.clientUrl, clients: writersCount, keyPrefix: `stop-${round}`, ledger });
      await writers.untilAcked(300 * (round + 1));
      expect(await node.stop()).toBe(0);
      await writers.stop();
      const hardState = readHardState(join(node.dataDir, "raft", "hardstate"));
      const store = Store.open(join(node.dataDir, "store", "state.db"), { check: false });
      const applied = store.meta.appliedIndex;
      store.close();
      expect(hardState?.commit ?? 0).toBeLessThanOrEqual(applied);
      for (const name of fs.readdirSync(walDir)) fs.rmSync(join(walDir, name), { recursive: true, force: true });
      await node.start();
      expect(ledger.check(await dumpKv(node)).slice(0, 20)).toEqual([]);
    }
  }, 120_000);

  procTest("a lone node whose WAL was emptied after a crash says that writes it acknowledged last may be lost", async (env) => {
    const ledger = new Ledger(64);
    const node = await nodeWithRows(env, { ledger, keyPrefix: "before", clients: writersCount, acked: 200 });
    await node.kill9();
    const walDir = join(node.dataDir, "raft", "wal");
    for (const name of fs.readdirSync(walDir)) fs.rmSync(join(walDir, name), { recursive: true, force: true });
    await node.start();
    expect(node.log()).toContain("the WAL was emptied after this node stopped without closing its store: writes it acknowledged last may be lost");
  }, 60_000);
});

/** The page of svc's meta table (applied index) in a store file. */
function metaRootPage(storePath: string): number {
  const db = new Database(storePath, { readonly: true });
  try {
    return (db.query("SELECT rootpage FROM sqlite_schema WHERE name = '_svc_meta'").get() as { rootpage: number }).rootpage;
  } finally {
    db.close();
  }
}

/** The store file as it reads with its SQLite WAL applied (a copy is checkpointed, not the store). */
function readStoreWithWal(storePath: string): Buffer {
  const copy = `${storePath}.copy`;
  for (const suffix of ["", "-wal"]) if (fs.existsSync(storePath + suffix)) fs.copyFileSync(storePath + suffix, copy + suffix);
  const db = new Database(copy);
  db.run("PRAGMA wal_checkpoint(TRUNCATE)");
  db.close();
  const bytes = fs.readFileSync(copy);
  for (const suffix of ["", "-wal", "-shm"]) fs.rmSync(copy + suffix, { force: true });
  return bytes;
}

async function waitForRemovedSegment(node: NodeProcess): Promise<void> {
  await waitFor("a WAL segment to be removed after a snapshot", async () => {
    if ((await metric(node.adminUrl, "tensor_chain_wal_segments_removed_total")) >= 1) return true;
    // An image is what lets segments go (checkpoints keep the WAL): ask for one.
    await fetch(`${node.adminUrl}/admin/snapshot?wait=true`, { method: "POST" }).catch(() => undefined);
    return false;
  }, { deadlineMs: 30_000 });
}
