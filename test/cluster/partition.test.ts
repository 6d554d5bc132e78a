// Partitions of a three-node cluster. A node frozen with SIGSTOP (a host that hangs) or cut
// off by the network (peer connections dropped by a proxy the test controls) is a minority
// of one: the other two elect a leader and go on; the cut-off node acknowledges no write
// and answers no linearizable read while it is cut off, even if it was the leader; once it
// is back it steps down if it led, catches up, and every node holds the same data.

import { beforeAll, describe, expect } from "bun:test";
import { clusterTest, type Cluster } from "../lib/cluster.ts";
import {
  ensureBinary, execute, executeRaw, postJson, queryRaw, useProcessCleanup, waitFor, type HttpAnswer, type NodeProcess, type QueryBody,
} from "../lib/proc.ts";

useProcessCleanup();

const schema = "CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v INTEGER)";
const upsert = "INSERT OR REPLACE INTO kv (k, v) VALUES (?, ?)";

/** Writes that must all be acknowledged, spread over `via`. */
async function writeAll(via: readonly NodeProcess[], prefix: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const node = via[i % via.length]!;
    const r = await executeRaw(node.clientUrl, [{ sql: upsert, params: [`${prefix}-${i}`, i] }], 10_000);
    if (r.status !== 200) throw new Error(`write ${prefix}-${i} through ${node.nodeId} answered ${r.status}: ${r.text}`);
  }
}

type Attempt = number | "no answer";

function readCount(node: NodeProcess, timeoutMs: number): Promise<HttpAnswer<QueryBody>> {
  return postJson<QueryBody>(`${node.clientUrl}/v1/query`, { sql: "SELECT count(*) FROM kv", params: [], consistency: "linearizable" }, timeoutMs);
}

/**
 * Every node answers a linearizable read again (the reads sent while the cluster was split
 * must not leave any node unable to serve reads afterwards).
 */
async function expectLinearizableReadsEverywhere(cluster: Cluster): Promise<void> {
  for (const n of cluster.nodes) {
    await waitFor(`${n.nodeId} to answer a linearizable read`, async () => (await readCount(n, 2_000).catch(() => null))?.status === 200, { deadlineMs: 15_000 });
  }
}

/**
 * Writes and linearizable reads sent to `node` while it is cut off, in rounds spread over
 * more than an election timeout (so both "still thinks it leads" and "stepped down" are
 * covered). Each gets `timeoutMs` to answer.
 */
async function attemptsWhileCutOff(node: NodeProcess, rounds = 3, timeoutMs = 1_500): Promise<{ writes: Attempt[]; reads: Attempt[] }> {
  const writes: Attempt[] = [];
  const reads: Attempt[] = [];
  for (let i = 0; i < rounds; i++) {
    const [w, r] = await Promise.all([
      executeRaw(node.clientUrl, [{ sql: upsert, params: [`cut-off-${node.nodeId}-${i}`, i] }], timeoutMs).then((a) => a.status, () => "no answer" as const),
      readCount(node, timeoutMs).then((a) => a.status, () => "no answer" as const),
    ]);
    writes.push(w);
    reads.push(r);
  }
  return { writes, reads };
}

async function expectConverged(cluster: Cluster): Promise<void> {
  await cluster.waitConverged();
  const leader = await cluster.waitLeader();
  const reference = await cluster.dump(leader, "kv");
  for (const n of cluster.nodes) expect(await cluster.dump(n, "kv")).toEqual(reference);
}

describe("partitions of a three-node cluster", () => {
  beforeAll(() => {
    ensureBinary();
  });

  clusterTest("a frozen leader is replaced: the other two elect a leader and accept writes; resumed, the old leader steps down and catches up", {}, async (cluster) => {
    await cluster.start();
    await execute(cluster.nodes[0]!.clientUrl, [schema]);
    await writeAll(cluster.nodes, "before", 30);
    const oldLeader = await cluster.waitLeader();
    const oldTerm = (await cluster.health(oldLeader))?.term ?? 0;

    cluster.pause(oldLeader);
    const majority = cluster.others(oldLeader);
    const newLeader = await cluster.waitLeader(majority);
    expect((await cluster.health(newLeader))?.term ?? 0).toBeGreaterThan(oldTerm);
    await writeAll(majority, "during", 30);

    cluster.resume(oldLeader);
    await cluster.waitCaughtUp(oldLeader);
    const h = await cluster.health(oldLeader);
    expect(h?.role).toBe("follower");
    expect(h?.leader).toBe(newLeader.nodeId);
    await expectConverged(cluster);
    expect((await cluster.dump(oldLeader, "kv")).length).toBe(60);
  });

  clusterTest("a follower frozen by SIGSTOP does not stop the other two: writes and linearizable reads go on, and it catches up when resumed", {}, async (cluster) => {
    await cluster.start();
    await execute(cluster.nodes[0]!.clientUrl, [schema]);
    const leader = await cluster.waitLeader();
    const frozen = cluster.others(leader)[0]!;
    cluster.pause(frozen);
    const majority = cluster.others(frozen);
    await writeAll(majority, "during", 40);
    for (const n of majority) {
      const r = await queryRaw(n.clientUrl, "SELECT count(*) FROM kv", [], "linearizable");
      expect(r.status).toBe(200);
      expect(r.body?.rows).toEqual([[40]]);
    }
    // The leader did not change: a frozen follower is no reason for an election.
    expect((await cluster.waitLeader(majority)).nodeId).toBe(leader.nodeId);
    cluster.resume(frozen);
    await cluster.waitCaughtUp(frozen);
    await expectConverged(cluster);
  });

  for (const which of ["leader", "follower"] as const) {
    clusterTest(`a ${which} whose two peers are frozen accepts no write and answers no linearizable read; after they resume all converge`, {}, async (cluster) => {
      await cluster.start();
      await execute(cluster.nodes[0]!.clientUrl, [schema]);
      await writeAll(cluster.nodes, "before", 20);
      const leader = await cluster.waitLeader();
      const alone = which === "leader" ? leader : cluster.others(leader)[0]!;
      const others = cluster.others(alone);
      for (const n of others) cluster.pause(n);

      const { writes, reads } = await attemptsWhileCutOff(alone);
      // 503 (no leader, or cannot forward) or no answer at all are both right; 200 never is.
      expect(writes.filter((s) => s === 200)).toEqual([]);
      expect(reads.filter((s) => s === 200)).toEqual([]);
      // It is alive all along: its health endpoint answers.
      expect(await cluster.health(alone, 5_000)).not.toBeNull();

      for (const n of others) cluster.resume(n);
      await cluster.waitLeader(cluster.nodes);
      await writeAll(cluster.nodes, "after", 20);
      await expectConverged(cluster);
      await expectLinearizableReadsEverywhere(cluster);
    });
  }

  clusterTest("a leader cut off from both peers by the network steps down; the other two elect a leader; after the network heals the old leader follows and catches up", { proxied: true }, async (cluster) => {
    await cluster.start();
    await execute(cluster.nodes[0]!.clientUrl, [schema]);
    await writeAll(cluster.nodes, "before", 20);
    const oldLeader = await cluster.waitLeader();
    const majority = cluster.others(oldLeader);

    cluster.isolate(oldLeader);
    const newLeader = await cluster.waitLeader(majority);
    await writeAll(majority, "during", 20);
    // The cut-off node runs and answers HTTP, but it must serve nothing that needs a quorum.
    const { writes, reads } = await attemptsWhileCutOff(oldLeader);
    expect(writes.filter((s) => s === 200)).toEqual([]);
    expect(reads.filter((s) => s === 200)).toEqual([]);
    // checkQuorum: a leader that hears from no majority gives up leadership by itself.
    expect((await cluster.health(oldLeader))?.role).not.toBe("leader");

    cluster.heal();
    await cluster.waitCaughtUp(oldLeader);
    const h = await cluster.health(oldLeader);
    expect(h?.role).toBe("follower");
    expect(h?.leader).toBe(newLeader.nodeId);
    await expectConverged(cluster);
    const rows = await cluster.dump(oldLeader, "kv");
    expect(rows.filter((r) => String(r[0]).startsWith("during-")).length).toBe(20);
    await expectLinearizableReadsEverywhere(cluster);
  });

  clusterTest("a write forwarded to a leader that then froze (SIGSTOP) is answered OUTCOME_UNKNOWN once another leader is known, not after the forward's time-out", {}, async (cluster) => {
    await cluster.start();
    await execute(cluster.nodes[0]!.clientUrl, [schema]);
    const oldLeader = await cluster.waitLeader();
    const follower = cluster.others(oldLeader)[0]!;
    cluster.pause(oldLeader);
    // The follower still names the frozen node as leader: it forwards, and the frozen node never answers.
    const r = await executeRaw(follower.clientUrl, [{ sql: upsert, params: ["forwarded", 1] }], 25_000);
    expect(r.status).toBe(504);
    expect(r.text).toContain("OUTCOME_UNKNOWN");
    expect(r.text).toContain("leadership moved to");
    cluster.resume(oldLeader);
    await cluster.waitCaughtUp(oldLeader);
    await expectConverged(cluster);
  });

  clusterTest("a write the leader took just before it was cut off is answered OUTCOME_UNKNOWN once it has stepped down and heard no leader, not after the write timeout", { proxied: true }, async (cluster) => {
    await cluster.start();
    await execute(cluster.nodes[0]!.clientUrl, [schema]);
    const oldLeader = await cluster.waitLeader();
    cluster.isolate(oldLeader);
    // Proposed while it still leads: its entry reaches no one, so nothing can say what became of it.
    const r = await executeRaw(oldLeader.clientUrl, [{ sql: upsert, params: ["in-flight", 1] }], 25_000);
    expect(r.status).toBe(504);
    expect(r.text).toContain("OUTCOME_UNKNOWN");
    expect(r.text).toContain("lost its leadership");
    cluster.heal();
    await cluster.waitCaughtUp(oldLeader);
    await expectConverged(cluster);
  });
});
