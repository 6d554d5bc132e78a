// A damaged store file (SQLite: "database disk image is malformed"), through the compiled
// binary: never a client's error, and never a node that dies at every start. Damage made while
// the node was stopped is found by the start's check; damage found while serving stops the node
// with 503 STORE_DAMAGED and a mark, and the next start sets the store aside and rebuilds it from
// the newest snapshot and the WAL (a cluster member: and from the leader), with every row.

import { Database } from "bun:sqlite";
import * as fs from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect } from "bun:test";
import {
  execute, health, postJson, procTest, query, queryRaw, runBinary, startCluster, useCompiledBinary, useProcessCleanup, waitFor, waitForLeader,
  type NodeProcess, type ProcEnv,
} from "../lib/proc.ts";

useProcessCleanup();
useCompiledBinary();

const rowsCount = 2_000;
const batchRows = 100;
const valueOf = (i: number): string => `row-${String(i).padStart(6, "0")}-${"x".repeat(180)}`;

/** Rows 1..rowsCount in table t, a snapshot after half of them (the rebuild is image + WAL). */
async function fillRows(node: NodeProcess): Promise<void> {
  await execute(node.clientUrl, ["CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"]);
  for (let first = 1; first <= rowsCount; first += batchRows) {
    const statements = [];
    for (let i = first; i < first + batchRows; i++) statements.push({ sql: "INSERT INTO t VALUES (?, ?)", params: [i, valueOf(i)] });
    await execute(node.clientUrl, statements);
    if (first === rowsCount / 2 + 1) expect((await postJson(`${node.adminUrl}/admin/snapshot?wait=true`, {})).status).toBeLessThan(300);
  }
}

/** The tester's repro: 40 zero bytes over a leaf page of t (the node is stopped). Returns the page. */
function damageLeafPage(dataDir: string): number {
  const path = join(dataDir, "store", "state.db");
  // As the tester's sqlite3 did: its close copies a SQLite WAL the node left (a SQL process
  // still had the file open at the node's last close) into the file, whose page is then damaged.
  const db = new Database(path);
  db.run("PRAGMA wal_checkpoint(TRUNCATE)");
  const row = db.query("SELECT pageno FROM dbstat WHERE name = 't' AND pagetype = 'leaf' LIMIT 1 OFFSET 40").get() as { pageno: number } | null;
  db.close();
  expect(row).not.toBeNull();
  const page = row?.pageno ?? 0;
  const fd = fs.openSync(path, "r+");
  fs.writeSync(fd, Buffer.alloc(40), 0, 40, (page - 1) * 4096);
  fs.fsyncSync(fd);
  fs.closeSync(fd);
  return page;
}

/** Every row, each with its value, read on `node` (stale: this node's own store). */
async function expectAllRows(node: NodeProcess): Promise<void> {
  const r = await queryRaw(node.clientUrl, "SELECT count(*), sum(length(v)), min(id), max(id) FROM t", [], "stale");
  expect(r.status).toBe(200);
  expect(r.body?.rows).toEqual([[rowsCount, rowsCount * valueOf(1).length, 1, rowsCount]]);
  const sample = await queryRaw(node.clientUrl, "SELECT v FROM t WHERE id IN (1, 1000, 1001, 2000) ORDER BY id", [], "stale");
  expect(sample.body?.rows).toEqual([[valueOf(1)], [valueOf(1000)], [valueOf(1001)], [valueOf(2000)]]);
}

function setAsideDirs(dataDir: string): string[] {
  return fs.readdirSync(dataDir).filter((n) => n.startsWith("store.damaged-")).map((n) => join(dataDir, n));
}

async function stoppedDamagedSingleNode(env: ProcEnv, nodeEnv: Record<string, string> = {}): Promise<NodeProcess> {
  const node = await env.startSingleNode({}, { env: nodeEnv });
  await fillRows(node);
  expect(await node.stop()).toBe(0);
  damageLeafPage(node.dataDir);
  return node;
}

/** Three nodes with every row; a follower stopped, its store damaged. */
async function stoppedDamagedFollower(env: ProcEnv, nodeEnv: Record<string, string> = {}): Promise<{ leader: NodeProcess; follower: NodeProcess }> {
  const nodes = await startCluster(env, 3, {}, { env: nodeEnv });
  const leader = await waitForLeader(nodes);
  await fillRows(leader);
  const follower = nodes.find((n) => n !== leader);
  if (follower === undefined) throw new Error("no follower");
  await waitFor("the follower to apply every row", async () => {
    const r = await queryRaw(follower.clientUrl, "SELECT count(*) FROM t", [], "stale");
    return r.body?.rows[0]?.[0] === rowsCount;
  });
  expect(await follower.stop()).toBe(0);
  damageLeafPage(follower.dataDir);
  return { leader, follower };
}

describe("a damaged store file", () => {
  procTest("statements whose errors carry SQLite's damage message (a forged RAISE, a name a client chose) are statement errors: the node serves on", async (env) => {
    const node = await env.startSingleNode();
    await execute(node.clientUrl, ["CREATE TABLE t (x)", "CREATE TRIGGER forged BEFORE INSERT ON t BEGIN SELECT RAISE(ABORT, 'database disk image is malformed'); END"]);
    for (const sql of ["INSERT INTO t VALUES (1)", 'CREATE TABLE temp."database disk image is malformed" (a)']) {
      const r = await postJson<{ error?: { code: string } }>(`${node.clientUrl}/v1/execute`, { statements: [sql] });
      expect({ sql, status: r.status }).toEqual({ sql, status: 400 });
      expect(r.body?.error?.code).not.toBe("STORE_DAMAGED");
    }
    expect((await health(node))?.status).toBe(200);
    expect(setAsideDirs(node.dataDir)).toEqual([]);
    expect(await query(node.clientUrl, "SELECT count(*) FROM t")).toEqual([[0]]);
  });

  procTest("a single node started on a store damaged while it was stopped sets the store aside, rebuilds it and serves every row", async (env) => {
    const node = await stoppedDamagedSingleNode(env);
    await node.start();
    expect(node.lastRunLog()).toContain("the store is damaged");
    await expectAllRows(node);
    const aside = setAsideDirs(node.dataDir);
    expect(aside.length).toBe(1);
    expect(fs.existsSync(join(aside[0] ?? "", "state.db"))).toBe(true);
    await execute(node.clientUrl, [{ sql: "INSERT INTO t VALUES (?, ?)", params: [rowsCount + 1, "after"] }]);
    expect(await query(node.clientUrl, "SELECT count(*) FROM t")).toEqual([[rowsCount + 1]]);
  }, 120_000);

  procTest("damage found while serving answers 503 STORE_DAMAGED, stops the node, and its next start rebuilds the store with every row", async (env) => {
    // The start's check is off, as for a store too large to check at every start: the damage
    // is found where a read touches it.
    const node = await stoppedDamagedSingleNode(env, { SVC_TEST_STORE_START_CHECK_BYTES_MAX: "0" });
    await node.start();
    const r = await queryRaw(node.clientUrl, "SELECT count(*), sum(length(v)) FROM t");
    expect(r.text).toContain("STORE_DAMAGED");
    expect(r.status).toBe(503);
    expect(r.body?.error?.code).toBe("STORE_DAMAGED");
    expect(r.body?.error?.hint).toContain("another node");
    expect(await node.waitExit()).not.toBe(0);
    expect(node.lastRunLog()).toContain("is damaged");
    expect(node.lastRunLog()).not.toContain("check the disk");
    expect(fs.existsSync(join(node.dataDir, "store", "state.db-damaged"))).toBe(true);
    // Offline, verify-checksums says so and says what to do.
    const verify = await runBinary(["admin", "verify-checksums", "--data-dir", node.dataDir]);
    expect(verify.exitCode).toBe(1);
    expect(verify.stdout + verify.stderr).toContain("restart the node");
    // The one step: start it again (systemd does so by itself).
    await node.start();
    expect(node.lastRunLog()).toContain("a previous run found it damaged");
    await expectAllRows(node);
    expect(setAsideDirs(node.dataDir).length).toBe(1);
    expect(fs.existsSync(join(node.dataDir, "store", "state.db-damaged"))).toBe(false);
  }, 120_000);

  procTest("a write touching the damaged pages is refused 5xx (never 400), stops the node naming the store, not the disk, and the restart serves every row", async (env) => {
    const node = await stoppedDamagedSingleNode(env, { SVC_TEST_STORE_START_CHECK_BYTES_MAX: "0" });
    await node.start();
    const r = await postJson<{ error?: { code?: string } }>(`${node.clientUrl}/v1/execute`, { statements: [{ sql: "UPDATE t SET v = v WHERE id > 0" }] });
    expect(r.status).toBeGreaterThanOrEqual(500);
    expect(await node.waitExit()).not.toBe(0);
    expect(node.lastRunLog()).toContain("store");
    expect(node.lastRunLog()).toContain("is damaged");
    await node.start();
    await expectAllRows(node);
  }, 120_000);

  procTest("a follower of a three-node cluster started on a damaged store rebuilds it and holds every row", async (env) => {
    const { leader, follower } = await stoppedDamagedFollower(env);
    await follower.start();
    expect(follower.lastRunLog()).toContain("the store is damaged");
    await waitFor("the follower to hold every row again", async () => {
      const r = await queryRaw(follower.clientUrl, "SELECT count(*) FROM t", [], "stale");
      return r.body?.rows[0]?.[0] === rowsCount;
    });
    await expectAllRows(follower);
    expect(setAsideDirs(follower.dataDir).length).toBe(1);
    await execute(leader.clientUrl, [{ sql: "INSERT INTO t VALUES (?, ?)", params: [rowsCount + 1, "after"] }]);
    await waitFor("the follower to apply a new write", async () => {
      const r = await queryRaw(follower.clientUrl, "SELECT count(*) FROM t", [], "stale");
      return r.body?.rows[0]?.[0] === rowsCount + 1;
    });
    expect((await health(follower))?.status).toBe(200);
  }, 180_000);

  procTest("a follower of a three-node cluster that finds damage while serving stops, and rebuilds on restart while the others serve", async (env) => {
    const { leader, follower } = await stoppedDamagedFollower(env, { SVC_TEST_STORE_START_CHECK_BYTES_MAX: "0" });
    await follower.start();
    const r = await queryRaw(follower.clientUrl, "SELECT count(*), sum(length(v)) FROM t", [], "stale");
    expect(r.status).toBe(503);
    expect(r.body?.error?.code).toBe("STORE_DAMAGED");
    expect(await follower.waitExit()).not.toBe(0);
    // The others go on taking writes meanwhile.
    await execute(leader.clientUrl, [{ sql: "INSERT INTO t VALUES (?, ?)", params: [rowsCount + 1, "after"] }]);
    await follower.start();
    await waitFor("the follower to hold every row, the new one too", async () => {
      const c = await queryRaw(follower.clientUrl, "SELECT count(*) FROM t", [], "stale");
      return c.body?.rows[0]?.[0] === rowsCount + 1;
    });
    expect(dirname(setAsideDirs(follower.dataDir)[0] ?? "")).toBe(follower.dataDir);
  }, 180_000);
});
