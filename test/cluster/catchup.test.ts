// A follower that falls behind catches up: after kill -9 while writes go on it replays its WAL
// and receives the rest of the log; kept down while the leader compacts its in-memory log, it
// is sent the entries from the leader's WAL, with no snapshot; kept down until the leader's
// WAL no longer holds what it missed (an image removed those segments), it is sent a snapshot
// and then the entries after it; when a snapshot transfer is cut off by the leader's death,
// it takes the log from the next leader. Every way it ends healthy with exactly the leader's data.

import { beforeAll, describe, expect } from "bun:test";
import { clusterTest, expectSameData, passedThrough, recoveryPath, type Cluster } from "../lib/cluster.ts";
import {
  Ledger, WriteLoad, ensureBinary, execute, fetchMetrics, kvSchema, kvTable, postJson, queryRaw, useProcessCleanup, waitFor, type NodeProcess, type SqlValue,
} from "../lib/proc.ts";

useProcessCleanup();

const receivedOk = 'tensor_chain_snapshot_transfers_total{result="received_ok"}';

/** Concurrent writers through the nodes other than `avoid` (which is down or recovering). */
function loadAvoiding(cluster: Cluster, avoid: NodeProcess, ledger: Ledger, keyPrefix: string): WriteLoad {
  let turn = 0;
  const targets = cluster.others(avoid);
  return new WriteLoad({ target: () => targets[turn++ % targets.length]!.clientUrl, clients: 8, keyPrefix, ledger, requestTimeoutMs: 10_000 });
}


async function queryStale(node: NodeProcess, sql: string): Promise<SqlValue[][]> {
  const r = await queryRaw(node.clientUrl, sql, [], "stale");
  if (r.status !== 200 || r.body === undefined) throw new Error(`query on ${node.nodeId} answered ${r.status}: ${r.text}`);
  return r.body.rows;
}

async function followerOf(cluster: Cluster): Promise<NodeProcess> {
  const leader = await cluster.waitLeader();
  return cluster.others(leader)[0]!;
}

describe("a follower that fell behind catches up", () => {
  beforeAll(() => {
    ensureBinary();
  });

  clusterTest("a follower killed with kill -9 while writes go on replays its WAL, receives the rest of the log and ends with the leader's data", {}, async (cluster) => {
    await cluster.start();
    await execute(cluster.nodes[0]!.clientUrl, [kvSchema]);
    const follower = await followerOf(cluster);
    const ledger = new Ledger(32);
    const load = loadAvoiding(cluster, follower, ledger, "crash");
    try {
      await load.untilAcked(300);
      await cluster.kill9(follower);
      await load.untilAcked(load.ackedCount + 300);
      follower.spawn();
      await follower.waitHealthy();
      await load.untilAcked(load.ackedCount + 300);
    } finally {
      await load.stop();
    }
    // It read its own WAL back (the log says so) and needed no snapshot: the leader still had
    // the entries it missed.
    expect(follower.lastRunLog()).toContain("recovery: replaying the WAL");
    expect(passedThrough(follower, "installing_snapshot")).toBe(false);
    // Converged means healthy too: waitConverged requires /health = ok on every node.
    await expectSameData(cluster, ledger);
  });

  // SPEC §3.1: "Node Starts | WAL exists → Replay WAL", then "Join as Follower", then
  // "Healthy". The state is what /health and tensor_chain_recovery_state show an operator.
  clusterTest("a follower restarted after kill -9 with its WAL in place passes through replaying_wal, then joining, then healthy", {}, async (cluster) => {
    await cluster.start();
    await execute(cluster.nodes[0]!.clientUrl, [kvSchema]);
    const follower = await followerOf(cluster);
    const ledger = new Ledger(32);
    const load = loadAvoiding(cluster, follower, ledger, "replay");
    try {
      await load.untilAcked(200);
      await cluster.kill9(follower);
      await load.untilAcked(load.ackedCount + 100);
    } finally {
      await load.stop();
    }
    follower.spawn();
    await follower.waitHealthy();
    expect(recoveryPath(follower)).toEqual(["starting", "replaying_wal", "joining", "healthy"]);
  });

  clusterTest("a follower kept down while the leader compacts its in-memory log is sent the entries from the leader's WAL, with no snapshot, and ends with the leader's data", {
    // A checkpoint every 100 entries drops the log it covers from the leader's memory; no
    // image comes (the WAL stays far below the size that makes one), so the WAL keeps it all.
    overrides: { snapshotIntervalEntries: 100 },
  }, async (cluster) => {
    await cluster.start();
    await execute(cluster.nodes[0]!.clientUrl, [kvSchema]);
    const follower = await followerOf(cluster);
    const ledger = new Ledger(32);
    const load = loadAvoiding(cluster, follower, ledger, "wal");
    let leader: NodeProcess;
    try {
      await load.untilAcked(100);
      await cluster.kill9(follower);
      leader = await cluster.waitLeader(cluster.others(follower));
      const checkpointsBefore = (await fetchMetrics(leader.adminUrl)).get("tensor_chain_checkpoints_total") ?? 0;
      await waitFor("the leader to take five checkpoints", async () => {
        await load.untilAcked(load.ackedCount + 100);
        return ((await fetchMetrics(leader.adminUrl)).get("tensor_chain_checkpoints_total") ?? 0) >= checkpointsBefore + 5;
      }, { deadlineMs: 30_000, intervalMs: 0 });
      follower.spawn();
      await follower.waitHealthy();
      await load.untilAcked(load.ackedCount + 100);
    } finally {
      await load.stop();
    }
    leader = await cluster.waitLeader(cluster.others(follower));
    const lm = await fetchMetrics(leader.adminUrl);
    // The leader read the entries back from its WAL and made no image for the follower.
    expect(lm.get("tensor_chain_catch_up_log_entries_total") ?? 0).toBeGreaterThan(100);
    expect(lm.get('tensor_chain_catch_up_log_reads_total{result="not_held"}') ?? 0).toBe(0);
    expect(lm.get("tensor_chain_snapshots_total") ?? 0).toBe(0);
    expect(passedThrough(follower, "installing_snapshot")).toBe(false);
    const fm = await fetchMetrics(follower.adminUrl);
    expect(fm.get(receivedOk) ?? 0).toBe(0);
    await expectSameData(cluster, ledger);
  });

  clusterTest("a follower kept down while the other nodes checkpoint and restart is sent the entries from the WAL segments their start-up skipped, with no snapshot", {
    // Small segments: what the follower missed lies in segments wholly at or below what the
    // stores hold when the others restart, which start-up does not read. No image comes.
    overrides: { snapshotIntervalEntries: 100, wal: { segmentSizeBytes: 1024 * 1024 } },
  }, async (cluster) => {
    await cluster.start();
    await execute(cluster.nodes[0]!.clientUrl, [kvSchema]);
    const follower = await followerOf(cluster);
    const others = cluster.others(follower);
    const ledger = new Ledger(32);
    const load = loadAvoiding(cluster, follower, ledger, "skipped");
    try {
      await load.untilAcked(100);
      await cluster.kill9(follower);
      await load.untilAcked(load.ackedCount + 200);
    } finally {
      await load.stop();
    }
    // A few megabytes of log after what the follower holds: several whole segments.
    const leader = await cluster.waitLeader(others);
    await execute(leader.clientUrl, ["CREATE TABLE pad (id INTEGER PRIMARY KEY, b TEXT)"]);
    for (let i = 0; i < 16; i++) await execute(leader.clientUrl, [{ sql: "INSERT INTO pad (id, b) VALUES (?, ?)", params: [i, "p".repeat(200_000)] }]);
    for (const n of others) await n.stop();
    for (const n of others) n.spawn();
    const restarted = await cluster.waitLeader(others);
    await cluster.waitHealthy(cluster.others(follower, restarted)[0]!);
    const again = loadAvoiding(cluster, follower, ledger, "after");
    try {
      await again.untilAcked(50);
      follower.spawn();
      await follower.waitHealthy();
      await again.untilAcked(again.ackedCount + 50);
    } finally {
      await again.stop();
    }
    const lm = await fetchMetrics((await cluster.waitLeader(others)).adminUrl);
    // Start-up skipped the segments the follower needed; the leader read them back all the same.
    expect(lm.get("tensor_chain_catch_up_log_entries_total") ?? 0).toBeGreaterThan(200);
    expect(lm.get('tensor_chain_catch_up_log_reads_total{result="not_held"}') ?? 0).toBe(0);
    expect(lm.get("tensor_chain_snapshots_total") ?? 0).toBe(0);
    expect(passedThrough(follower, "installing_snapshot")).toBe(false);
    expect((await fetchMetrics(follower.adminUrl)).get(receivedOk) ?? 0).toBe(0);
    await expectSameData(cluster, ledger);
  });

  clusterTest("a follower kept down until the leader's WAL no longer holds what it missed is sent the newest image on disk, then the log after it from the WAL, and ends with the leader's data", {
    // Small segments, so that an image removes those that hold what the follower missed.
    overrides: { snapshotIntervalEntries: 100, wal: { segmentSizeBytes: 1024 * 1024 } },
  }, async (cluster) => {
    await cluster.start();
    await execute(cluster.nodes[0]!.clientUrl, [kvSchema]);
    const follower = await followerOf(cluster);
    const ledger = new Ledger(32);
    const load = loadAvoiding(cluster, follower, ledger, "snap");
    let imagesMade = 0;
    let logEntriesSent = 0;
    try {
      await load.untilAcked(100);
      await cluster.kill9(follower);
      const leader = await cluster.waitLeader(cluster.others(follower));
      const checkpointsBefore = (await fetchMetrics(leader.adminUrl)).get("tensor_chain_checkpoints_total") ?? 0;
      // Writes go on until the leader has checkpointed several times: each drops the log it
      // covers from the leader's memory, so what the follower is missing is no longer there.
      await waitFor("the leader to take three checkpoints", async () => {
        await load.untilAcked(load.ackedCount + 100);
        return ((await fetchMetrics(leader.adminUrl)).get("tensor_chain_checkpoints_total") ?? 0) >= checkpointsBefore + 3;
      }, { deadlineMs: 30_000, intervalMs: 0 });
      // A few megabytes of log, then an image: the WAL segments it covers go, with what the follower missed.
      await execute(leader.clientUrl, ["CREATE TABLE pad (id INTEGER PRIMARY KEY, b TEXT)"]);
      for (let i = 0; i < 24; i++) await execute(leader.clientUrl, [{ sql: "INSERT INTO pad (id, b) VALUES (?, ?)", params: [i, "p".repeat(200_000)] }]);
      expect((await postJson(`${leader.adminUrl}/admin/snapshot?wait=true`, {})).status).toBe(200);
      const afterImage = await fetchMetrics(leader.adminUrl);
      expect(afterImage.get("tensor_chain_wal_segments_removed_total") ?? 0).toBeGreaterThan(0);
      imagesMade = afterImage.get("tensor_chain_snapshots_total") ?? 0;
      logEntriesSent = afterImage.get("tensor_chain_catch_up_log_entries_total") ?? 0;
      // More log after the image, which the follower must get from the WAL.
      await load.untilAcked(load.ackedCount + 200);
      follower.spawn();
      await follower.waitHealthy();
      await load.untilAcked(load.ackedCount + 100);
    } finally {
      await load.stop();
    }
    const path = recoveryPath(follower);
    expect(path).toContain("installing_snapshot");
    expect(path).toContain("replaying_after_snapshot");
    // The image was copied beside the store while it was received: installing it was a rename.
    expect(follower.lastRunLog()).toContain("recovery: snapshot installed from its staged copy");
    // The leader's WAL no longer held what the follower missed.
    const leaderMetrics = await fetchMetrics((await cluster.waitLeader(cluster.others(follower))).adminUrl);
    expect(leaderMetrics.get("tensor_chain_snapshots_total") ?? 0).toBeGreaterThanOrEqual(1);
    expect(leaderMetrics.get('tensor_chain_catch_up_log_reads_total{result="not_held"}') ?? 0).toBeGreaterThanOrEqual(1);
    // It was sent the image already on disk, not one made for it, and the log after that image
    // was read back from the leader's WAL.
    expect(leaderMetrics.get("tensor_chain_snapshots_total") ?? 0).toBe(imagesMade);
    expect(leaderMetrics.get("tensor_chain_catch_up_log_entries_total") ?? 0).toBeGreaterThan(logEntriesSent);
    const fm = await fetchMetrics(follower.adminUrl);
    expect(fm.get(receivedOk) ?? 0).toBeGreaterThanOrEqual(1);
    expect(fm.get("tensor_chain_snapshot_transfer_received_bytes_total") ?? 0).toBeGreaterThan(0);
    await expectSameData(cluster, ledger);
    // Converged again after any further snapshot the leader sent while writes went on.
    expect(recoveryPath(follower).at(-1)).toBe("healthy");
  });
  // The leader streams a large snapshot; it dies part-way. The next leader never compacted
  // its log, so it sends the follower the entries themselves: the follower must leave
  // installing_snapshot, catch up from the log and become healthy.
  clusterTest("a follower whose snapshot transfer is cut off by the leader's death catches up from the next leader's log and becomes healthy", {
    proxied: true,
    // No automatic snapshots: only the leader compacts, when the test asks it to. Small WAL
    // segments, so that its image removes those that hold what the follower missed.
    overrides: { snapshotIntervalEntries: 1_000_000, wal: { segmentSizeBytes: 1024 * 1024 } },
  }, async (cluster) => {
    await cluster.start();
    const victim = await followerOf(cluster);
    await cluster.executeOnce(["CREATE TABLE big (id INTEGER PRIMARY KEY, b BLOB)", kvSchema], "create");
    await cluster.kill9(victim);
    // Each write is settled with its request id: the big one can hold up both live nodes past
    // an election timeout on a busy machine, and a leader that loses its quorum meanwhile answers
    // OUTCOME_UNKNOWN. The setup needs the data, whichever of the two leads.
    // About 32 MB of state from one small entry (randomblob is deterministic per entry), so
    // the snapshot takes many chunks to stream.
    await cluster.executeOnce(["WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 500) INSERT INTO big SELECT x, randomblob(65536) FROM n"], "big");
    // One at a time: more appends than the leader keeps in flight to the dead follower, so
    // what it missed is not all waiting in the leader's send queue when it comes back.
    for (let i = 0; i < 150; i++) await cluster.executeOnce([{ sql: `INSERT INTO ${kvTable} (k, v) VALUES (?, 'x')`, params: [`k${i}`] }], `kv-${i}`);
    // Past the first WAL segment, so the image removes it with what the follower missed.
    await cluster.executeOnce(["CREATE TABLE pad (id INTEGER PRIMARY KEY, b TEXT)"], "pad");
    for (let i = 0; i < 8; i++) await cluster.executeOnce([{ sql: "INSERT INTO pad (id, b) VALUES (?, ?)", params: [i, "p".repeat(200_000)] }], `pad-${i}`);
    // The leader now is the one that compacts and streams its image to the victim.
    const leader = await cluster.waitLeader(cluster.others(victim));
    const other = cluster.others(victim, leader)[0]!;
    const snap = await postJson(`${leader.adminUrl}/admin/snapshot?wait=true`, {});
    expect(snap.status).toBe(200);

    // Kill the leader from inside the proxy once 12 MB of the stream went through. The leader
    // sends at most 4 chunks (4 MiB) beyond what the follower acknowledged, so by then the
    // follower holds part of the snapshot, and far from all of it.
    const proxies = cluster.proxies!;
    let cutAtBytes = 0;
    proxies.watch(leader.nodeId, victim.nodeId, (bytes) => {
      if (bytes < 12 * 1024 * 1024 || cutAtBytes > 0 || leader.pid === null) return;
      cutAtBytes = bytes;
      process.kill(leader.pid, "SIGKILL");
      proxies.setLink(leader.nodeId, victim.nodeId, true);
    });
    victim.spawn();
    await waitFor("the snapshot stream to be cut", () => cutAtBytes > 0);
    proxies.watch(leader.nodeId, victim.nodeId, null);
    await leader.kill9();
    expect(victim.lastRunLog()).toContain("receiving a snapshot");
    // The cut came before the end: the follower never held the whole snapshot.
    expect(victim.lastRunLog()).not.toContain("snapshot received and verified");

    await cluster.waitLeader([other]);
    await cluster.waitHealthy(victim);
    cluster.heal();
    await leader.start();
    await cluster.waitConverged();
    const fingerprint = "SELECT count(*), sum(length(b)), hex(substr(max(b), 1, 8)) FROM big";
    const reference = await queryStale(other, fingerprint);
    for (const n of cluster.nodes) expect(await queryStale(n, fingerprint)).toEqual(reference);
    for (const n of cluster.nodes) expect(await cluster.dump(n, kvTable)).toEqual(await cluster.dump(other, kvTable));
  });
});
