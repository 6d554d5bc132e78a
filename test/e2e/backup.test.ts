// Backups and restores as SPEC §4.4–4.5 write them, on three-node clusters of real processes:
// a full backup in one command (verified, writes resumed), restore from it on every node
// (extract, stop, copy raft and store back, start), disaster recovery on new hosts with
// init-cluster --bootstrap, a backup interrupted by SIGINT or killed -9, a snapshot backup
// whose latest/ a node uses, init-cluster refusing newer data, the same through S3, and restored
// clusters taking writes although the backup was taken while they were paused.

import * as fs from "node:fs";
import { basename, join } from "node:path";
import { describe, expect } from "bun:test";
import * as tar from "tar";
import {
  GiveUp, addressText, clusterConfigs, execute, executeRaw, freePort, getJson, health, metric, postJson, procTest, query, runBinary, singleNodeConfig, startCluster, useCompiledBinary, useProcessCleanup, waitFor, waitForLeader,
  type NodeProcess, type ProcEnv,
} from "../lib/proc.ts";
import { ensureBinary } from "../lib/proc-binary.ts";
import { startS3Server } from "../lib/s3-server.ts";

useProcessCleanup();
useCompiledBinary();

const rowsBefore = 60;
const value = (i: number): string => `value-${i}-${"x".repeat(i % 17)}`;

async function writeRows(node: NodeProcess, from: number, to: number): Promise<void> {
  for (let i = from; i <= to; i += 10) {
    const batch = [];
    for (let j = i; j < Math.min(i + 10, to + 1); j++) batch.push({ sql: "INSERT INTO t (id, v) VALUES (?, ?)", params: [j, value(j)] });
    await execute(node.clientUrl, batch);
  }
}

/** Every row of t, checked one by one: exactly ids 1..n with their values. */
async function expectRows(node: NodeProcess, n: number): Promise<void> {
  const rows = await query(node.clientUrl, "SELECT id, v FROM t ORDER BY id");
  expect(rows.length).toBe(n);
  for (let i = 1; i <= n; i++) expect(rows[i - 1]).toEqual([i, value(i)]);
}

/** A three-node cluster holding rows 1..rowsBefore; an etc dir with node1's configuration. */
async function clusterWithRows(env: ProcEnv): Promise<{ nodes: NodeProcess[]; leader: NodeProcess; etcDir: string }> {
  const nodes = await startCluster(env, 3);
  const leader = await waitForLeader(nodes);
  await execute(leader.clientUrl, ["CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"]);
  await writeRows(leader, 1, rowsBefore);
  const etcDir = join(env.dir, "etc-svc");
  fs.mkdirSync(etcDir, { recursive: true });
  fs.copyFileSync(nodes[0]?.configPath ?? "", join(etcDir, "config.toml"));
  return { nodes, leader, etcDir };
}

function svc(args: readonly string[], env: Record<string, string> = {}) {
  return runBinary(args, { deadlineMs: 120_000, env });
}

async function fullBackup(node: NodeProcess, to: string, etcDir: string, extra: readonly string[] = [], env: Record<string, string> = {}) {
  const r = await svc(["admin", "backup", "full", "--config", node.configPath, "--to", to, "--etc-dir", etcDir, "--json", ...extra], env);
  if (r.exitCode !== 0) throw new Error(`backup full failed (${r.exitCode}): ${r.stdout}\n${r.stderr}`);
  return JSON.parse(r.stdout) as { status: string; archive: string; snapshot: { index: number }; leftPaused: boolean };
}

/** A single node with table t and rows 1..20, and its configuration copied as /etc/svc would hold it. */
async function singleNodeWithRows(env: ProcEnv): Promise<{ node: NodeProcess; etcDir: string }> {
  const node = await env.startSingleNode();
  await execute(node.clientUrl, ["CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"]);
  await writeRows(node, 1, 20);
  const etcDir = join(env.dir, "etc-svc");
  fs.mkdirSync(etcDir, { recursive: true });
  fs.copyFileSync(node.configPath, join(etcDir, "config.toml"));
  return { node, etcDir };
}

/** singleNodeWithRows, and a full backup of it. */
async function backedUpSingleNode(env: ProcEnv): Promise<{ node: NodeProcess; made: Awaited<ReturnType<typeof fullBackup>> }> {
  const { node, etcDir } = await singleNodeWithRows(env);
  return { node, made: await fullBackup(node, join(env.dir, "backups"), etcDir) };
}

async function writesAccepted(node: NodeProcess, id: number): Promise<boolean> {
  const r = await executeRaw(node.clientUrl, [{ sql: "INSERT OR REPLACE INTO t (id, v) VALUES (?, ?)", params: [id, value(id)] }]);
  return r.status === 200;
}

/**
 * A proxy to `node`'s admin port that holds `POST /admin/snapshot` until released: a backup run
 * through it is caught while writes are paused, whatever the machine's speed. A node that is
 * gone answers 502, as to a client.
 */
function snapshotHoldingProxy(node: NodeProcess): { url: string; snapshotAsked: Promise<void>; release: () => void; stop: () => void } {
  let held: (() => void) | null = null;
  const asked = Promise.withResolvers<void>();
  const proxy = Bun.serve({
    port: 0, hostname: "127.0.0.1",
    async fetch(req) {
      const url = new URL(req.url);
      if (url.pathname === "/admin/snapshot") {
        asked.resolve();
        await new Promise<void>((resolve) => {
          held = resolve;
        });
      }
      const body = req.method === "GET" ? null : await req.arrayBuffer();
      return fetch(`${node.adminUrl}${url.pathname}${url.search}`, { method: req.method, body }).catch(() => new Response("node down", { status: 502 }));
    },
  });
  const release = (): void => (held as (() => void) | null)?.();
  return { url: `http://127.0.0.1:${proxy.port}`, snapshotAsked: asked.promise, release, stop: () => {
    release();
    proxy.stop(true);
  } };
}

/** The log line a node restored from a backup taken while writes were paused writes once. */
const backupPauseResumed = "writes had been paused when the backup was taken";

/** Wait for a write to go through `node`; a refusal as paused fails at once (nothing would lift it). */
async function expectWritesTaken(node: NodeProcess, id: number): Promise<void> {
  await waitFor(`a write through ${node.nodeId}`, async () => {
    const r = await executeRaw(node.clientUrl, [{ sql: "INSERT OR REPLACE INTO t (id, v) VALUES (?, ?)", params: [id, value(id)] }]);
    if (r.status === 200) return true;
    if (r.text.includes("WRITES_PAUSED")) throw new GiveUp(`the restored cluster refuses writes as paused: ${r.text}`);
    return false;
  }, { deadlineMs: 30_000, intervalMs: 100 });
}

function occurrences(text: string, part: string): number {
  return text.split(part).length - 1;
}

async function totalEntries(node: NodeProcess): Promise<number> {
  return Number((await getJson<{ total_entries: number }>(`${node.adminUrl}/admin/stats`)).total_entries);
}

describe("backup and restore (SPEC §4.4, §4.5)", () => {
  procTest("full backup in one command; restore from it on all three nodes exactly as SPEC §4.5 writes it", async (env) => {
    const { nodes, leader, etcDir } = await clusterWithRows(env);
    const backups = join(env.dir, "backups");
    const follower = nodes.find((n) => n !== leader) as NodeProcess;
    // Run beside a follower: the image is taken there once it applied the pause.
    // A short lease: the image holds the pause (a cluster restored from it resumes it).
    const made = await fullBackup(follower, backups, etcDir, ["--retain", "30d", "--lease", "3s"]);
    expect(made.status).toBe("ok");
    expect(made.archive).toMatch(/svc-backup-\d{8}\.tar\.gz$/);
    // A stale dated backup goes with --retain; other files stay.
    fs.writeFileSync(join(backups, "svc-backup-20000101.tar.gz"), "old");
    fs.writeFileSync(join(backups, "notes.txt"), "kept");
    // What a backup killed -9 while writing its archive leaves (a pid no process has): removed.
    const partial = join(backups, `${made.archive.split("/").at(-1)}.partial-${2 ** 22 + 7}`);
    fs.writeFileSync(partial, "");
    const hoursAgo = new Date(Date.now() - 2 * 3_600_000);
    fs.utimesSync(partial, hoursAgo, hoursAgo);
    // One just written may be another host's backup running into a shared place: kept.
    const recent = join(backups, `latest.tar.gz.partial-${2 ** 22 + 9}`);
    fs.writeFileSync(recent, "");
    await fullBackup(follower, backups, etcDir, ["--retain", "30d", "--lease", "3s"]);
    expect(fs.existsSync(partial)).toBe(false);
    expect(fs.existsSync(recent)).toBe(true);
    fs.rmSync(recent);
    expect(fs.existsSync(join(backups, "svc-backup-20000101.tar.gz"))).toBe(false);
    expect(fs.existsSync(join(backups, "notes.txt"))).toBe(true);
    // Writes were resumed; rows written after the backup are not in it, nor the images every
    // node makes of them (copied over, such newer images stay beside the backup's).
    await writeRows(leader, rowsBefore + 1, rowsBefore + 20);
    await waitFor("every node applied the later rows", async () => (await Promise.all(nodes.map(totalEntries))).every((t) => t === rowsBefore + 20), { deadlineMs: 30_000 });
    for (const n of nodes) expect((await postJson(`${n.adminUrl}/admin/snapshot?local=true&wait=true`, {})).status).toBe(200);

    const verified = await svc(["admin", "backup", "verify", made.archive]);
    expect(verified.exitCode).toBe(0);
    // The off-site copy between two given places needs no configuration file.
    const offsite = join(env.dir, "offsite");
    const copied = await svc(["admin", "backup", "offsite", "--from", backups, "--to", offsite]);
    expect({ exitCode: copied.exitCode, stderr: copied.stderr }).toEqual({ exitCode: 0, stderr: "" });
    expect(fs.existsSync(join(offsite, "latest.tar.gz"))).toBe(true);
    expect(verified.stdout).toContain(": ok,");
    // A cut archive fails verify with exit 1; a timer on a follower skips, successfully.
    const cut = join(env.dir, "cut.tar.gz");
    fs.writeFileSync(cut, fs.readFileSync(made.archive).subarray(0, Math.floor(fs.statSync(made.archive).size / 2)));
    const damaged = await svc(["admin", "backup", "verify", cut]);
    expect(damaged.exitCode).toBe(1);
    expect(damaged.stdout).toContain("DAMAGED");
    // And what to do about it, as every other error says.
    expect(damaged.stderr).toBe(`svc: ${cut} does not verify\n  → use another backup (an older one, or another copy of this one); a damaged archive may still be extracted with tar for what it holds\n`);
    const skipped = await svc(["admin", "backup", "full", "--config", follower.configPath, "--to", backups, "--if-leader", "--json"]);
    expect(skipped.exitCode).toBe(0);
    expect(JSON.parse(skipped.stdout).status).toBe("skipped");
    // Places that cannot make a sound archive are refused before writes are paused.
    const noEtc = await svc(["admin", "backup", "full", "--config", follower.configPath, "--to", backups, "--etc-dir", join(env.dir, "no-such-dir")]);
    expect(noEtc.exitCode).toBe(1);
    expect(noEtc.stderr).toContain("does not exist");
    const toFile = await svc(["admin", "backup", "full", "--config", follower.configPath, "--to", join(backups, "notes.txt"), "--etc-dir", etcDir]);
    expect(toFile.exitCode).toBe(1);
    expect(toFile.stderr).toContain("is not a directory");
    // The configuration file's directory (the default --etc-dir) holds every node's data here.
    const etcHoldsData = await svc(["admin", "backup", "full", "--config", follower.configPath, "--to", backups]);
    expect(etcHoldsData.exitCode).toBe(1);
    expect(etcHoldsData.stderr).toContain("holds the data directory");
    const listed: string[] = [];
    await tar.t({ file: made.archive, onReadEntry: (e) => listed.push(e.path) });
    expect(listed).toContain("metadata.json");
    expect(listed).toContain("etc/svc/config.toml");
    expect(listed).toContain("store/");
    expect(listed.some((p) => /^raft\/snapshots\/[0-9a-f]{16}-[0-9a-f]{16}\/state\.db$/.test(p))).toBe(true);
    expect(listed.some((p) => p.startsWith("raft/wal"))).toBe(false);

    // SPEC §4.5: extract, stop, copy raft and store back, (chown: we are the owner), start.
    const extracted = join(env.dir, "extracted");
    fs.mkdirSync(extracted);
    await tar.x({ file: made.archive, cwd: extracted });
    // Repacked by hand (`tar czf x.tar.gz -C extracted .`: every name starts with ./), it is the same archive.
    const repacked = join(env.dir, "repacked.tar.gz");
    await tar.c({ gzip: true, file: repacked, cwd: extracted }, ["."]);
    const repackedCheck = await svc(["admin", "backup", "verify", repacked]);
    expect(`${repackedCheck.exitCode} ${repackedCheck.stdout}`).toContain("0 ");
    expect(repackedCheck.stdout).toContain(": ok,");
    // Fetching an archive that is not there says so.
    const missing = await svc(["admin", "backup", "fetch", join(backups, "svc-backup-19990101.tar.gz"), "--out", join(env.dir, "fetched.tar.gz")]);
    expect(missing.exitCode).toBe(1);
    expect(missing.stderr).toContain("does not exist");
    for (const n of nodes) expect(await n.stop()).toBe(0);
    for (const n of nodes.slice(0, 2)) {
      fs.cpSync(join(extracted, "raft"), join(n.dataDir, "raft"), { recursive: true, force: true });
      fs.cpSync(join(extracted, "store"), join(n.dataDir, "store"), { recursive: true, force: true });
    }
    // A backup whose snapshot is damaged is refused, naming it, and nothing is changed.
    const first = nodes[0] as NodeProcess;
    const [imageName] = fs.readdirSync(join(extracted, "raft", "snapshots"));
    const image = join(first.dataDir, "raft", "snapshots", imageName ?? "", "state.db");
    const sound = fs.readFileSync(image);
    const flipped = Buffer.from(sound);
    flipped[Math.floor(flipped.length / 2)] = (flipped[Math.floor(flipped.length / 2)] ?? 0) ^ 0xff;
    fs.writeFileSync(image, flipped);
    first.spawn();
    expect(await first.waitExit()).not.toBe(0);
    expect(first.lastRunLog()).toContain("is damaged");
    expect(fs.existsSync(join(first.dataDir, "raft", "RESTORED"))).toBe(true);
    fs.writeFileSync(image, sound);
    // The third extracted straight over its data directory, as an operator may do it.
    const third = nodes[2] as NodeProcess;
    await tar.x({ file: made.archive, cwd: third.dataDir, filter: (p) => p.startsWith("raft/") || p.startsWith("store/") });
    for (const n of nodes) n.spawn();
    await Promise.all(nodes.map((n) => n.waitHealthy(60_000)));
    const newLeader = await waitForLeader(nodes, 60_000);
    for (const n of nodes) await expectRows(n, rowsBefore);
    const totals = await Promise.all(nodes.map(totalEntries));
    expect(new Set(totals)).toEqual(new Set([rowsBefore]));
    for (const n of nodes) {
      const check = await svc(["admin", "verify-checksums", "--node", n.adminUrl]);
      expect(check.exitCode).toBe(0);
    }
    await waitFor("writes accepted on the restored cluster", () => writesAccepted(newLeader, rowsBefore + 1), { deadlineMs: 30_000 });
    // Restored, not lost: no member holds back its vote.
    for (const n of nodes) expect(fs.existsSync(join(n.dataDir, "raft", "LOST_LOG"))).toBe(false);
    // The WAL and hard state each node had are kept aside, not used.
    for (const n of nodes) expect(fs.readdirSync(join(n.dataDir, "raft")).some((d) => d.startsWith("pre-restore-"))).toBe(true);
  }, 240_000);

  procTest("a node left out of a restore holds another history: the two never mix; a member that meets the other history stops, saying so, and no acknowledged write is lost", async (env) => {
    const { nodes, leader, etcDir } = await clusterWithRows(env);
    const [first, second, stray] = nodes as [NodeProcess, NodeProcess, NodeProcess];
    const made = await fullBackup(leader, join(env.dir, "backups"), etcDir, ["--lease", "3s"]);
    // The history goes on past the backup, through leadership changes (its term grows).
    let current = leader;
    for (const to of [first, second, stray, first]) {
      if (to !== current) {
        const moved = await svc(["admin", "transfer-leader", "--node", current.adminUrl, "--to", to.nodeId]);
        expect(moved.exitCode).toBe(0);
        current = to;
      }
      await expectWritesTaken(current, 500 + Number(to.nodeId.slice(-1)));
    }
    for (const n of nodes) expect(await n.stop()).toBe(0);
    // SPEC §4.5 on two of the three nodes: the third is left out, with its later, longer history.
    const extracted = join(env.dir, "extracted");
    fs.mkdirSync(extracted);
    await tar.x({ file: made.archive, cwd: extracted });
    for (const n of [first, second]) {
      fs.cpSync(join(extracted, "raft"), join(n.dataDir, "raft"), { recursive: true, force: true });
      fs.cpSync(join(extracted, "store"), join(n.dataDir, "store"), { recursive: true, force: true });
      n.spawn();
    }
    const restoredLeader = await waitForLeader([first, second], 60_000);
    await expectWritesTaken(restoredLeader, 1001);
    for (let id = 1002; id <= 1010; id++) await execute(restoredLeader.clientUrl, [{ sql: "INSERT INTO t (id, v) VALUES (?, ?)", params: [id, value(id)] }]);
    await waitFor("both restored members applied the acknowledged writes", async () => (await Promise.all([first, second].map(totalEntries))).every((t) => t === rowsBefore + 10), { deadlineMs: 30_000 });
    // The left-out node meets one restored member: whichever leads, the member holding the other
    // history stops, naming the leader and the way out; none serves the other history's rows.
    expect(await first.stop()).toBe(0);
    stray.spawn();
    const stopped = await waitFor("a member to stop on meeting the other history", async () => {
      for (const n of [second, stray]) if (n.log().includes("hold different histories")) return n;
      return false;
    }, { deadlineMs: 60_000, intervalMs: 100 });
    // Exit 3: a restart cannot help, so the unit install.sh writes does not restart it in a loop.
    expect(await stopped.waitExit(30_000)).toBe(3);
    expect(stopped.log()).toContain("hold different histories");
    expect(stopped.log()).toContain("left out of a restore");
    const other = stopped === second ? stray : second;
    const read = await fetch(`${other.clientUrl}/v1/query`, { method: "POST", body: JSON.stringify({ sql: "SELECT count(*) FROM t WHERE id > 1000" }), signal: AbortSignal.timeout(20_000) }).catch(() => null);
    if (read?.status === 200) expect(((await read.json()) as { rows: unknown[][] }).rows[0]?.[0]).toBe(10);
    // The way out the message gives: the left-out node emptied (raft/ and store/), all started.
    await Promise.all([second, stray].map((n) => n.kill9()));
    for (const dir of ["raft", "store"]) {
      for (const name of fs.readdirSync(join(stray.dataDir, dir))) fs.rmSync(join(stray.dataDir, dir, name), { recursive: true, force: true });
    }
    for (const n of nodes) n.spawn();
    await waitForLeader(nodes, 60_000);
    for (const n of nodes) {
      await waitFor(`${n.nodeId} to hold the restored history with its acknowledged writes`, async () => {
        const rows = await query(n.clientUrl, "SELECT count(*), sum(id > 1000), sum(id BETWEEN 500 AND 999) FROM t").catch(() => null);
        return rows !== null && JSON.stringify(rows[0]) === JSON.stringify([rowsBefore + 10, 10, 0]);
      }, { deadlineMs: 60_000 });
    }
  }, 240_000);

  procTest("SPEC §4.4's full backup made by hand and restored as §4.5 writes it: the members lost their logs and wait; init-cluster --bootstrap on each then makes them one cluster with the data, taking writes", async (env) => {
    const { nodes, leader, etcDir } = await clusterWithRows(env);
    // §4.4 by hand: pause (no lease), snapshot, wait, tar the snapshot directory, the store and etc, resume.
    expect((await svc(["admin", "pause-writes", "--node", leader.adminUrl])).exitCode).toBe(0);
    expect((await postJson(`${leader.adminUrl}/admin/snapshot?wait=true`, {})).status).toBe(200);
    const archive = join(env.dir, "by-hand.tar.gz");
    fs.cpSync(etcDir, join(leader.dataDir, "etc-copy"), { recursive: true });
    await tar.c({ gzip: true, file: archive, cwd: leader.dataDir }, ["raft/snapshots", "store", "etc-copy"]);
    expect((await svc(["admin", "resume-writes", "--node", leader.adminUrl])).exitCode).toBe(0);
    await writeRows(leader, rowsBefore + 1, rowsBefore + 10);

    // §4.5: stop, copy raft and store back (over emptied directories: a raft/ that keeps its own
    // WAL replays it over the archive's store, which undoes the restore), start.
    for (const n of nodes) expect(await n.stop()).toBe(0);
    for (const n of nodes) {
      fs.rmSync(join(n.dataDir, "raft"), { recursive: true, force: true });
      fs.rmSync(join(n.dataDir, "store"), { recursive: true, force: true });
      await tar.x({ file: archive, cwd: n.dataDir, filter: (p) => p.startsWith("raft/") || p.startsWith("store/") });
    }
    for (const n of nodes) n.spawn();
    // Without the marker a full backup carries, each is a member that lost its log: none votes.
    for (const n of nodes) {
      await waitFor(`${n.nodeId} to wait for a leader with its log lost`, () => fs.existsSync(join(n.dataDir, "raft", "LOST_LOG")), { deadlineMs: 30_000 });
    }
    const waiting = await getJson<{ recovery: string }>(`${nodes[0]?.adminUrl}/health`).catch(() => null);
    expect(waiting?.recovery).not.toBe("healthy");
    // /health says why and what to do (not that the node reaches no majority: all are up).
    const said = await waitFor("/health to say the node lost its log and how out", async () => {
      const r = await fetch(`${nodes[0]?.adminUrl}/health`);
      const body = (await r.json()) as { problem?: string };
      return r.status === 503 && body.problem !== undefined ? body.problem : false;
    }, { deadlineMs: 30_000 });
    expect(said).toContain("lost log entries");
    expect(said).toContain("init-cluster --bootstrap");

    for (const n of nodes) expect(await n.stop()).toBe(0);
    for (const n of nodes) {
      const init = await svc(["admin", "init-cluster", "--bootstrap", "--config", n.configPath]);
      expect(init.exitCode).toBe(0);
      expect(fs.existsSync(join(n.dataDir, "raft", "LOST_LOG"))).toBe(false);
      // The new cluster's WAL archive starts after its first snapshot, whichever member leads.
      const { Database } = await import("bun:sqlite");
      const db = new Database(join(n.dataDir, "store", "state.db"), { readonly: true });
      const meta = new Map((db.query("SELECT key, value FROM _svc_meta WHERE key IN ('archived_through', 'applied_index')").all() as { key: string; value: number }[]).map((r) => [r.key, Number(r.value)]));
      db.close();
      expect(meta.get("archived_through")).toBe(meta.get("applied_index"));
    }
    for (const n of nodes) n.spawn();
    await Promise.all(nodes.map((n) => n.waitHealthy(60_000)));
    const restored = await waitForLeader(nodes, 60_000);
    for (const n of nodes) await expectRows(n, rowsBefore);
    // The pause the backup was taken in was the old cluster's.
    expect(await writesAccepted(restored, rowsBefore + 1)).toBe(true);
  }, 240_000);

  procTest("a cluster restored from a full backup whose pause lease still runs takes writes at once: the pause was the backup's, every member resumes it from the same log and says so once", async (env) => {
    const { nodes, leader, etcDir } = await clusterWithRows(env);
    // A lease far longer than the test: before, the restored cluster refused writes until it ended.
    const made = await fullBackup(leader, join(env.dir, "backups"), etcDir, ["--lease", "1h"]);
    for (const n of nodes) expect(await n.stop()).toBe(0);
    for (const n of nodes) await tar.x({ file: made.archive, cwd: n.dataDir, filter: (p) => p.startsWith("raft/") || p.startsWith("store/") });
    for (const n of nodes) n.spawn();
    await Promise.all(nodes.map((n) => n.waitHealthy(60_000)));
    const restored = await waitForLeader(nodes, 60_000);
    await expectWritesTaken(restored, rowsBefore + 1);
    // One replicated state: every member applied the same resume, none is paused.
    await waitFor("every member to apply the write", async () => (await Promise.all(nodes.map(totalEntries))).every((t) => t === rowsBefore + 1), { deadlineMs: 30_000 });
    for (const n of nodes) {
      expect((await getJson<{ writes_paused: boolean }>(`${n.clientUrl}/health`)).writes_paused).toBe(false);
      expect(occurrences(n.lastRunLog(), backupPauseResumed)).toBe(1);
      await expectWritesTaken(n, rowsBefore + 2);
    }
  }, 240_000);

  procTest("SPEC §4.4's full backup made by hand, restored on a lone node as §4.5 writes it, takes writes: the pause it was taken in was the backup's", async (env) => {
    const node = await env.startSingleNode();
    await execute(node.clientUrl, ["CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"]);
    await writeRows(node, 1, rowsBefore);
    // §4.4 by hand: pause (no lease), snapshot, wait, tar the snapshot directory and the store, resume.
    expect((await svc(["admin", "pause-writes", "--node", node.adminUrl])).exitCode).toBe(0);
    expect((await postJson(`${node.adminUrl}/admin/snapshot?wait=true`, {})).status).toBe(200);
    const archive = join(env.dir, "by-hand.tar.gz");
    await tar.c({ gzip: true, file: archive, cwd: node.dataDir }, ["raft/snapshots", "store"]);
    expect((await svc(["admin", "resume-writes", "--node", node.adminUrl])).exitCode).toBe(0);
    await writeRows(node, rowsBefore + 1, rowsBefore + 10);
    // §4.5: stop, copy raft and store back over emptied directories, start.
    expect(await node.stop()).toBe(0);
    fs.rmSync(join(node.dataDir, "raft"), { recursive: true, force: true });
    fs.rmSync(join(node.dataDir, "store"), { recursive: true, force: true });
    await tar.x({ file: archive, cwd: node.dataDir });
    await node.start();
    await expectRows(node, rowsBefore);
    await expectWritesTaken(node, rowsBefore + 1);
    expect(occurrences(node.lastRunLog(), backupPauseResumed)).toBe(1);
    // The resume is in its log: a restart keeps it.
    expect(await node.stop()).toBe(0);
    await node.start();
    await expectWritesTaken(node, rowsBefore + 2);
    expect(occurrences(node.lastRunLog(), backupPauseResumed)).toBe(0);
  }, 120_000);

  procTest("a full backup leaves writes as it found them: paused by the operator with no end, they stay paused with no end; paused under a longer lease, that lease is put back", async (env) => {
    const { node, etcDir } = await singleNodeWithRows(env);
    const pause = async () => getJson<{ writes_paused: boolean; writes_paused_until?: string }>(`${node.adminUrl}/admin/cluster-info`);
    // SPEC §4.4 step 1 by hand (or a maintenance pause) and then the one-command backup.
    expect((await svc(["admin", "pause-writes", "--node", node.adminUrl])).exitCode).toBe(0);
    expect((await fullBackup(node, join(env.dir, "backups"), etcDir, ["--lease", "3s"])).leftPaused).toBe(true);
    expect(await pause()).toEqual(expect.objectContaining({ writes_paused: true }));
    expect((await pause()).writes_paused_until).toBeUndefined();
    expect(await writesAccepted(node, 21)).toBe(false);
    expect((await svc(["admin", "resume-writes", "--node", node.adminUrl])).exitCode).toBe(0);
    expect(await writesAccepted(node, 21)).toBe(true);
    // A pause with an end later than the backup's own lease: the same end afterwards.
    expect((await svc(["admin", "pause-writes", "--lease", "600s", "--node", node.adminUrl])).exitCode).toBe(0);
    const until = Date.parse((await pause()).writes_paused_until ?? "");
    await fullBackup(node, join(env.dir, "backups"), etcDir, ["--lease", "3s"]);
    const after = await pause();
    expect(after.writes_paused).toBe(true);
    expect(Math.abs(Date.parse(after.writes_paused_until ?? "") - until)).toBeLessThan(60_000);
    expect(await writesAccepted(node, 22)).toBe(false);
    // With nothing paused before it, the backup resumes what it paused.
    expect((await svc(["admin", "resume-writes", "--node", node.adminUrl])).exitCode).toBe(0);
    await fullBackup(node, join(env.dir, "backups"), etcDir, ["--lease", "3s"]);
    expect((await pause()).writes_paused).toBe(false);
    expect(await writesAccepted(node, 22)).toBe(true);
  }, 120_000);

  procTest("cluster-info, and the metadata.json of a full and a snapshot backup, carry total_entries as stats counts it and the applied index it was counted at: what post-restore verification compares (SPEC §4.4, §4.5)", async (env) => {
    const { node, made } = await backedUpSingleNode(env);
    const extracted = join(env.dir, "extracted");
    fs.mkdirSync(extracted);
    await tar.x({ file: made.archive, cwd: extracted }, ["metadata.json"]);
    type Counted = { total_entries: number; total_entries_applied_index: number; applied_index: number };
    const metadata = JSON.parse(fs.readFileSync(join(extracted, "metadata.json"), "utf8")) as Counted;
    // Counted while writes were paused for the backup: the rows the archive holds.
    expect(metadata.total_entries).toBe(20);
    expect(metadata.total_entries_applied_index).toBeGreaterThan(0);
    await writeRows(node, 21, 25);
    const stats = await getJson<{ total_entries: number; applied_index: number }>(`${node.adminUrl}/admin/stats`);
    for (const extra of [[], ["--json"]]) {
      const info = await svc(["admin", "cluster-info", "--node", node.adminUrl, ...extra]);
      expect({ exitCode: info.exitCode, stderr: info.stderr }).toEqual({ exitCode: 0, stderr: "" });
      expect(JSON.parse(info.stdout) as Counted).toMatchObject({ total_entries: 25, total_entries_applied_index: stats.applied_index });
    }
    expect(stats.total_entries).toBe(25);
    const snapshotBackup = await svc(["admin", "backup", "snapshot", "--config", node.configPath, "--to", join(env.dir, "snapshots")]);
    expect(snapshotBackup.exitCode).toBe(0);
    const latest = JSON.parse(fs.readFileSync(join(env.dir, "snapshots", "latest", "metadata.json"), "utf8")) as Counted;
    expect(latest.total_entries).toBe(25);
    expect(latest.total_entries_applied_index).toBeGreaterThanOrEqual(stats.applied_index);
  }, 120_000);

  procTest("disaster recovery on new hosts: init-cluster --bootstrap on every node gives one cluster; on one node with the others empty too", async (env) => {
    const { nodes, leader, etcDir } = await clusterWithRows(env);
    // An address the old cluster replicated (set-member, as add-node does) names an old host:
    // the new cluster must take its members' addresses from the new configuration instead.
    const moved = nodes.find((n) => n !== leader)!;
    const setMember = await svc(["admin", "set-member", "--node", leader.adminUrl, "--id", moved.nodeId, "--admin", `127.0.0.1:${await freePort()}`]);
    expect(setMember.exitCode).toBe(0);
    const made = await fullBackup(leader, join(env.dir, "backups"), etcDir);
    for (const n of nodes) await n.kill9();

    const oldClusterId = fs.readFileSync(join(leader.dataDir, "MEMBER"), "utf8").trim();
    // "same": the others are old hosts whose raft/ and store/ were emptied, their MEMBER (naming
    // the old cluster) kept: rebuilt members, yet they vote for the new cluster restored beside them.
    for (const variant of ["every", "one", "same"] as const) {
      const configs = await clusterConfigs(join(env.dir, `new-${variant}`), 3);
      const fresh = configs.map((c) => env.node({ ...c, cluster: { ...c.cluster, bootstrap: false } }));
      for (const [i, n] of fresh.entries()) {
        if (variant === "same" && i > 0) {
          fs.mkdirSync(n.dataDir, { recursive: true });
          fs.writeFileSync(join(n.dataDir, "MEMBER"), `${oldClusterId}\n`);
          continue;
        }
        if (variant !== "every" && i > 0) continue;
        fs.mkdirSync(n.dataDir, { recursive: true });
        await tar.x({ file: made.archive, cwd: n.dataDir, filter: (p) => p.startsWith("raft/") || p.startsWith("store/") });
        fs.mkdirSync(env.dir, { recursive: true });
        fs.writeFileSync(n.configPath, (await import("../../src/config/index.ts")).renderConfigToml(n.config));
        const r = await svc(["admin", "init-cluster", "--bootstrap", "--config", n.configPath, "--json"]);
        expect(r.exitCode).toBe(0);
      }
      for (const n of fresh) n.spawn();
      await Promise.all(fresh.map((n) => n.waitHealthy(60_000)));
      await waitForLeader(fresh, 60_000);
      const infos = await Promise.all(fresh.map((n) => getJson<{ cluster_id: string; members: { id: string; peer: string; admin: string }[] }>(`${n.adminUrl}/admin/cluster-info`)));
      expect(new Set(infos.map((i) => i.cluster_id)).size).toBe(1);
      const configured = fresh.map((n) => ({ id: n.nodeId, peer: addressText(n.config.listen?.peer, "peer"), admin: addressText(n.config.listen?.admin, "admin") }));
      for (const info of infos) expect(info.members.map((m) => ({ id: m.id, peer: m.peer, admin: m.admin }))).toEqual(configured);
      for (const n of fresh) await expectRows(n, rowsBefore);
      // SPEC §4.5 step 5: cluster-status healthy (once every member has caught up).
      await waitFor("cluster-status to report a healthy cluster", async () =>
        (await svc(["admin", "cluster-status", "--node", fresh[0]?.adminUrl ?? ""])).exitCode === 0, { deadlineMs: 60_000, intervalMs: 500 });
      for (const n of fresh) await n.stop();
    }
  }, 240_000);

  procTest("a backup restored onto a host whose node id the backup's members do not name, started without init-cluster --bootstrap, says so on /health and in its log, naming init-cluster --bootstrap; doing as it says gives the data", async (env) => {
    const { node, made } = await backedUpSingleNode(env);
    expect(await node.stop()).toBe(0);
    // A new host, its node named otherwise; SPEC §4.5's step 4 (init-cluster --bootstrap) skipped.
    const config = await singleNodeConfig(join(env.dir, "new-host"), {}, "db1");
    const fresh = env.node({ ...config, cluster: { ...config.cluster, bootstrap: false } });
    const extract = async (): Promise<void> => {
      fs.rmSync(join(fresh.dataDir, "raft"), { recursive: true, force: true });
      fs.rmSync(join(fresh.dataDir, "store"), { recursive: true, force: true });
      fs.mkdirSync(fresh.dataDir, { recursive: true });
      await tar.x({ file: made.archive, cwd: fresh.dataDir, filter: (p) => p.startsWith("raft/") || p.startsWith("store/") });
    };
    await extract();
    fresh.spawn();
    const problem = await waitFor("/health to say why db1 waits", async () => {
      const r = await health(fresh);
      return r?.body.problem?.includes("init-cluster --bootstrap") === true ? r.body.problem : undefined;
    }, { deadlineMs: 30_000, intervalMs: 200 });
    expect(problem).toContain("db1");
    expect(problem).toContain("node1");
    await waitFor("the log to say it", () => fresh.lastRunLog().includes("init-cluster --bootstrap"), { deadlineMs: 10_000, intervalMs: 100 });
    // What it says to do: stop, extract again, init-cluster --bootstrap, start.
    expect(await fresh.stop()).toBe(0);
    await extract();
    const r = await svc(["admin", "init-cluster", "--bootstrap", "--config", fresh.configPath]);
    expect(r.exitCode).toBe(0);
    await fresh.start();
    await expectRows(fresh, 20);
  }, 120_000);

  procTest("a backup's raft/ and store/ copied into raft/ and store/ (one level too deep) stop the node at start, naming them and how to copy them, rather than serving the data they were to replace", async (env) => {
    const { node, made } = await backedUpSingleNode(env);
    await writeRows(node, 21, 30);
    expect(await node.stop()).toBe(0);
    const extracted = join(env.dir, "extracted");
    fs.mkdirSync(extracted);
    await tar.x({ file: made.archive, cwd: extracted });
    // `cp -r /tmp/r/raft /var/lib/svc/raft` with raft/ there: the copy lands in raft/raft/.
    fs.cpSync(join(extracted, "raft"), join(node.dataDir, "raft", "raft"), { recursive: true });
    fs.cpSync(join(extracted, "store"), join(node.dataDir, "store", "store"), { recursive: true });
    node.spawn();
    expect(await node.waitExit(30_000)).toBe(3);
    const said = node.lastRunLog();
    expect(said).toContain(join(node.dataDir, "raft", "raft"));
    expect(said).toContain(`cp -r /tmp/r/raft /tmp/r/store ${node.dataDir}/`);
    // As it says: the copies moved to where they belong, the nested ones removed.
    fs.cpSync(join(extracted, "raft"), join(node.dataDir, "raft"), { recursive: true, force: true });
    fs.rmSync(join(node.dataDir, "raft", "raft"), { recursive: true });
    fs.rmSync(join(node.dataDir, "store", "store"), { recursive: true });
    await node.start();
    await expectRows(node, 20);
  }, 120_000);

  procTest("a backup destination inside the data directory is refused (exit 2), naming it: the disk failure, and SPEC §4.5's emptied raft/, would take the backup with the data", async (env) => {
    const node = await env.startSingleNode();
    const etcDir = join(env.dir, "etc-svc");
    fs.mkdirSync(etcDir, { recursive: true });
    fs.copyFileSync(node.configPath, join(etcDir, "config.toml"));
    for (const [kind, sub] of [["full", "backups"], ["full", "raft/snapshots"], ["snapshot", "raft/snapshots/latest-copy"], ["snapshot", "."]] as const) {
      const to = join(node.dataDir, sub);
      const r = await svc(["admin", "backup", kind, "--config", node.configPath, "--to", to, ...(kind === "full" ? ["--etc-dir", etcDir] : [])]);
      expect(r.exitCode, `${kind} --to ${sub}`).toBe(2);
      expect(r.stderr).toContain(node.dataDir);
      expect(r.stderr).toContain("inside the data directory");
    }
    // Nothing was paused, and nothing written there.
    expect((await getJson<{ writes_paused: boolean }>(`${node.clientUrl}/health`)).writes_paused).toBe(false);
    expect(fs.existsSync(join(node.dataDir, "backups"))).toBe(false);
    expect(fs.readdirSync(join(node.dataDir, "raft", "snapshots")).filter((n) => !/^[0-9a-f]{16}-[0-9a-f]{16}$/.test(n))).toEqual([]);
  }, 60_000);

  procTest("another cluster's backup restored onto one member of a live cluster: the others keep their data and take writes, and their cluster-status names that member as answering for another cluster, not as stopped", async (env) => {
    const { nodes, leader, etcDir } = await clusterWithRows(env);
    const target = nodes.find((n) => n !== leader)!;
    // The other cluster: a lone node with the same name.
    const other = await env.node(await singleNodeConfig(join(env.dir, "other"), {}, target.nodeId)).start();
    await execute(other.clientUrl, ["CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)", "INSERT INTO t VALUES (999, 'other')"]);
    const made = await fullBackup(other, join(env.dir, "other-backups"), etcDir);
    expect(await other.stop()).toBe(0);
    expect(await target.stop()).toBe(0);
    const extracted = join(env.dir, "extracted");
    fs.mkdirSync(extracted);
    await tar.x({ file: made.archive, cwd: extracted });
    fs.cpSync(join(extracted, "raft"), join(target.dataDir, "raft"), { recursive: true, force: true });
    fs.cpSync(join(extracted, "store"), join(target.dataDir, "store"), { recursive: true, force: true });
    target.spawn();
    const said = await waitFor("cluster-status to name the member of another cluster", async () => {
      const r = await svc(["admin", "cluster-status", "--node", leader.adminUrl]);
      return r.stdout.includes(`${target.nodeId} answers as a member of another cluster`) ? r : undefined;
    }, { deadlineMs: 30_000, intervalMs: 500 });
    expect(said.exitCode).toBe(1);
    // What it says of that member; another may be suspect for a moment on a loaded host.
    const subjects = (line: string): string[] => (line.slice("PROBLEM: ".length).split(/ (?:is|are|answers) /)[0] ?? "").split(", ");
    const ofTarget = said.stdout.split("\n").filter((l) => l.startsWith("PROBLEM: ") && subjects(l).includes(target.nodeId));
    expect(ofTarget.join("\n")).toContain("answers as a member of another cluster");
    expect(ofTarget.join("\n")).not.toContain("cut off by a partition");
    await writeRows(leader, rowsBefore + 1, rowsBefore + 5);
    const live = nodes.filter((n) => n !== target);
    for (const n of live) await waitFor(`${n.nodeId} to hold every row`, async () => (await query(n.clientUrl, "SELECT count(*) FROM t WHERE id <= ?", [rowsBefore + 5]).catch(() => null))?.[0]?.[0] === rowsBefore + 5, { deadlineMs: 20_000 });
    for (const n of live) expect((await query(n.clientUrl, "SELECT count(*) FROM t WHERE id = 999"))[0]?.[0]).toBe(0);
  }, 120_000);

  procTest("init-cluster --bootstrap refuses a data directory whose Raft state is newer than the restored snapshot, unless --force", async (env) => {
    const { nodes, leader, etcDir } = await clusterWithRows(env);
    await fullBackup(leader, join(env.dir, "backups"), etcDir);
    await writeRows(leader, rowsBefore + 1, rowsBefore + 10);
    const node = nodes[0] as NodeProcess;
    for (const n of nodes) await n.stop();
    const refused = await svc(["admin", "init-cluster", "--bootstrap", "--config", node.configPath]);
    expect(refused.exitCode).not.toBe(0);
    expect(refused.stderr).toContain("newer than the restored snapshot");
    const forced = await svc(["admin", "init-cluster", "--bootstrap", "--force", "--config", node.configPath]);
    expect(forced.exitCode).toBe(0);
  }, 180_000);

  procTest("a backup whose node dies while writes are paused resumes them through another member and reports what failed first", async (env) => {
    const { nodes, leader, etcDir } = await clusterWithRows(env);
    const beside = nodes.find((n) => n !== leader) as NodeProcess;
    const proxy = snapshotHoldingProxy(beside);
    try {
      // A lease far longer than the test: only a resume can end this pause in time.
      const proc = Bun.spawn([ensureBinary(), "admin", "backup", "full", "--config", beside.configPath, "--node", proxy.url,
        "--to", join(env.dir, "backups"), "--etc-dir", etcDir, "--lease", "120s"], { stdout: "pipe", stderr: "pipe" });
      await proxy.snapshotAsked;
      expect(await writesAccepted(leader, rowsBefore + 1)).toBe(false); // paused
      await beside.kill9();
      proxy.release();
      expect(await proc.exited).not.toBe(0);
      const stderr = await new Response(proc.stderr).text();
      expect(stderr).not.toMatch(/^svc: cannot resume writes/m);
      await waitFor("writes resumed through another member", () => writesAccepted(leader, rowsBefore + 1), { deadlineMs: 20_000 });
    } finally {
      proxy.stop();
    }
  }, 120_000);

  procTest("a backup interrupted by SIGINT resumes writes; one killed -9 leaves a pause that ends with its lease", async (env) => {
    const { leader, etcDir } = await clusterWithRows(env);
    // The backup talks to the node through a proxy that holds the snapshot request.
    for (const how of ["SIGINT", "SIGKILL"] as const) {
      const proxy = snapshotHoldingProxy(leader);
      const proc = Bun.spawn([ensureBinary(), "admin", "backup", "full", "--config", leader.configPath, "--node", proxy.url,
        "--to", join(env.dir, "backups"), "--etc-dir", etcDir, "--lease", "5s"], { stdout: "pipe", stderr: "pipe" });
      try {
        await proxy.snapshotAsked;
        expect(await writesAccepted(leader, 1)).toBe(false); // paused
        if (how === "SIGINT") {
          proc.kill("SIGINT");
          proxy.release();
          expect(await proc.exited).toBe(130);
          expect(await writesAccepted(leader, 1)).toBe(true);
        } else {
          proc.kill("SIGKILL");
          await proc.exited;
          await waitFor("the pause's lease to run out", () => writesAccepted(leader, 1), { deadlineMs: 30_000 });
          // What a backup killed while archiving leaves in the data directory goes with the next one.
          fs.mkdirSync(join(leader.dataDir, ".backup-staging-999999999", "store"), { recursive: true });
          await fullBackup(leader, join(env.dir, "backups"), etcDir);
          expect(fs.readdirSync(leader.dataDir).filter((n) => n.startsWith(".backup"))).toEqual([]);
        }
        if (how === "SIGINT") expect(fs.readdirSync(leader.dataDir).filter((n) => n.startsWith(".backup"))).toEqual([]);
      } finally {
        proxy.stop();
      }
    }
    await expectRows(leader, rowsBefore);
    // By hand too: pause-writes --lease ends by itself.
    const paused = await svc(["admin", "pause-writes", "--lease", "2s", "--node", leader.adminUrl]);
    expect(paused.exitCode).toBe(0);
    expect(paused.stdout).toContain("writes paused");
    expect(await writesAccepted(leader, 1)).toBe(false);
    await waitFor("the hand-made pause's lease to run out", () => writesAccepted(leader, 1), { deadlineMs: 30_000 });
  }, 180_000);

  procTest("SPEC §4.4's snapshot backup by hand: the snapshot directory being copied is held, and not pruned however many images follow", async (env) => {
    const { leader } = await clusterWithRows(env);
    const snapshotsDir = join(leader.dataDir, "raft", "snapshots");
    const images = () => fs.readdirSync(snapshotsDir).filter((n) => /^[0-9a-f]{16}-[0-9a-f]{16}$/.test(n)).sort();
    // 1. POST /admin/snapshot to the leader; 2. wait until the snapshot metrics show it done.
    const before = await metric(leader.adminUrl, "tensor_chain_snapshots_total");
    expect((await postJson(`${leader.adminUrl}/admin/snapshot`, {})).status).toBe(202);
    await waitFor("the snapshot metrics to show completion", async () => (await metric(leader.adminUrl, "tensor_chain_snapshots_total")) > before);
    // 3. Hold the newest, copy it — meanwhile the node makes more images than it keeps.
    const copied = images().at(-1) ?? "";
    fs.writeFileSync(join(snapshotsDir, copied, ".hold"), "");
    for (let i = 0; i < 4; i++) {
      await writeRows(leader, rowsBefore + 1 + i * 10, rowsBefore + 10 + i * 10);
      expect((await postJson(`${leader.adminUrl}/admin/snapshot?wait=true&local=true`, {})).status).toBe(200);
    }
    expect(images()).toContain(copied);
    const backup = join(env.dir, "manual");
    fs.cpSync(join(snapshotsDir, copied), join(backup, copied), { recursive: true, filter: (p) => !p.endsWith(".hold") });
    // 4. cluster-info as metadata.json.
    const info = await svc(["admin", "cluster-info", "--node", leader.adminUrl]);
    expect(info.exitCode).toBe(0);
    fs.writeFileSync(join(backup, "metadata.json"), info.stdout);
    expect(fs.readdirSync(join(backup, copied)).sort()).toEqual(["meta.json", "state.db"]);
    // Released, it goes with the next image.
    fs.rmSync(join(snapshotsDir, copied, ".hold"));
    await writeRows(leader, rowsBefore + 41, rowsBefore + 50);
    expect((await postJson(`${leader.adminUrl}/admin/snapshot?wait=true&local=true`, {})).status).toBe(200);
    await waitFor("the released snapshot to be pruned", async () => !images().includes(copied));
  }, 180_000);

  procTest("snapshot backup: latest/ holds a snapshot directory and metadata.json; copied into raft/snapshots/ the node uses it", async (env) => {
    const { nodes, leader } = await clusterWithRows(env);
    const to = join(env.dir, "snapshots");
    const r = await svc(["admin", "backup", "snapshot", "--config", leader.configPath, "--to", to, "--json"]);
    expect(r.exitCode).toBe(0);
    const made = JSON.parse(r.stdout) as { snapshot: { index: number; dir: string }; latest: string };
    const latest = fs.readdirSync(join(to, "latest")).sort();
    expect(latest).toContain("metadata.json");
    const snapName = latest.find((n) => /^[0-9a-f]{16}-[0-9a-f]{16}$/.test(n)) ?? "";
    expect(fs.readdirSync(join(to, "latest", snapName)).sort()).toEqual(["meta.json", "state.db"]);
    expect(fs.existsSync(join(made.snapshot.dir, ".hold"))).toBe(false); // released
    // A lone copy of the cluster's data: a single node started from latest/ alone holds every row.
    for (const n of nodes) await n.stop();
    const single = env.node({ ...(await import("../lib/proc-config.ts").then((m) => m.singleNodeConfig(join(env.dir, "single")))) });
    fs.mkdirSync(join(single.dataDir, "raft", "snapshots"), { recursive: true });
    fs.cpSync(join(to, "latest", snapName), join(single.dataDir, "raft", "snapshots", snapName), { recursive: true });
    const init = await (async () => {
      fs.writeFileSync(single.configPath, (await import("../../src/config/index.ts")).renderConfigToml(single.config));
      return svc(["admin", "init-cluster", "--bootstrap", "--config", single.configPath]);
    })();
    expect(init.exitCode).toBe(0);
    await single.start();
    await expectRows(single, rowsBefore);
  }, 180_000);

  procTest("through S3: a full backup, its off-site copy with latest.tar.gz, and verify of an s3:// archive", async (env) => {
    const s3 = await startS3Server();
    try {
      const { leader, etcDir } = await clusterWithRows(env);
      const made = await fullBackup(leader, `s3://${s3.bucket}/full`, etcDir, ["--offsite", `s3://${s3.bucket}/offsite`], s3.env);
      expect(made.archive).toMatch(new RegExp(`^s3://${s3.bucket}/full/svc-backup-\\d{8}\\.tar\\.gz$`));
      const { ObjectStore } = await import("../../src/backup/s3.ts");
      const offsite = await ObjectStore.at(`s3://${s3.bucket}/offsite`, s3.env).list();
      expect(offsite.map((o) => o.name).sort()).toEqual([made.archive.split("/").at(-1) ?? "", "latest.tar.gz"].sort());
      const verified = await svc(["admin", "backup", "verify", `s3://${s3.bucket}/offsite/latest.tar.gz`], s3.env);
      expect(verified.exitCode).toBe(0);
      // SPEC §4.5's disaster recovery step 2: fetch the latest off-site archive (verified on arrival).
      const fetched = join(env.dir, "fetched", "latest.tar.gz");
      fs.mkdirSync(join(env.dir, "fetched"));
      const fetch = await svc(["admin", "backup", "fetch", `s3://${s3.bucket}/offsite/latest.tar.gz`, "--out", fetched, "--json"], s3.env);
      expect(fetch.exitCode).toBe(0);
      expect((JSON.parse(fetch.stdout) as { snapshot: { index: number } }).snapshot.index).toBe(made.snapshot.index);
      expect(fs.existsSync(fetched)).toBe(true);
      // Nothing local is left behind by an upload.
      expect(fs.readdirSync(leader.dataDir).filter((n) => n.startsWith(".backup"))).toEqual([]);
      // The weekly off-site copy of the newest local full backup, and a snapshot backup to S3.
      const local = join(env.dir, "local");
      await fullBackup(leader, local, etcDir);
      const weekly = await svc(["admin", "backup", "offsite", "--config", leader.configPath, "--from", local, "--to", `s3://${s3.bucket}/weekly`, "--json"], s3.env);
      expect(weekly.exitCode).toBe(0);
      const weeklyNames = (await ObjectStore.at(`s3://${s3.bucket}/weekly`, s3.env).list()).map((o) => o.name);
      expect(weeklyNames).toContain("latest.tar.gz");
      expect(weeklyNames.some((n) => /^svc-backup-\d{8}\.tar\.gz$/.test(n))).toBe(true);
      const snap = await svc(["admin", "backup", "snapshot", "--config", leader.configPath, "--to", `s3://${s3.bucket}/snaps`, "--json"], s3.env);
      expect(snap.exitCode).toBe(0);
      const latest = (await ObjectStore.at(`s3://${s3.bucket}/snaps`, s3.env).list({ under: "latest/" })).map((o) => o.name.replace(/[0-9a-f]{16}-[0-9a-f]{16}/, "T-I"));
      expect(latest.sort()).toEqual(["latest/T-I/meta.json", "latest/T-I/state.db", "latest/metadata.json"]);
      // A download that fails leaves no temporary directory behind (in TMPDIR, where it goes, nor in /tmp).
      const scratch = join(env.dir, "scratch");
      fs.mkdirSync(scratch);
      const tmpBefore = new Set(fs.readdirSync("/tmp").filter((n) => n.startsWith("svc-verify-")));
      const noCreds = await svc(["admin", "backup", "verify", `s3://${s3.bucket}/offsite/latest.tar.gz`], { AWS_ACCESS_KEY_ID: "", AWS_SECRET_ACCESS_KEY: "", TMPDIR: scratch });
      expect(noCreds.exitCode).toBe(1);
      expect(noCreds.stderr).toContain("AWS_ACCESS_KEY_ID");
      const missing = await svc(["admin", "backup", "verify", `s3://${s3.bucket}/offsite/no-such.tar.gz`], { ...s3.env, TMPDIR: scratch });
      expect(missing.exitCode).toBe(1);
      expect(fs.readdirSync(scratch)).toEqual([]);
      expect(fs.readdirSync("/tmp").filter((n) => n.startsWith("svc-verify-") && !tmpBefore.has(n))).toEqual([]);
    } finally {
      await s3.stop();
    }
  }, 180_000);

  procTest("a full backup leaves the key files the configuration names out of etc/svc/, unless --include-secrets", async (env) => {
    const etcDir = join(env.dir, "etc-svc");
    fs.mkdirSync(etcDir, { recursive: true });
    const keyFile = join(etcDir, "gossip.key");
    fs.writeFileSync(keyFile, `${Buffer.from("0123456789abcdef0123456789ABCDEF").toString("base64")}\n`, { mode: 0o600 });
    const [node] = await startCluster(env, 1, { gossip: { keyFile } });
    if (node === undefined) throw new Error("no node");
    fs.copyFileSync(node.configPath, join(etcDir, "config.toml"));
    const listing = async (archive: string): Promise<string[]> => {
      const listed: string[] = [];
      await tar.t({ file: archive, onReadEntry: (e) => listed.push(e.path) });
      return listed;
    };
    const plain = await fullBackup(node, join(env.dir, "plain"), etcDir);
    expect(await listing(plain.archive)).toContain("etc/svc/config.toml");
    expect(await listing(plain.archive)).not.toContain("etc/svc/gossip.key");
    const withSecrets = await fullBackup(node, join(env.dir, "with-secrets"), etcDir, ["--include-secrets"]);
    expect(await listing(withSecrets.archive)).toContain("etc/svc/gossip.key");
  }, 120_000);

  procTest("a configuration directory of links (as configuration management makes it) is archived as the files they lead to, and verifies; a key file reached through a link stays out", async (env) => {
    const managed = join(env.dir, "managed");
    fs.mkdirSync(managed, { recursive: true });
    fs.writeFileSync(join(managed, "gossip.key"), `${Buffer.from("0123456789abcdef0123456789ABCDEF").toString("base64")}\n`, { mode: 0o600 });
    const etcDir = join(env.dir, "etc-svc");
    fs.mkdirSync(etcDir, { recursive: true });
    fs.symlinkSync(join(managed, "gossip.key"), join(etcDir, "gossip.key"));
    const [node] = await startCluster(env, 1, { gossip: { keyFile: join(etcDir, "gossip.key") } });
    if (node === undefined) throw new Error("no node");
    fs.copyFileSync(node.configPath, join(managed, "config.toml"));
    fs.symlinkSync(join(managed, "config.toml"), join(etcDir, "config.toml"));
    fs.symlinkSync(join(managed, "nowhere.toml"), join(etcDir, "dangling.toml"));
    // The directory itself a link, too.
    const etcLink = join(env.dir, "etc-link");
    fs.symlinkSync(etcDir, etcLink);
    for (const dir of [etcDir, etcLink]) {
      const made = await fullBackup(node, join(env.dir, `backups-${basename(dir)}`), dir);
      const files = new Map<string, string>();
      await tar.t({ file: made.archive, onReadEntry: (e) => files.set(e.path, e.type) });
      expect(files.get("etc/svc/config.toml")).toBe("File");
      expect(files.has("etc/svc/gossip.key")).toBe(false);
      expect(files.has("etc/svc/dangling.toml")).toBe(false);
      const verified = await svc(["admin", "backup", "verify", made.archive]);
      expect(`${verified.exitCode} ${verified.stdout}`).toStartWith("0 ");
    }
  }, 120_000);

  procTest("a backup's store copied over a data directory that keeps the newer history: the node says that this undoes the restore, and how to restore", async (env) => {
    const node = await env.startSingleNode({ snapshotIntervalEntries: 10 });
    await execute(node.clientUrl, ["CREATE TABLE t (v)"]);
    for (let i = 0; i < 5; i++) await execute(node.clientUrl, [{ sql: "INSERT INTO t VALUES (?)", params: [i] }]);
    expect(await node.stop()).toBe(0);
    const saved = join(env.dir, "saved-store");
    fs.cpSync(join(node.dataDir, "store"), saved, { recursive: true });
    await node.start();
    // Past a few checkpoints: raft/checkpoint then vouches for a store well ahead of the saved one.
    for (let i = 5; i < 40; i++) await execute(node.clientUrl, [{ sql: "INSERT INTO t VALUES (?)", params: [i] }]);
    await waitFor("a checkpoint past the saved store", async () => (await metric(node.adminUrl, "tensor_chain_checkpoints_total")) >= 2);
    expect(await node.stop()).toBe(0);
    fs.rmSync(join(node.dataDir, "store"), { recursive: true });
    fs.cpSync(saved, join(node.dataDir, "store"), { recursive: true });
    await node.start();
    expect(await query(node.clientUrl, "SELECT count(*) FROM t")).toEqual([[40]]);
    expect(node.lastRunLog()).toContain("this start undoes that");
    expect(node.lastRunLog()).toContain("empty the data directory");
  }, 120_000);

  procTest("a destination that fills up: the error names it and what to do, no partial snapshot backup is left, writes go on; fetch --out a directory says so", async (env) => {
    // A tmpfs is mounted for the destination: as root only (CI runs so), as the disk-full tests.
    if (process.getuid?.() !== 0) return;
    const node = await env.startSingleNode();
    await execute(node.clientUrl, ["CREATE TABLE t (v)"]);
    for (let i = 0; i < 20; i++) await execute(node.clientUrl, [{ sql: "INSERT INTO t VALUES (?)", params: ["x".repeat(50_000)] }]);
    const small = join(env.dir, "small");
    fs.mkdirSync(small);
    expect(Bun.spawnSync(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", small]).exitCode).toBe(0);
    try {
      const r = await runBinary(["admin", "backup", "snapshot", "--config", node.configPath, "--to", small]);
      expect(r.exitCode).toBe(1);
      expect(r.stderr).toContain(`writing to ${small} failed`);
      expect(r.stderr).toContain("free space there");
      expect(fs.readdirSync(small)).toEqual([]);
    } finally {
      Bun.spawnSync(["umount", small]);
    }
    await execute(node.clientUrl, [{ sql: "INSERT INTO t VALUES (?)", params: ["after"] }]);
    const dir = join(env.dir, "out-dir");
    fs.mkdirSync(dir);
    const fetched = await runBinary(["admin", "backup", "fetch", join(env.dir, "svc-backup-20260101.tar.gz"), "--out", dir]);
    expect(fetched.exitCode).toBe(2);
    expect(fetched.stderr).toContain(`${dir} is a directory`);
  }, 120_000);
});
