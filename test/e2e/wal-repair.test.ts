// Repair never makes things worse, through the compiled binary: damaged WAL records on either
// side of the newest snapshot, with and without the store, and a damaged hard state. Each
// case ends with a node that starts and holds every write the damage did not take, and says
// so when it lost some.

import * as fs from "node:fs";
import { join } from "node:path";
import { describe, expect } from "bun:test";
import { listSegments, scanSegment } from "../../src/storage/index.ts";
import {
  execute, metric, postJson, procTest, query, queryRaw, runBinary, startCluster, useCompiledBinary, useProcessCleanup, waitFor, waitForLeader,
  type NodeProcess, type ProcEnv,
} from "../lib/proc.ts";

useProcessCleanup();
useCompiledBinary();

const marker = (i: number): string => `row-${String(i).padStart(6, "0")}-marker`;

/** A single node with rows 1..40, a snapshot taken after row 30; stopped. */
async function nodeWithSnapshot(env: ProcEnv): Promise<NodeProcess> {
  const node = await env.startSingleNode({ wal: { segmentSizeBytes: 1024 * 1024 } });
  await execute(node.clientUrl, ["CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"]);
  for (let i = 1; i <= 40; i++) {
    await execute(node.clientUrl, [{ sql: "INSERT INTO t VALUES (?, ?)", params: [i, marker(i)] }]);
    if (i === 30) {
      const r = await postJson(`${node.adminUrl}/admin/snapshot?wait=true`, {});
      expect(r.status).toBeLessThan(300);
    }
  }
  expect(await node.stop()).toBe(0);
  return node;
}

/** Flip a byte inside the WAL record that inserted row `i`. */
function damageRow(dataDir: string, i: number): void {
  const needle = Buffer.from(marker(i));
  for (const segment of listSegments(join(dataDir, "raft", "wal"))) {
    const bytes = fs.readFileSync(segment.path);
    const at = bytes.indexOf(needle);
    if (at < 0) continue;
    bytes[at + 2] = (bytes[at + 2] ?? 0) ^ 0x20;
    fs.writeFileSync(segment.path, bytes);
    return;
  }
  throw new Error(`row ${i} is in no WAL segment`);
}

/**
 * A three-node cluster with rows 1..40 on every node; a follower stopped, with the WAL record
 * of row 35 damaged. `staleCount`: the rows that follower holds (-1 while it does not answer).
 */
async function stoppedMemberWithDamage(env: ProcEnv): Promise<{ leader: NodeProcess; member: NodeProcess; staleCount: () => Promise<number> }> {
  const nodes = await startCluster(env, 3, { wal: { segmentSizeBytes: 1024 * 1024 } });
  const leader = await waitForLeader(nodes);
  await execute(leader.clientUrl, ["CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"]);
  for (let i = 1; i <= 40; i++) await execute(leader.clientUrl, [{ sql: "INSERT INTO t VALUES (?, ?)", params: [i, marker(i)] }]);
  const member = nodes.find((n) => n !== leader);
  if (member === undefined) throw new Error("no follower");
  const staleCount = async (): Promise<number> => {
    const r = await queryRaw(member.clientUrl, "SELECT count(*) FROM t", [], "stale");
    return r.status === 200 ? Number(r.body?.rows[0]?.[0]) : -1;
  };
  await waitFor("the member to apply every row", async () => (await staleCount()) === 40);
  expect(await member.stop()).toBe(0);
  damageRow(member.dataDir, 35);
  return { leader, member, staleCount };
}

async function rowCount(node: NodeProcess): Promise<number> {
  const rows = await query(node.clientUrl, "SELECT count(*) FROM t");
  return Number(rows[0]?.[0]);
}

function repair(dataDir: string, cwd: string): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  return runBinary(["admin", "wal-repair", "--skip-corrupted", "--data-dir", dataDir], { cwd });
}

describe("wal-repair and damage at start", () => {
  procTest("a byte flip before the newest snapshot with store/ missing: wal-repair loses nothing and the node starts with every row", async (env) => {
    const node = await nodeWithSnapshot(env);
    damageRow(node.dataDir, 10);
    fs.rmSync(join(node.dataDir, "store"), { recursive: true, force: true });
    const r = await repair(node.dataDir, env.dir);
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toContain("no entry is lost");
    expect(r.stdout).not.toContain("LOST");
    await node.start();
    expect(await rowCount(node)).toBe(40);
    await node.stop();
    const check = await runBinary(["admin", "verify-checksums", "--data-dir", node.dataDir], { cwd: env.dir });
    expect(node.log()).not.toContain("assertion failed");
    expect(check.stdout + check.stderr).not.toContain("corrupt");
    expect(check.exitCode).toBe(0);
  }, 120_000);

  procTest("a damaged record that the newest snapshot covers does not stop the node: it is dropped with a warning and nothing is lost", async (env) => {
    const node = await nodeWithSnapshot(env);
    damageRow(node.dataDir, 10);
    await node.start();
    expect(await rowCount(node)).toBe(40);
    expect(node.lastRunLog()).toContain("the newest snapshot covers");
  }, 120_000);

  procTest("a lone node whose WAL lost unarchived entries to that repair goes on archiving after them and says where the archive's gap is", async (env) => {
    const archive = join(env.dir, "archive");
    const flag = join(env.dir, "fail");
    fs.mkdirSync(archive);
    const node = await env.startSingleNode({
      wal: { segmentSizeBytes: 1024 * 1024, archiveTimeoutMs: 1_000, archiveCommand: `if [ -e '${flag}' ]; then exit 3; fi; cp %p '${archive}/%f'` },
    });
    await execute(node.clientUrl, ["CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"]);
    const insert = (i: number) => execute(node.clientUrl, [{ sql: "INSERT INTO t VALUES (?, ?)", params: [i, marker(i)] }]);
    for (let i = 1; i <= 5; i++) await insert(i);
    await waitFor("rows 1..5 to be archived", async () => (await metric(node.adminUrl, "tensor_chain_wal_archive_archived_through_index")) > 0);
    // From here the command fails: rows 6..40 stay unarchived, and the snapshot after row 30
    // removes no segment that holds them.
    fs.writeFileSync(flag, "");
    for (let i = 6; i <= 40; i++) {
      await insert(i);
      if (i === 30) expect((await postJson(`${node.adminUrl}/admin/snapshot?wait=true`, {})).status).toBeLessThan(300);
    }
    expect(await node.stop()).toBe(0);
    damageRow(node.dataDir, 10);
    fs.rmSync(flag);
    await node.start();
    expect(await rowCount(node)).toBe(40);
    const archivedText = () => fs.readdirSync(archive).map((f) => fs.readFileSync(join(archive, f)).toString("latin1")).join("");
    await waitFor("rows after the snapshot to be archived", async () => archivedText().includes(marker(40)));
    expect(archivedText()).not.toContain(marker(10));
    expect(node.lastRunLog()).toMatch(/WAL archiving goes on after entries \d+…\d+, which no member holds \(this node is the cluster's only member/);
    expect(node.lastRunLog()).not.toContain("transfer-leader");
  }, 120_000);

  procTest("a repair that lost entries on a single node names them, and the node warns about them at every start", async (env) => {
    const node = await nodeWithSnapshot(env);
    damageRow(node.dataDir, 35);
    // Without the store, which would still hold what the cut log lost (it is derived data).
    fs.rmSync(join(node.dataDir, "store"), { recursive: true, force: true });
    const r = await repair(node.dataDir, env.dir);
    expect(r.exitCode).toBe(0);
    const lost = /LOST on this node: entries (\d+)\n/.exec(r.stdout);
    expect(lost).not.toBeNull();
    expect(r.stdout).toContain("set aside");
    expect(r.stdout).toContain("single-node cluster");
    await node.start();
    expect(await rowCount(node)).toBe(34);
    expect(node.lastRunLog()).toContain("runs with log entries lost by wal-repair");
    expect(node.lastRunLog()).toContain(lost?.[1] ?? "?");
    await node.stop();
    await node.start();
    expect(node.lastRunLog()).toContain("runs with log entries lost by wal-repair");
    // Writes go on after the loss.
    await execute(node.clientUrl, [{ sql: "INSERT INTO t VALUES (?, ?)", params: [100, "after"] }]);
    expect(await rowCount(node)).toBe(35);
  }, 120_000);

  procTest("a lone node whose WAL lost committed entries (cut at a record boundary, store removed) refuses to start, naming them; moving its hard state and checkpoint aside accepts the loss", async (env) => {
    const node = await nodeWithSnapshot(env);
    // Rows 36..40 are cut off: their records zeroed, as a file cut short and preallocated again would be.
    const needle = Buffer.from(marker(36));
    let cut = false;
    for (const segment of listSegments(join(node.dataDir, "raft", "wal"))) {
      const bytes = new Uint8Array(fs.readFileSync(segment.path));
      const scan = scanSegment(bytes);
      const k = scan.entries.findIndex((e) => Buffer.from(e.data).includes(needle));
      if (k < 0) continue;
      bytes.fill(0, scan.offsets[k] ?? 0, scan.dataEndBytes);
      fs.writeFileSync(segment.path, bytes);
      cut = true;
    }
    expect(cut).toBe(true);
    fs.rmSync(join(node.dataDir, "store"), { recursive: true, force: true });
    node.spawn();
    // Exit 3: the operator must act (the unit does not restart it).
    expect(await node.waitExit()).toBe(3);
    const said = node.lastRunLog();
    expect(said).toMatch(/entries \d+\.\.\d+, acknowledged writes, are missing/);
    expect(said).toContain("move");
    // The operator accepts the loss: the node starts with what its WAL holds.
    for (const name of ["hardstate", "checkpoint"]) {
      const path = join(node.dataDir, "raft", name);
      if (fs.existsSync(path)) fs.renameSync(path, `${path}.aside`);
    }
    await node.start();
    expect(await rowCount(node)).toBe(35);
  }, 120_000);

  procTest("a garbage hard state: the advice never says to remove raft/ on a lone node, and wal-repair rebuilds it with all data kept", async (env) => {
    const node = await nodeWithSnapshot(env);
    fs.writeFileSync(join(node.dataDir, "raft", "hardstate"), "garbage, not a hard state record");
    const serve = await runBinary(["serve", "--config", node.configPath], { cwd: env.dir, deadlineMs: 30_000 });
    expect(serve.exitCode).not.toBe(0);
    expect(serve.stderr).toContain("wal-repair --skip-corrupted");
    expect(serve.stderr).not.toMatch(/(?<!not |never )remove the contents of raft\//);
    const r = await repair(node.dataDir, env.dir);
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toContain("rebuilt");
    await node.start();
    expect(await rowCount(node)).toBe(40);
    await execute(node.clientUrl, [{ sql: "INSERT INTO t VALUES (?, ?)", params: [100, "after"] }]);
    expect(await rowCount(node)).toBe(41);
  }, 120_000);

  procTest("on a member of a three-node cluster, the entries a repair lost come back from the leader, and the member votes again once it has them", async (env) => {
    const { leader, member, staleCount } = await stoppedMemberWithDamage(env);
    fs.rmSync(join(member.dataDir, "store"), { recursive: true, force: true });
    const r = await repair(member.dataDir, env.dir);
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toContain("LOST on this node");
    expect(r.stdout).toContain("the leader sends them again");
    expect(fs.existsSync(join(member.dataDir, "raft", "LOST_LOG"))).toBe(true);
    await member.start();
    await waitFor("the member to hold every row again", async () => (await staleCount()) === 40);
    expect(member.lastRunLog()).toContain("runs with log entries lost by wal-repair");
    await waitFor("the member to vote again (LOST_LOG gone)", () => !fs.existsSync(join(member.dataDir, "raft", "LOST_LOG")));
    await execute(leader.clientUrl, [{ sql: "INSERT INTO t VALUES (?, ?)", params: [41, "after"] }]);
    await waitFor("the member to apply a new write", async () => (await staleCount()) === 41);
  }, 120_000);

  procTest("a member of a three-node cluster started on a damaged WAL repairs it itself and takes what it cut from the leader (SPEC §3.2: data corruption)", async (env) => {
    const { leader, member, staleCount } = await stoppedMemberWithDamage(env);
    // Its store too: only the WAL (and the leader) hold the rows.
    fs.rmSync(join(member.dataDir, "store"), { recursive: true, force: true });
    await member.start();
    expect(member.lastRunLog()).toContain("the WAL has damaged records; this member keeps the intact entries before the damage and takes the rest from the leader");
    await waitFor("the member to hold every row again", async () => (await staleCount()) === 40);
    await waitFor("the member to vote again (LOST_LOG gone)", () => !fs.existsSync(join(member.dataDir, "raft", "LOST_LOG")));
    await execute(leader.clientUrl, [{ sql: "INSERT INTO t VALUES (?, ?)", params: [41, "after"] }]);
    await waitFor("the member to apply a new write", async () => (await staleCount()) === 41);
  }, 120_000);
});
