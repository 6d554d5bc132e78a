// SPEC §4.6 node recovery on a quiet cluster: rows are written, then nothing more. A node is
// stopped, loses its WAL (recovery from snapshot) or all of raft/ and store/ (full state
// rebuild), and is started again; no write follows. Nothing but the restarted node itself can
// make the leader look at its log again, so it must still come back healthy with the
// leader's data — as a follower and as the former leader.

import * as fs from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect } from "bun:test";
import { clusterTest, expectSameData, recoveryPath, type Cluster } from "../lib/cluster.ts";
import { Ledger, WriteLoad, ensureBinary, execute, fetchMetrics, kvSchema, postJson, useProcessCleanup, waitFor, type NodeProcess } from "../lib/proc.ts";

useProcessCleanup();

/** Remove what is inside `dir`, keeping `dir` itself. */
function emptyDir(dir: string): void {
  for (const name of fs.readdirSync(dir)) fs.rmSync(join(dir, name), { recursive: true, force: true });
}

function emptyWal(node: NodeProcess): void {
  const walDir = join(node.dataDir, "raft", "wal");
  expect(fs.readdirSync(walDir).length).toBeGreaterThan(0);
  emptyDir(walDir);
}

function removeAllState(node: NodeProcess): void {
  fs.rmSync(join(node.dataDir, "raft"), { recursive: true, force: true });
  fs.rmSync(join(node.dataDir, "store"), { recursive: true, force: true });
}

/** `count` acknowledged writes from concurrent clients through every node. */
async function writeRows(cluster: Cluster, ledger: Ledger, keyPrefix: string, count: number): Promise<void> {
  let turn = 0;
  const targets = cluster.nodes;
  const load = new WriteLoad({ target: () => targets[turn++ % targets.length]!.clientUrl, clients: 8, keyPrefix, ledger, requestTimeoutMs: 10_000 });
  try {
    await load.untilAcked(count);
  } finally {
    await load.stop();
  }
}

async function snapshotOn(node: NodeProcess): Promise<void> {
  expect((await postJson(`${node.adminUrl}/admin/snapshot?wait=true`, {})).status).toBe(200);
}

/** Start the cluster, write `count` rows, wait until every node applied them. */
async function startWithRows(cluster: Cluster, ledger: Ledger, count: number): Promise<NodeProcess> {
  await cluster.start();
  await execute(cluster.nodes[0]!.clientUrl, [kvSchema]);
  await writeRows(cluster, ledger, "a", count);
  await cluster.waitConverged();
  return cluster.waitLeader();
}

/** Start `node` again and wait, with no write anywhere, until it serves with everyone's data. */
async function restartQuiet(cluster: Cluster, node: NodeProcess, ledger: Ledger): Promise<string[]> {
  node.spawn();
  await cluster.waitHealthy(node, 30_000);
  const path = recoveryPath(node);
  expect(path).toContain("requesting_snapshot");
  expect(path.at(-1)).toBe("healthy");
  await expectSameData(cluster, ledger);
  return path;
}

describe("node recovery procedures on a quiet cluster (SPEC §4.6)", () => {
  beforeAll(() => {
    ensureBinary();
  });

  clusterTest("recovery from snapshot: a follower whose WAL was emptied, with no snapshot anywhere, is sent the log again", {
    overrides: { snapshotIntervalEntries: 100_000 },
  }, async (cluster) => {
    const ledger = new Ledger(32);
    const leader = await startWithRows(cluster, ledger, 300);
    const follower = cluster.others(leader)[0]!;
    expect(await follower.stop()).toBe(0);
    emptyWal(follower);
    await restartQuiet(cluster, follower, ledger);
  });

  clusterTest("recovery from snapshot: a follower whose WAL was emptied falls back to its older snapshot and is sent the leader's newer one", {
    overrides: { snapshotIntervalEntries: 100_000 },
  }, async (cluster) => {
    const ledger = new Ledger(32);
    const leader = await startWithRows(cluster, ledger, 200);
    const follower = cluster.others(leader)[0]!;
    await snapshotOn(follower);
    await writeRows(cluster, ledger, "b", 200);
    await cluster.waitConverged();
    // The leader's log now starts after what the follower's snapshot holds.
    for (const node of cluster.others(follower)) await snapshotOn(node);
    expect(await follower.stop()).toBe(0);
    emptyWal(follower);
    const path = await restartQuiet(cluster, follower, ledger);
    expect(path).toContain("installing_snapshot");
  });

  clusterTest("full state rebuild: a follower with raft/ and store/ removed is rebuilt from the leader's snapshot", {
    overrides: { snapshotIntervalEntries: 100_000 },
  }, async (cluster) => {
    const ledger = new Ledger(32);
    const leader = await startWithRows(cluster, ledger, 300);
    for (const node of cluster.nodes) await snapshotOn(node);
    const follower = cluster.others(leader)[0]!;
    expect(await follower.stop()).toBe(0);
    removeAllState(follower);
    const path = await restartQuiet(cluster, follower, ledger);
    expect(path).toContain("installing_snapshot");
  });

  clusterTest("full state rebuild: a follower with raft/ and store/ removed, and no snapshot anywhere, is sent the whole log", {
    overrides: { snapshotIntervalEntries: 100_000 },
  }, async (cluster) => {
    const ledger = new Ledger(32);
    const leader = await startWithRows(cluster, ledger, 300);
    const follower = cluster.others(leader)[0]!;
    expect(await follower.stop()).toBe(0);
    removeAllState(follower);
    await restartQuiet(cluster, follower, ledger);
    // It says it is rebuilt from the leader (MEMBER names its cluster), not that it belongs to
    // no cluster and wants bootstrap = true or add-node, which would be wrong to act on.
    expect(follower.lastRunLog()).toContain("it is rebuilt from the leader and does not vote until then");
    expect(follower.lastRunLog()).not.toContain("belongs to no cluster yet");
  });

  clusterTest("recovery from snapshot: the former leader, stopped and its WAL emptied, catches up from the new leader", {
    overrides: { snapshotIntervalEntries: 100_000 },
  }, async (cluster) => {
    const ledger = new Ledger(32);
    const leader = await startWithRows(cluster, ledger, 300);
    expect(await leader.stop()).toBe(0);
    const next = await cluster.waitLeader(cluster.others(leader));
    expect(next).not.toBe(leader);
    emptyWal(leader);
    await restartQuiet(cluster, leader, ledger);
  });

  clusterTest("full state rebuild: the former leader, stopped with raft/ and store/ removed, is rebuilt from the new leader", {
    overrides: { snapshotIntervalEntries: 100_000 },
  }, async (cluster) => {
    const ledger = new Ledger(32);
    const leader = await startWithRows(cluster, ledger, 300);
    expect(await leader.stop()).toBe(0);
    await cluster.waitLeader(cluster.others(leader));
    removeAllState(leader);
    // The leader is usually node1, whose config says bootstrap = true: as the README says,
    // the operator sets it to false first, or the empty node would start a cluster of its own.
    leader.options.config = { ...leader.config, cluster: { ...leader.config.cluster, bootstrap: false } };
    await restartQuiet(cluster, leader, ledger);
  });

  clusterTest("full state rebuild: a member rebuilt from nothing does not vote for one that lacks the writes it had acknowledged", {
    overrides: { snapshotIntervalEntries: 100_000 },
  }, async (cluster) => {
    // The rebuilt member and the leader acknowledged the second batch while the stale one was
    // down; then the leader crashes. With its vote, the stale member would lead without them.
    const ledger = new Ledger(32);
    const leader = await startWithRows(cluster, ledger, 20);
    const [stale, rebuilt] = cluster.others(leader) as [NodeProcess, NodeProcess];
    expect(await stale.stop()).toBe(0);
    let turn = 0;
    const load = new WriteLoad({ target: () => [leader, rebuilt][turn++ % 2]!.clientUrl, clients: 4, keyPrefix: "b", ledger, requestTimeoutMs: 10_000 });
    try {
      await load.untilAcked(100);
    } finally {
      await load.stop();
    }
    await cluster.waitConverged([leader, rebuilt]);
    expect(await rebuilt.stop()).toBe(0);
    removeAllState(rebuilt);
    rebuilt.options.config = { ...rebuilt.config, cluster: { ...rebuilt.config.cluster, bootstrap: false } };
    await cluster.kill9(leader);
    stale.spawn();
    rebuilt.spawn();
    // Either the stale member was elected with the rebuilt one's vote, or the rebuilt one refused it.
    const outcome = await waitFor("the stale member to lead, or the rebuilt one to refuse its vote request", async () => {
      const refused = (await fetchMetrics(rebuilt.adminUrl).catch(() => null))?.get('tensor_chain_peer_messages_dropped_total{reason="vote_while_recovering"}') ?? 0;
      if (refused > 0) return "refused";
      return (await cluster.health(stale))?.role === "leader" ? "elected" : false;
    }, { deadlineMs: 30_000 });
    expect(outcome).toBe("refused");
    leader.spawn();
    await cluster.waitHealthy(rebuilt, 30_000);
    await cluster.waitConverged();
    await expectSameData(cluster, ledger);
  });
});
