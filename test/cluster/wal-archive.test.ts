// WAL archiving and point-in-time restore on three real nodes (SPEC §4.4 "WAL archiving",
// §4.5 "Point-in-time restore"):
//   - an archive_command that fails for a while loses nothing (segments stay until archived,
//     whatever images say), and leader changes and kill -9 during archiving leave a gap-free
//     archive in which overlapping segments agree;
//   - a point-in-time restore done as the SPEC writes it gives every node every row committed
//     at or before the target, and none after; the restored cluster archives its new history
//     from the entry after the replayed ones, to the old location (where a later replay refuses
//     the two histories) or to a new, empty one;
//   - the whole cluster killed -9 under write load and restored from the archive loses only
//     writes acknowledged within the last archive_timeout.

import * as fs from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect } from "bun:test";
import { openArchiveSource } from "../../src/backup/index.ts";
import { scanArchiveSegment } from "../../src/storage/index.ts";
import type { Entry } from "../../src/raft/types.ts";
import { clusterTest, type Cluster } from "../lib/cluster.ts";
import {
  Ledger, WriteLoad, ensureBinary, execute, kvSchema, kvTable, metric, postJson, runBinary, useProcessCleanup, waitFor, type NodeProcess,
} from "../lib/proc.ts";

useProcessCleanup();

const archiveTimeoutMs = 1_000;
/** An archive_command that fails (with a message on stderr) while the flag file ../fail exists, and copies otherwise. */
const failingWhileFlagged = 'if [ -e ../fail ]; then echo "archive destination refused %f" >&2; exit 3; fi; cp %p ../archive/%f';

/** Every entry the archive holds, by index; overlapping segments must hold the same entry. */
async function archivedEntries(dir: string): Promise<Map<number, Entry>> {
  const source = openArchiveSource(dir);
  const out = new Map<number, Entry>();
  for (const s of await source.listArchive()) {
    const scan = scanArchiveSegment(s.name, await source.readArchived(s.name));
    if (!scan.ok) throw new Error(`archived segment ${s.name} is damaged at ${scan.offset}: ${scan.reason}`);
    for (const e of scan.entries) {
      const before = out.get(e.index);
      if (before !== undefined) {
        expect(`${e.index}:${e.term}:${Buffer.from(e.data).toString("hex")}`).toBe(`${before.index}:${before.term}:${Buffer.from(before.data).toString("hex")}`);
      }
      out.set(e.index, e);
    }
  }
  return out;
}

/** The kv keys the archived writes insert. */
function archivedKeys(entries: Map<number, Entry>): Set<string> {
  const keys = new Set<string>();
  for (const e of entries.values()) {
    if (e.kind !== "normal") continue;
    const command = JSON.parse(new TextDecoder().decode(e.data)) as { op: string; statements?: { sql: string; params: unknown[] }[] };
    for (const s of command.statements ?? []) if (s.sql.includes(`INTO ${kvTable}`)) keys.add(String(s.params[0]));
  }
  return keys;
}

function expectGapFree(entries: Map<number, Entry>): number {
  const last = Math.max(...entries.keys());
  const missing: number[] = [];
  for (let i = 1; i <= last; i++) if (!entries.has(i)) missing.push(i);
  expect(missing.slice(0, 10)).toEqual([]);
  return last;
}

function ackedKeys(ledger: Ledger): string[] {
  return [...ledger.outcomes].filter(([, o]) => o === "acked").map(([k]) => k);
}

/** Wait until the archive holds every acknowledged write. */
async function waitArchived(dir: string, ledger: Ledger, deadlineMs = 30_000): Promise<Map<number, Entry>> {
  return waitFor("the archive to hold every acknowledged write", async () => {
    const entries = await archivedEntries(dir);
    const keys = archivedKeys(entries);
    return ackedKeys(ledger).every((k) => keys.has(k)) ? entries : undefined;
  }, { deadlineMs, intervalMs: 200 });
}

function writeLoad(cluster: Cluster, ledger: Ledger, keyPrefix: string): WriteLoad {
  let turn = 0;
  return new WriteLoad({ target: () => cluster.live[turn++ % cluster.live.length]!.clientUrl, clients: 6, keyPrefix, ledger, requestTimeoutMs: 5_000 });
}

function archiveDir(cluster: Cluster): string {
  const dir = join(cluster.env.dir, "archive");
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

/** Remove what is inside `dir`, keeping `dir` itself. */
function emptyDir(dir: string): void {
  for (const name of fs.readdirSync(dir)) fs.rmSync(join(dir, name), { recursive: true, force: true });
}

/** The archived segments' ranges and terms, by first index. */
async function archivedRanges(dir: string): Promise<{ firstIndex: number; lastIndex: number; term: number }[]> {
  return (await openArchiveSource(dir).listArchive()).map((s) => s.range).sort((a, b) => a.firstIndex - b.firstIndex);
}

/**
 * After a point-in-time restore the cluster archives on: the leader's mark passes the last entry
 * replayed, no run of the command fails, and no node says it cannot read what it should archive.
 */
async function expectArchivingGoesOn(cluster: Cluster, replayedThrough: number): Promise<NodeProcess> {
  const leader = await cluster.waitLeader();
  await waitFor("the restored cluster to archive its new entries", async () =>
    (await metric(leader.adminUrl, "tensor_chain_wal_archive_archived_through_index")) > replayedThrough, { deadlineMs: 30_000, intervalMs: 200 });
  expect(await metric(leader.adminUrl, "tensor_chain_wal_archive_failures_total")).toBe(0);
  for (const n of cluster.nodes) expect(n.log()).not.toContain("WAL archiving: cannot read entries");
  return leader;
}

describe("WAL archiving on three nodes", () => {
  beforeAll(() => {
    ensureBinary();
  });

  clusterTest("a command failing for a while, a leader change and a leader killed -9 during archiving leave a gap-free archive that lost nothing", {
    overrides: {
      wal: {
        archiveCommand: failingWhileFlagged,
        archiveTimeoutMs,
        segmentSizeBytes: 1024 * 1024,
      },
    },
  }, async (cluster) => {
    const flag = join(cluster.env.dir, "fail");
    const arch = archiveDir(cluster);
    {
      await cluster.start();
      await execute(cluster.nodes[0]!.clientUrl, [kvSchema]);
      // Rows of 4 KiB: the WAL rolls over several 1 MiB segments while the command fails.
      const ledger = new Ledger(4096);
      const load = writeLoad(cluster, ledger, "w");
      try {
        await load.untilAcked(200);
        // The command fails for a while: failures are counted and logged, nothing is skipped,
        // and an image taken meanwhile removes no segment that is not archived.
        fs.writeFileSync(flag, "");
        let leader = await cluster.waitLeader();
        await waitFor("archive failures to be counted", async () => (await metric(leader.adminUrl, "tensor_chain_wal_archive_failures_total")) > 0, { deadlineMs: 20_000 });
        // cluster-status calls it a problem (exit 1), and the failing began at the first failure.
        type Archiving = { wal_archive: { failing_since: string | null; last_failure_at: string | null; failures: number } };
        const first = ((await (await fetch(`${leader.adminUrl}/admin/stats`)).json()) as Archiving).wal_archive;
        await waitFor("a second archive failure", async () => (await metric(leader.adminUrl, "tensor_chain_wal_archive_failures_total")) > first.failures, { deadlineMs: 20_000 });
        const later = ((await (await fetch(`${leader.adminUrl}/admin/stats`)).json()) as Archiving).wal_archive;
        expect(later.failing_since).toBe(first.failing_since);
        expect(Date.parse(later.last_failure_at ?? "")).toBeGreaterThan(Date.parse(later.failing_since ?? ""));
        const status = await runBinary(["admin", "cluster-status", "--node", leader.adminUrl], { deadlineMs: 30_000 });
        expect(status.exitCode).toBe(1);
        expect(status.stdout).toContain(`PROBLEM: WAL archiving on ${leader.nodeId} is failing since ${first.failing_since}`);
        await load.untilAcked(500);
        expect((await postJson(`${leader.adminUrl}/admin/snapshot?wait=true`, {})).status).toBe(200);
        expect(leader.log()).toContain("archive destination refused");
        fs.rmSync(flag);
        await load.untilAcked(700);
        // A leader change, then the new leader killed -9 while it archives.
        const next = cluster.others(leader)[0]!;
        expect((await postJson(`${leader.adminUrl}/admin/transfer-leader`, { id: next.nodeId })).status).toBe(200);
        leader = await cluster.waitLeader();
        await load.untilAcked(900);
        await cluster.kill9(leader);
        await load.untilAcked(1100, 60_000);
        leader.spawn();
        await cluster.waitHealthy(leader, 30_000);
        await load.untilAcked(1300, 60_000);
      } finally {
        await load.stop();
      }
      const entries = await waitArchived(arch, ledger);
      expectGapFree(entries);
      const leader = await cluster.waitLeader();
      const stats = await (await fetch(`${leader.adminUrl}/admin/stats`)).json() as { wal_archive: { failures: number; archived_through: number } | null };
      expect(stats.wal_archive).not.toBeNull();
    }
  }, 180_000);

  clusterTest("a cluster restored from a full backup taken while archiving lagged behind its snapshot goes on archiving after it", {
    overrides: {
      wal: { archiveCommand: failingWhileFlagged, archiveTimeoutMs, segmentSizeBytes: 1024 * 1024 },
    },
  }, async (cluster) => {
    const flag = join(cluster.env.dir, "fail");
    const arch = archiveDir(cluster);
    await cluster.start();
    await execute(cluster.nodes[0]!.clientUrl, [kvSchema]);
    const ledger = new Ledger(64);
    const first = writeLoad(cluster, ledger, "a");
    try {
      await first.untilAcked(100);
    } finally {
      await first.stop();
    }
    await waitArchived(arch, ledger);
    // Archiving fails while more rows land and the backup is taken: the backup's snapshot is
    // past what the archive holds, and the restored members hold nothing before it.
    fs.writeFileSync(flag, "");
    const later = new Ledger(64);
    const second = writeLoad(cluster, later, "b");
    try {
      await second.untilAcked(100);
    } finally {
      await second.stop();
    }
    const leader = await cluster.waitLeader();
    await waitFor("archive failures to be counted", async () => (await metric(leader.adminUrl, "tensor_chain_wal_archive_failures_total")) > 0, { deadlineMs: 20_000 });
    const backups = join(cluster.env.dir, "backups");
    const etc = join(cluster.env.dir, "etc-svc");
    fs.mkdirSync(etc);
    fs.copyFileSync(leader.configPath, join(etc, "config.toml"));
    const made = await runBinary(["admin", "backup", "full", "--config", leader.configPath, "--to", backups, "--etc-dir", etc, "--lease", "3s", "--json"], { deadlineMs: 60_000 });
    expect(made.exitCode).toBe(0);
    const archive = (JSON.parse(made.stdout) as { archive: string }).archive;
    for (const n of cluster.nodes) expect(await n.stop()).toBe(0);
    const tar = await import("tar");
    for (const n of cluster.nodes) await tar.x({ file: archive, cwd: n.dataDir, filter: (p) => p.startsWith("raft/") || p.startsWith("store/") });
    fs.rmSync(flag);
    for (const n of cluster.nodes) n.spawn();
    for (const n of cluster.nodes) await cluster.waitHealthy(n, 60_000);
    const third = new Ledger(64);
    const after = writeLoad(cluster, third, "c");
    try {
      await after.untilAcked(50);
    } finally {
      await after.stop();
    }
    await waitArchived(arch, third);
    const restoredLeader = await cluster.waitLeader();
    expect(restoredLeader.log()).toMatch(/WAL archiving goes on after entries \d+…\d+, which no member holds/);
  }, 180_000);

  // SPEC §4.5 begins "stop all nodes", then removes their Raft state: what was written since the
  // last archived segment must reach the archive at the stop, as PostgreSQL archives its last
  // segment at shutdown, whether the leader stops first or last (by then no longer leading).
  clusterTest("a cluster stopped cleanly archives every acknowledged write, the leader stopped first or last, with archive_timeout far off", {
    // A node whose data directory holds no-archive cannot archive: the one stopping must.
    overrides: { wal: { archiveCommand: "if [ -e no-archive ]; then exit 1; fi; cp %p ../archive/%f", archiveTimeoutMs: 3_600_000, segmentSizeBytes: 1024 * 1024 } },
  }, async (cluster) => {
    const arch = archiveDir(cluster);
    await cluster.start();
    await execute(cluster.nodes[0]!.clientUrl, [kvSchema]);
    const insert = (key: string) => ({ sql: `INSERT INTO ${kvTable} (k, v) VALUES (?, ?)`, params: [key, `value of ${key}`] });
    const ledger = new Ledger(0);
    const writeBatch = async (prefix: string): Promise<void> => {
      for (let i = 0; i < 20; i++) {
        await cluster.executeAnywhere([insert(`${prefix}-${i}`)]);
        ledger.outcomes.set(`${prefix}-${i}`, "acked");
      }
    };
    // The leader stopped last: the followers first, then the leader once it has stepped down.
    await writeBatch("leader-last");
    const leader = await cluster.waitLeader();
    for (const n of cluster.others(leader)) expect(await n.stop()).toBe(0);
    await waitFor(`${leader.nodeId} to step down`, async () => (await metric(leader.adminUrl, "tensor_chain_is_leader")) === 0, { deadlineMs: 20_000 });
    expect(await leader.stop()).toBe(0);
    expect(archivedKeys(await archivedEntries(arch)).size).toBe(20);
    // The leader stopped first, while the others, which elect one of them meanwhile, cannot
    // archive: what the archive holds once it has stopped, it archived.
    for (const n of cluster.nodes) n.spawn();
    for (const n of cluster.nodes) await cluster.waitHealthy(n, 60_000);
    await writeBatch("leader-first");
    const second = await cluster.waitLeader();
    for (const n of cluster.others(second)) fs.writeFileSync(join(n.dataDir, "no-archive"), "");
    expect(await second.stop()).toBe(0);
    const archivedByIt = archivedKeys(await archivedEntries(arch));
    expect(ackedKeys(ledger).filter((k) => !archivedByIt.has(k))).toEqual([]);
    for (const n of cluster.others(second)) expect(await n.stop()).toBe(0);
    const entries = await archivedEntries(arch);
    expectGapFree(entries);
    const keys = archivedKeys(entries);
    expect(ackedKeys(ledger).filter((k) => !keys.has(k))).toEqual([]);
  }, 120_000);

  clusterTest("point-in-time restore as SPEC §4.5 writes it: every row committed at or before the target is on every node, none after", {
    overrides: { wal: { archiveCommand: "cp %p ../archive/%f", archiveTimeoutMs, segmentSizeBytes: 1024 * 1024 } },
  }, async (cluster) => {
    const arch = archiveDir(cluster);
    await cluster.start();
    await execute(cluster.nodes[0]!.clientUrl, [kvSchema]);
    const insert = (key: string) => ({ sql: `INSERT INTO ${kvTable} (k, v) VALUES (?, ?)`, params: [key, `value of ${key}`] });
    for (let i = 0; i < 20; i++) await cluster.executeAnywhere([insert(`before-snapshot-${i}`)]);
    const leader = await cluster.waitLeader();
    expect((await postJson(`${leader.adminUrl}/admin/snapshot?wait=true`, {})).status).toBe(200);
    const batchA: string[] = [];
    for (let i = 0; i < 30; i++) {
      const key = `a-${String(i).padStart(3, "0")}`;
      await cluster.executeAnywhere([insert(key)]);
      batchA.push(key);
    }
    // The target: the second the last row of batch A was acknowledged in; batch B starts in a later second.
    const target = new Date(Math.floor(Date.now() / 1000) * 1000);
    await Bun.sleep(Math.max(0, target.getTime() + 1_300 - Date.now()));
    const batchB: string[] = [];
    for (let i = 0; i < 30; i++) {
      const key = `b-${String(i).padStart(3, "0")}`;
      await cluster.executeAnywhere([insert(key)]);
      batchB.push(key);
    }
    const ledger = new Ledger(0);
    for (const k of [...batchA, ...batchB]) ledger.outcomes.set(k, "acked");
    await waitArchived(arch, ledger);
    const oldTermMax = Math.max(...(await archivedRanges(arch)).map((r) => r.term));

    // 1. Stop all nodes. 2. Remove the contents of raft/ on all. 3. Copy the latest snapshot into node1.
    const snapshotsDir = join(leader.dataDir, "raft", "snapshots");
    const latest = fs.readdirSync(snapshotsDir).filter((n) => /^[0-9a-f]{16}-[0-9a-f]{16}$/.test(n)).sort().at(-1);
    expect(latest).toBeDefined();
    const saved = join(cluster.env.dir, "saved-snapshot");
    fs.cpSync(join(snapshotsDir, latest!), saved, { recursive: true });
    for (const n of cluster.nodes) expect(await n.stop()).toBe(0);
    for (const n of cluster.nodes) emptyDir(join(n.dataDir, "raft"));
    const node1 = cluster.nodes[0]!;
    fs.mkdirSync(join(node1.dataDir, "raft", "snapshots"), { recursive: true });
    fs.cpSync(saved, join(node1.dataDir, "raft", "snapshots", latest!), { recursive: true });
    // 4. wal-replay with the archive and the target.
    const replay = await runBinary(["admin", "wal-replay", "--wal-dir", arch, "--until", target.toISOString().replace(".000Z", "Z"), "--data-dir", node1.dataDir, "--json"]);
    expect(replay.exitCode, replay.stderr).toBe(0);
    const report = JSON.parse(replay.stdout) as { entries: number; lastIndex: number; stoppedBefore: { index: number } | null };
    expect(report.stoppedBefore).not.toBeNull();
    // 5. Start that node. 6. Start the others: they sync from it.
    node1.spawn();
    for (const n of cluster.others(node1)) n.spawn();
    for (const n of cluster.nodes) await cluster.waitHealthy(n, 60_000);
    await cluster.waitConverged();
    for (const n of cluster.nodes) {
      const keys = new Set((await cluster.dump(n, kvTable)).map((r) => String(r[0])));
      for (const k of [...batchA, ...Array.from({ length: 20 }, (_, i) => `before-snapshot-${i}`)]) expect(keys.has(k) ? k : `${k} missing on ${n.nodeId}`).toBe(k);
      for (const k of batchB) expect(keys.has(k) ? `${k} present on ${n.nodeId}` : k).toBe(k);
    }
    // The restored cluster takes writes and archives on, from the entry after the replayed ones
    // (the archive holds those), into the location that holds the history it replaced too.
    await cluster.executeAnywhere([insert("after-restore")]);
    await expectArchivingGoesOn(cluster, report.lastIndex);
    const restoredRanges = (await archivedRanges(arch)).filter((r) => r.term > oldTermMax);
    expect(restoredRanges[0]?.firstIndex).toBe(report.lastIndex + 1);
    // That location now holds two histories after the target: a later wal-replay refuses it
    // (naming the two) rather than read entries of both as one log.
    const scratch = join(cluster.env.dir, "scratch");
    fs.mkdirSync(join(scratch, "raft", "snapshots"), { recursive: true });
    fs.cpSync(saved, join(scratch, "raft", "snapshots", latest!), { recursive: true });
    const again = await runBinary(["admin", "wal-replay", "--wal-dir", arch, "--until", new Date(Date.now() + 60_000).toISOString(), "--data-dir", scratch]);
    expect(again.exitCode).toBe(1);
    expect(again.stderr).toContain("two histories");
  }, 180_000);

  clusterTest("a cluster restored to a point in time from a snapshot past the archive's last mark, archiving to a new, empty location, archives its new history there from the entry after the replayed ones", {
    overrides: { wal: { archiveCommand: failingWhileFlagged, archiveTimeoutMs, segmentSizeBytes: 1024 * 1024 } },
  }, async (cluster) => {
    // ../archive is a link: to the old location first, to a new empty one for the restored cluster.
    const link = join(cluster.env.dir, "archive");
    const before = join(cluster.env.dir, "archive-before-restore");
    const after = join(cluster.env.dir, "archive-after-restore");
    fs.mkdirSync(before);
    fs.mkdirSync(after);
    fs.symlinkSync(before, link);
    const flag = join(cluster.env.dir, "fail");
    await cluster.start();
    await execute(cluster.nodes[0]!.clientUrl, [kvSchema]);
    const insert = (key: string) => ({ sql: `INSERT INTO ${kvTable} (k, v) VALUES (?, ?)`, params: [key, `value of ${key}`] });
    const ledger = new Ledger(0);
    const write = async (key: string): Promise<void> => {
      await cluster.executeAnywhere([insert(key)]);
      ledger.outcomes.set(key, "acked");
    };
    // Archiving lags while the snapshot is taken and until after the target: the archive's
    // replicated mark, in the snapshot and in every entry replayed, stays behind the snapshot.
    fs.writeFileSync(flag, "");
    for (let i = 0; i < 5; i++) await write(`s-${i}`);
    const leader = await cluster.waitLeader();
    expect((await postJson(`${leader.adminUrl}/admin/snapshot?wait=true`, {})).status).toBe(200);
    for (let i = 0; i < 20; i++) await write(`a-${i}`);
    const target = new Date(Math.floor(Date.now() / 1000) * 1000);
    await Bun.sleep(Math.max(0, target.getTime() + 1_300 - Date.now()));
    for (let i = 0; i < 20; i++) await write(`b-${i}`);
    fs.rmSync(flag);
    await waitArchived(before, ledger);
    const oldTermMax = Math.max(...(await archivedRanges(before)).map((r) => r.term));

    const snapshotsDir = join(leader.dataDir, "raft", "snapshots");
    const latest = fs.readdirSync(snapshotsDir).filter((n) => /^[0-9a-f]{16}-[0-9a-f]{16}$/.test(n)).sort().at(-1)!;
    const saved = join(cluster.env.dir, "saved-snapshot");
    fs.cpSync(join(snapshotsDir, latest), saved, { recursive: true });
    for (const n of cluster.nodes) expect(await n.stop()).toBe(0);
    for (const n of cluster.nodes) emptyDir(join(n.dataDir, "raft"));
    const node1 = cluster.nodes[0]!;
    fs.mkdirSync(join(node1.dataDir, "raft", "snapshots"), { recursive: true });
    fs.cpSync(saved, join(node1.dataDir, "raft", "snapshots", latest), { recursive: true });
    const replay = await runBinary(["admin", "wal-replay", "--wal-dir", before, "--until", target.toISOString().replace(".000Z", "Z"), "--data-dir", node1.dataDir, "--json"]);
    expect(replay.exitCode, replay.stderr).toBe(0);
    const report = JSON.parse(replay.stdout) as { lastIndex: number; stoppedBefore: { index: number } | null };
    expect(report.stoppedBefore).not.toBeNull();
    fs.rmSync(link);
    fs.symlinkSync(after, link);
    node1.spawn();
    for (const n of cluster.others(node1)) n.spawn();
    for (const n of cluster.nodes) await cluster.waitHealthy(n, 60_000);
    for (const n of cluster.nodes) {
      const keys = new Set((await cluster.dump(n, kvTable)).map((r) => String(r[0])));
      expect(keys.has("a-19") && !keys.has("b-0")).toBe(true);
    }
    await write("after-restore");
    await expectArchivingGoesOn(cluster, report.lastIndex);
    // The new location holds the restored cluster's history from the entry after the replayed
    // ones, in terms past every term of the history it replaced.
    const restoredLedger = new Ledger(0);
    restoredLedger.outcomes.set("after-restore", "acked");
    const entries = await waitArchived(after, restoredLedger);
    const indexes = [...entries.keys()].sort((a, b) => a - b);
    expect(indexes).toEqual(Array.from({ length: indexes.length }, (_, i) => report.lastIndex + 1 + i));
    for (const r of await archivedRanges(after)) expect(r.term).toBeGreaterThan(oldTermMax);
  }, 180_000);

  clusterTest("the whole cluster killed -9 under write load and restored from the archive loses only writes acknowledged in the last archive_timeout", {
    overrides: { wal: { archiveCommand: "cp %p ../archive/%f.part && mv ../archive/%f.part ../archive/%f", archiveTimeoutMs, segmentSizeBytes: 1024 * 1024 } },
  }, async (cluster) => {
    const arch = archiveDir(cluster);
    await cluster.start();
    await execute(cluster.nodes[0]!.clientUrl, [kvSchema]);
    const leader = await cluster.waitLeader();
    expect((await postJson(`${leader.adminUrl}/admin/snapshot?wait=true`, {})).status).toBe(200);
    const ledger = new Ledger(32);
    const ackedAt = new Map<string, number>();
    const load = writeLoad(cluster, ledger, "r");
    const watch = setInterval(() => {
      const now = Date.now();
      for (const [k, o] of ledger.outcomes) if (o === "acked" && !ackedAt.has(k)) ackedAt.set(k, now);
    }, 20);
    let killedAtMs = 0;
    try {
      await load.untilAcked(1500, 60_000);
      killedAtMs = Date.now();
      await Promise.all(cluster.nodes.map((n) => n.kill9()));
    } finally {
      clearInterval(watch);
      await load.stop();
    }
    for (const [k, o] of ledger.outcomes) if (o === "acked" && !ackedAt.has(k)) ackedAt.set(k, killedAtMs);
    // Restore from the archive onto node1, to a target past the kill.
    const snapshotsDir = join(leader.dataDir, "raft", "snapshots");
    const latest = fs.readdirSync(snapshotsDir).filter((n) => /^[0-9a-f]{16}-[0-9a-f]{16}$/.test(n)).sort().at(-1)!;
    const saved = join(cluster.env.dir, "saved-snapshot");
    fs.cpSync(join(snapshotsDir, latest), saved, { recursive: true });
    for (const n of cluster.nodes) emptyDir(join(n.dataDir, "raft"));
    const node1 = cluster.nodes[0]!;
    fs.mkdirSync(join(node1.dataDir, "raft", "snapshots"), { recursive: true });
    fs.cpSync(saved, join(node1.dataDir, "raft", "snapshots", latest), { recursive: true });
    const replay = await runBinary(["admin", "wal-replay", "--wal-dir", arch, "--until", new Date(killedAtMs + 60_000).toISOString(), "--data-dir", node1.dataDir]);
    expect(replay.exitCode, replay.stderr).toBe(0);
    for (const n of cluster.nodes) n.spawn();
    for (const n of cluster.nodes) await cluster.waitHealthy(n, 60_000);
    await cluster.waitConverged();
    const present = new Set((await cluster.dump(node1, kvTable)).map((r) => String(r[0])));
    const lost = ackedKeys(ledger).filter((k) => !present.has(k));
    // Writes lost are only those acknowledged within archive_timeout (plus the archiver's
    // tick and the copy) before the kill: the archive's recovery point.
    const rpoMs = archiveTimeoutMs + 1_000;
    const tooOld = lost.filter((k) => (ackedAt.get(k) ?? 0) < killedAtMs - rpoMs);
    expect(tooOld.slice(0, 10)).toEqual([]);
    console.log(`RPO: ${lost.length} of ${ackedKeys(ledger).length} acknowledged writes lost, all within the last ${rpoMs} ms`);
  }, 180_000);
});

export type { NodeProcess };
