// SPEC §4.6 recovery from snapshot done on a majority of the voters at once: each of them lost
// log entries it may have acknowledged, so none of them votes (DESIGN §5), and the one member
// that kept its log cannot win an election alone. The cluster stays without a leader: every
// member's /health, its log and cluster-status must say why, name the members that lost their
// log and give the way out, and none may name a leader (those that lost their log may last have
// heard one that has stopped leading since); putting the WAL back (it was moved aside) is one,
// and must work.

import * as fs from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect } from "bun:test";
import { clusterTest, expectSameData, type Cluster } from "../lib/cluster.ts";
import { Ledger, WriteLoad, ensureBinary, execute, kvSchema, postJson, runBinary, useProcessCleanup, waitFor, type NodeProcess } from "../lib/proc.ts";

useProcessCleanup();

/** What every member says on /health, in its log and in cluster-status when `lost` lost their log. */
function majorityLost(lost: readonly NodeProcess[]): RegExp {
  return new RegExp(`a majority of the voters lost their log \\(${lost.map((n) => n.nodeId).join(", ")} of node1, node2, node3\\): no leader can be elected`);
}

/** Move the contents of `node`'s raft/wal/ to `aside` (SPEC §4.6 removes them; these can be put back). */
function moveWalAside(node: NodeProcess, aside: string): void {
  const walDir = join(node.dataDir, "raft", "wal");
  fs.mkdirSync(aside, { recursive: true });
  const names = fs.readdirSync(walDir);
  expect(names.length).toBeGreaterThan(0);
  for (const name of names) fs.renameSync(join(walDir, name), join(aside, name));
}

/** The way out the message gives first: the WAL put back in place of what is there, raft/LOST_LOG removed. */
function putWalBack(node: NodeProcess, aside: string): void {
  const walDir = join(node.dataDir, "raft", "wal");
  for (const name of fs.readdirSync(walDir)) fs.rmSync(join(walDir, name), { recursive: true, force: true });
  for (const name of fs.readdirSync(aside)) fs.renameSync(join(aside, name), join(walDir, name));
  fs.rmSync(join(node.dataDir, "raft", "LOST_LOG"), { force: true });
}

/**
 * Rows written through node1; then SPEC §4.6's recovery from snapshot on `losers` at once (their
 * WAL moved aside), the others stopped meanwhile too when `stopAll`. Every member must say why no
 * leader comes, once in its log; their WAL put back, the cluster must elect one with every write.
 */
async function majorityLosesWal(cluster: Cluster, losersOf: (nodes: NodeProcess[]) => NodeProcess[], stopAll: boolean): Promise<void> {
  await cluster.start();
  const [a] = cluster.nodes as [NodeProcess];
  await execute(a.clientUrl, [kvSchema]);
  // node1 leads while the rows are written, so that it holds them all.
  const leader = await cluster.waitLeader();
  if (leader !== a) {
    expect((await postJson(`${leader.adminUrl}/admin/transfer-leader`, { id: a.nodeId })).status).toBe(200);
    await cluster.waitLeader();
  }
  const ledger = new Ledger(32);
  const load = new WriteLoad({ target: () => a.clientUrl, clients: 4, keyPrefix: "a", ledger, requestTimeoutMs: 10_000 });
  try {
    await load.untilAcked(300);
  } finally {
    await load.stop();
  }
  await cluster.waitConverged();

  const losers = losersOf([...cluster.nodes]);
  const stopped = stopAll ? [...cluster.nodes] : losers;
  for (const n of stopped) expect(await n.stop()).toBe(0);
  if (!stopAll) await waitFor("node1 to step down without a majority", async () => (await cluster.health(a))?.role !== "leader");
  const aside = (n: NodeProcess): string => join(cluster.env.dir, `${n.nodeId}-wal-aside`);
  for (const n of losers) moveWalAside(n, aside(n));
  for (const n of stopped) n.spawn();

  // Each member says it on /health: the ones that lost their log, and any that kept it.
  const said = majorityLost(losers);
  for (const n of cluster.nodes) {
    await waitFor(`${n.nodeId}'s /health to say that a majority of the voters lost their log`, async () => {
      const h = await cluster.health(n);
      return h !== null && h.status === "unavailable" && said.test(h.problem ?? "");
    }, { deadlineMs: 30_000 });
  }
  // None of them names a leader, on /health or in cluster-info: not the members that lost their
  // log, which hear no election and may name node1 from heartbeats it queued for them while it
  // still led (delivered once they are back), nor node1, which no longer leads.
  for (const n of cluster.nodes) {
    expect({ node: n.nodeId, leader: (await cluster.health(n))?.leader }).toEqual({ node: n.nodeId, leader: null });
    const info = await runBinary(["admin", "cluster-info", "--node", n.adminUrl]);
    expect(info.exitCode).toBe(0);
    expect({ node: n.nodeId, leader: (JSON.parse(info.stdout) as { leader: string | null }).leader }).toEqual({ node: n.nodeId, leader: null });
  }
  const h = await cluster.health(losers[0]!);
  expect(h?.problem).toContain("raft/wal/");
  expect(h?.problem).toContain("LOST_LOG");
  expect(h?.problem).toContain("init-cluster --bootstrap");

  // The log says it once, at error level, not at every tick.
  for (const n of cluster.nodes) {
    await waitFor(`${n.nodeId}'s log to say that a majority of the voters lost their log`, () => said.test(n.lastRunLog()), { deadlineMs: 30_000 });
  }
  const status = await runBinary(["admin", "cluster-status", "--json", "--node", a.adminUrl], { deadlineMs: 30_000 });
  expect(status.exitCode).not.toBe(0);
  const report = JSON.parse(status.stdout) as { problems: string[] };
  expect(report.problems.join("\n")).toMatch(said);
  // Nor in what they gossip, as cluster-status shows it (facts spread within a few protocol periods).
  await waitFor("every member's gossiped facts to name no leader", async () => {
    const r = await runBinary(["admin", "cluster-status", "--json", "--node", a.adminUrl], { deadlineMs: 30_000 });
    const members = (JSON.parse(r.stdout) as { members: { id: string; leader: string | null }[] }).members;
    return members.length === cluster.nodes.length && members.every((m) => m.leader === null);
  }, { deadlineMs: 30_000 });
  for (const n of cluster.nodes) {
    const lines = n.lastRunLog().split("\n").filter((l) => said.test(l));
    expect(lines.length).toBe(1);
    expect(lines[0]).toContain("ERROR");
  }

  // The way out the message gives first: their WAL was moved aside, so it goes back.
  for (const n of losers) {
    expect(await n.stop()).toBe(0);
    putWalBack(n, aside(n));
    n.spawn();
  }
  await Promise.all(cluster.nodes.map((n) => cluster.waitHealthy(n, 30_000)));
  // Hearing from a leader again, every member names it on /health (waitLeader waits for that).
  await cluster.waitLeader();
  await expectSameData(cluster, ledger);
}

describe("a majority of the voters lost their log (SPEC §4.6 on several members at once)", () => {
  beforeAll(() => {
    ensureBinary();
  });

  clusterTest("with two of three voters' WAL emptied no leader can be elected: /health, the log and cluster-status say so, name them and the way out, and none names a leader; their WAL put back, the cluster elects a leader with every write", {
    overrides: { snapshotIntervalEntries: 100 },
  }, (cluster) => majorityLosesWal(cluster, (nodes) => nodes.slice(1), false), 150_000);

  clusterTest("with every voter's WAL emptied while the cluster was stopped no leader can be elected: every member says so, naming all, and none names a leader; their WAL put back, the cluster elects a leader with every write", {
    overrides: { snapshotIntervalEntries: 100 },
  }, (cluster) => majorityLosesWal(cluster, (nodes) => nodes, true), 150_000);
});
