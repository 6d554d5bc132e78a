// Node recovery procedures of SPEC §4.6 on a follower of a three-node cluster:
//   recovery from snapshot — stop the node, remove the contents of raft/wal/, keep the
//     snapshots, start it: it fetches a snapshot from the leader and comes back with the same
//     data; until it holds again what it held before, it must not vote (DESIGN §5), or it
//     could elect a node that lacks acknowledged writes;
//   full state rebuild — stop the node, remove raft/ and store/, start it: it is rebuilt
//     from the leader.

import * as fs from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect } from "bun:test";
import { clusterTest, expectSameData, recoveryPath, type Cluster } from "../lib/cluster.ts";
import {
  Ledger, WriteLoad, ensureBinary, execute, executeRaw, fetchMetrics, kvSchema, kvTable, postJson, runBinary, useProcessCleanup, waitFor, type NodeProcess,
} from "../lib/proc.ts";

useProcessCleanup();

const receivedOk = 'tensor_chain_snapshot_transfers_total{result="received_ok"}';
const votesRefused = 'tensor_chain_peer_messages_dropped_total{reason="vote_while_recovering"}';

/** Remove what is inside `dir`, keeping `dir` itself. */
function emptyDir(dir: string): void {
  for (const name of fs.readdirSync(dir)) fs.rmSync(join(dir, name), { recursive: true, force: true });
}

/** SPEC §4.6 full state rebuild: all Raft state and the store removed. */
function removeAllState(node: NodeProcess): void {
  fs.rmSync(join(node.dataDir, "raft"), { recursive: true, force: true });
  fs.rmSync(join(node.dataDir, "store"), { recursive: true, force: true });
}

/** `count` more acknowledged writes from concurrent clients through `targets`. */
async function writeThrough(targets: readonly NodeProcess[], ledger: Ledger, keyPrefix: string, count: number): Promise<void> {
  let turn = 0;
  const load = new WriteLoad({ target: () => targets[turn++ % targets.length]!.clientUrl, clients: 8, keyPrefix, ledger, requestTimeoutMs: 10_000 });
  try {
    await load.untilAcked(count);
  } finally {
    await load.stop();
  }
}


/** Check `condition` again and again for `windowMs`; throw the first time it does not hold. */
/** Start the cluster, write `count` rows through every node and wait until all hold them. */
async function startWithRows(cluster: Cluster, count: number): Promise<{ leader: NodeProcess; follower: NodeProcess; ledger: Ledger }> {
  await cluster.start();
  await execute(cluster.nodes[0]!.clientUrl, [kvSchema]);
  const leader = await cluster.waitLeader();
  const follower = cluster.others(leader)[0]!;
  const ledger = new Ledger(32);
  await writeThrough(cluster.nodes, ledger, "a", count);
  await cluster.waitConverged();
  return { leader, follower, ledger };
}

async function holdsThroughout(what: string, windowMs: number, condition: () => Promise<string | null>): Promise<void> {
  const end = Date.now() + windowMs;
  while (Date.now() < end) {
    const violation = await condition();
    if (violation !== null) throw new Error(`${what}: ${violation}`);
    await Bun.sleep(50);
  }
}

/**
 * a leads; b is killed and falls behind; 300 writes are acknowledged by a and f alone; f is
 * stopped and its WAL emptied; a is killed. b and f, restarted, are a majority by count but
 * lack acknowledged writes: neither may become leader. Then a comes back and nothing is lost.
 */
async function wipedWalMustNotElect(cluster: Cluster, damage: (f: NodeProcess) => void = (f) => emptyDir(join(f.dataDir, "raft", "wal")), early = { writes: 20, valueBytes: 32 }): Promise<void> {
  await cluster.start();
  await execute(cluster.nodes[0]!.clientUrl, [kvSchema]);
  const a = await cluster.waitLeader();
  const [b, f] = cluster.others(a) as [NodeProcess, NodeProcess];
  const ledger = new Ledger(early.valueBytes);
  await writeThrough([a], ledger, "early", early.writes);
  await cluster.waitConverged();

  // b falls behind; the writes after this are held by a and f only (a quorum of two).
  await cluster.kill9(b);
  await writeThrough([a], ledger, "held-by-a-and-f", 300);
  await cluster.waitConverged([a, f]);

  // f loses its WAL (keeping its snapshots and store), then the only other holder goes down.
  expect(await f.stop()).toBe(0);
  damage(f);
  await cluster.kill9(a);

  // b and f are a majority by count, but b lacks 300 acknowledged writes and f no longer
  // holds them in its log: neither may become leader, and no write may be acknowledged.
  b.spawn();
  f.spawn();
  await holdsThroughout("no leader without the acknowledged writes", 3_000, async () => {
    for (const n of [b, f]) {
      const h = await cluster.health(n);
      if (h?.role === "leader") return `${n.nodeId} became leader in term ${h.term} (applied ${h.applied_index})`;
    }
    const r = await executeRaw(b.clientUrl, [{ sql: `INSERT INTO ${kvTable} (k, v) VALUES ('probe', 'x')`, params: [] }], 1_000).catch(() => null);
    return r?.status === 200 ? "a write was acknowledged" : null;
  });
  // b did campaign in that time, and f turned it down.
  await waitFor("f to refuse a vote request while it recovers", async () => ((await fetchMetrics(f.adminUrl)).get(votesRefused) ?? 0) > 0);

  // The node that holds the writes comes back: it leads, f catches up, nothing was lost.
  a.spawn();
  await Promise.all(cluster.nodes.map((n) => n.waitHealthy()));
  await expectSameData(cluster, ledger);
}

describe("node recovery procedures (SPEC §4.6)", () => {
  beforeAll(() => {
    ensureBinary();
  });

  clusterTest("recovery from snapshot: a stopped follower whose WAL directory was emptied fetches a snapshot from the leader and comes back healthy with the same data", {
    overrides: { snapshotIntervalEntries: 100 },
  }, async (cluster) => {
    const { leader, follower, ledger } = await startWithRows(cluster, 300);

    expect(await follower.stop()).toBe(0);
    const walDir = join(follower.dataDir, "raft", "wal");
    expect(fs.readdirSync(walDir).length).toBeGreaterThan(0);
    emptyDir(walDir);
    // The leader compacts past the follower's newest local snapshot: only a snapshot from the
    // leader can bring it back.
    await writeThrough(cluster.others(follower), ledger, "b", 300);
    // Automatic snapshots are paced by their own cost; take one so the compaction is certain.
    for (const node of cluster.others(follower)) expect((await postJson(`${node.adminUrl}/admin/snapshot?wait=true`, {})).status).toBe(200);

    follower.spawn();
    await follower.waitHealthy();
    expect(recoveryPath(follower)).toContain("installing_snapshot");
    expect((await fetchMetrics(follower.adminUrl)).get(receivedOk) ?? 0).toBeGreaterThanOrEqual(1);
    await writeThrough(cluster.nodes, ledger, "c", 50);
    await expectSameData(cluster, ledger);
  });

  // SPEC §3.1: "Node Starts | WAL does not exist → Request Snapshot". The follower's own
  // snapshot is taken just before it stops, so its store holds nothing beyond it: the case
  // where the node loses nothing by the emptied WAL, and must still go the documented way.
  clusterTest("a follower started with an empty WAL directory enters requesting_snapshot, as the recovery flow says", {}, async (cluster) => {
    const { leader, follower, ledger } = await startWithRows(cluster, 100);
    // A snapshot of the follower's own (local=true: not forwarded to the leader).
    const snap = await postJson(`${follower.adminUrl}/admin/snapshot?wait=true&local=true`, {});
    expect(snap.status).toBe(200);
    expect(await follower.stop()).toBe(0);
    emptyDir(join(follower.dataDir, "raft", "wal"));

    follower.spawn();
    await follower.waitHealthy();
    expect(recoveryPath(follower).slice(0, 3)).toEqual(["starting", "requesting_snapshot", "joining"]);
    await expectSameData(cluster, ledger);
  });

  // f has no snapshot of its own: it has no membership and cannot campaign, so what is
  // tested is that it turns down b's vote requests.
  clusterTest("a follower whose WAL was emptied refuses to vote until it holds again what it held: it cannot help elect a node that lacks acknowledged writes", {
    overrides: { snapshotIntervalEntries: 100_000 },
  }, wipedWalMustNotElect);

  // f keeps a local snapshot older than what it held (DESIGN §5: it falls back to it): with
  // the membership in it, f could campaign on a log that ends at that snapshot.
  clusterTest("a follower whose WAL was emptied and that falls back to an older local snapshot does not campaign: it cannot become leader without the acknowledged writes after it", {
    overrides: { snapshotIntervalEntries: 50 },
  }, wipedWalMustNotElect);

  // Only the end of f's WAL is lost (its newest segment), and its store with it: what it still
  // holds is a prefix of the log, but its checkpoint (every 100 entries) shows it held entries
  // after it, acknowledged ones among them.
  clusterTest("a follower that lost its newest WAL segment and its store refuses to vote until it holds again what it had checkpointed", {
    overrides: { snapshotIntervalEntries: 100, wal: { segmentSizeBytes: 1024 * 1024 } },
  }, (cluster) => wipedWalMustNotElect(cluster, (f) => {
    const walDir = join(f.dataDir, "raft", "wal");
    const segments = fs.readdirSync(walDir).filter((n) => n.endsWith(".wal")).sort();
    expect(segments.length).toBeGreaterThan(1);
    fs.rmSync(join(walDir, segments.at(-1)!));
    fs.rmSync(join(f.dataDir, "store"), { recursive: true, force: true });
  }, { writes: 3_000, valueBytes: 1024 }));

  // The hard state holds the votes a member cast: with it gone the member could vote twice in
  // a term, so it holds its vote until a leader has caught it up, then votes again.
  clusterTest("a follower whose raft/hardstate was removed does not vote until a leader caught it up, then holds the same data", {}, async (cluster) => {
    const { follower, ledger } = await startWithRows(cluster, 50);
    expect(await follower.stop()).toBe(0);
    fs.rmSync(join(follower.dataDir, "raft", "hardstate"));
    const verified = await runBinary(["admin", "verify-checksums", "--data-dir", follower.dataDir]);
    expect(verified.exitCode).toBe(1);
    expect(verified.stdout + verified.stderr).toContain("absent, but the WAL holds a cluster's log");
    follower.spawn();
    await waitFor("the follower to say it holds its vote back", () => follower.log().includes("the votes this node cast are forgotten"));
    await follower.waitHealthy();
    await waitFor("LOST_LOG to be cleared once caught up", () => !fs.existsSync(join(follower.dataDir, "raft", "LOST_LOG")));
    await expectSameData(cluster, ledger);
  });

  clusterTest("full state rebuild: a stopped follower with raft/ and store/ removed is rebuilt from the leader with the same data", {
    overrides: { snapshotIntervalEntries: 100 },
  }, async (cluster) => {
    const { leader, follower, ledger } = await startWithRows(cluster, 300);

    expect(await follower.stop()).toBe(0);
    removeAllState(follower);
    await writeThrough(cluster.others(follower), ledger, "b", 150);
    // The leader's log starts after a snapshot, so the rebuild has to go through one.
    for (const node of cluster.others(follower)) expect((await postJson(`${node.adminUrl}/admin/snapshot?wait=true`, {})).status).toBe(200);

    follower.spawn();
    await follower.waitHealthy();
    const path = recoveryPath(follower);
    expect(path).toContain("requesting_snapshot");
    expect(path).toContain("installing_snapshot");
    expect((await fetchMetrics(follower.adminUrl)).get(receivedOk) ?? 0).toBeGreaterThanOrEqual(1);
    await writeThrough(cluster.nodes, ledger, "c", 50);
    await expectSameData(cluster, ledger);
  });

  clusterTest("the node whose configuration says bootstrap = true, rebuilt from nothing, joins its cluster instead of starting a new one", {
    overrides: { snapshotIntervalEntries: 100 },
  }, async (cluster) => {
    const { leader, ledger } = await startWithRows(cluster, 200);
    const first = cluster.nodes[0]!;
    expect(first.config.cluster?.bootstrap).toBe(true);
    if (leader === first) {
      const next = cluster.others(first)[0]!;
      expect((await postJson(`${first.adminUrl}/admin/transfer-leader`, { id: next.nodeId })).status).toBe(200);
      await cluster.waitLeader(cluster.others(first));
    }
    expect(await first.stop()).toBe(0);
    emptyDir(join(first.dataDir, "raft"));
    emptyDir(join(first.dataDir, "store"));
    first.spawn();
    await cluster.waitHealthy(first, 30_000);
    // Its data directory says it belonged to a cluster (MEMBER): it waits for that one.
    expect(first.log()).toContain("this node waits for that cluster's leader rather than start a new one");
    await writeThrough(cluster.nodes, ledger, "b", 50);
    await expectSameData(cluster, ledger);
  });

  // The member's only image covered what its WAL no longer holds; with that image damaged and
  // its store gone nothing local bridges the gap. It stopped with LOG_GAP (exit 3), though the
  // leader holds everything: now it sets the WAL aside (kept) and is rebuilt from the leader.
  clusterTest("a follower whose WAL starts after its only image, which is damaged, with its store gone, sets the WAL aside and is rebuilt from the leader", {
    overrides: { snapshotIntervalEntries: 100, wal: { segmentSizeBytes: 1024 * 1024 } },
  }, async (cluster) => {
    await cluster.start();
    await execute(cluster.nodes[0]!.clientUrl, [kvSchema]);
    const leader = await cluster.waitLeader();
    const follower = cluster.others(leader)[0]!;
    const ledger = new Ledger(1024);
    await writeThrough(cluster.nodes, ledger, "a", 2_500);
    await cluster.waitConverged();
    expect((await postJson(`${follower.adminUrl}/admin/snapshot?wait=true&local=true`, {})).status).toBe(200);
    await waitFor("the follower's image to let its first WAL segments go", async () =>
      ((await (await fetch(`${follower.adminUrl}/admin/stats`)).json()) as { wal_first_index: number }).wal_first_index > 1);
    expect(await follower.stop()).toBe(0);
    damageImage(newestImage(follower));
    fs.rmSync(join(follower.dataDir, "store"), { recursive: true, force: true });
    await writeThrough(cluster.others(follower), ledger, "b", 50);

    follower.spawn();
    await follower.waitHealthy();
    expect(follower.log()).toMatch(/recovery: the WAL starts at entry \d+ but the newest snapshot ends at 0 and the store at 0: entries in between are missing \(a snapshot that may have held them could not be used: .*\); the WAL was moved to .*wal-gap-/);
    expect(fs.readdirSync(join(follower.dataDir, "raft")).some((n) => n.startsWith("wal-gap-"))).toBe(true);
    await expectSameData(cluster, ledger);
  });

  clusterTest("a leader whose image is damaged finds it when a follower rejects it, makes a new one and rebuilds the follower; an image asked for with nothing applied since replaces a damaged newest one", {
    overrides: { snapshotIntervalEntries: 100 },
  }, async (cluster) => {
    const { leader, follower, ledger } = await startWithRows(cluster, 300);
    expect(await follower.stop()).toBe(0);
    removeAllState(follower);
    await writeThrough(cluster.others(follower), ledger, "b", 150);
    expect((await postJson(`${leader.adminUrl}/admin/snapshot?wait=true`, {})).status).toBe(200);
    damageImage(newestImage(leader));

    follower.spawn();
    await follower.waitHealthy();
    expect(leader.log()).toContain("snapshot image is damaged");
    expect(recoveryPath(follower)).toContain("installing_snapshot");
    await expectSameData(cluster, ledger);
    expect(await imagesSound(leader)).toEqual([]);
    expect(await imagesSound(follower)).toEqual([]);

    // Nothing applied since the newest image: asking for one does not keep a damaged one.
    await cluster.waitConverged();
    const newest = newestImage(leader);
    damageImage(newest);
    expect((await postJson(`${leader.adminUrl}/admin/snapshot?wait=true`, {})).status).toBe(200);
    expect(newestImage(leader)).toBe(newest);
    expect(await imagesSound(leader)).toEqual([]);
    expect(leader.log()).toContain("newest snapshot image was damaged");
  });

});

/** The newest snapshot directory under `node`'s raft/snapshots/ (by index). */
function newestImage(node: NodeProcess): string {
  const dir = join(node.dataDir, "raft", "snapshots");
  const names = fs.readdirSync(dir).filter((n) => /^[0-9a-f]{16}-[0-9a-f]{16}$/.test(n)).sort((a, b) => parseInt(a.slice(17), 16) - parseInt(b.slice(17), 16));
  const newest = names.at(-1);
  if (newest === undefined) throw new Error(`no snapshot under ${dir}`);
  return join(dir, newest);
}

/** Flip bytes in the middle of an image's state.db (a disk that returned other bytes). */
function damageImage(dir: string): void {
  const path = join(dir, "state.db");
  const bytes = fs.readFileSync(path);
  const at = Math.floor(bytes.length / 2);
  for (let i = 0; i < 16; i++) bytes[at + i] = (bytes[at + i] ?? 0) ^ 0xff;
  fs.writeFileSync(path, bytes);
}

async function imagesSound(node: NodeProcess): Promise<string[]> {
  const { SnapshotStore, verifySnapshot } = await import("../../src/storage/index.ts");
  const bad: string[] = [];
  for (const entry of new SnapshotStore(join(node.dataDir, "raft", "snapshots")).list()) {
    const check = await verifySnapshot(entry);
    if (!check.ok) bad.push(`${entry.name}: ${check.reason}`);
  }
  return bad;
}
