// Failover of a three-node cluster of compiled svc processes: the cluster forms with one
// leader, a write through any node is visible to a linearizable read on every node, and when
// the leader is killed with kill -9 the others elect a new one (without waiting out the
// election timeout: its peer port refuses them), writes go on, and the old leader, restarted,
// catches up to the same data.

import { beforeAll, describe, expect } from "bun:test";
import { clusterTest } from "../lib/cluster.ts";
import { ensureBinary, execute, executeRaw, queryRaw, postJson, useProcessCleanup, waitFor, type NodeProcess } from "../lib/proc.ts";

useProcessCleanup();

const schema = "CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v INTEGER)";

async function readLinearizable(node: NodeProcess, k: string): Promise<unknown> {
  const r = await queryRaw(node.clientUrl, "SELECT v FROM kv WHERE k = ?", [k], "linearizable");
  if (r.status !== 200 || r.body === undefined) throw new Error(`linearizable read on ${node.nodeId} answered ${r.status}: ${r.text}`);
  return r.body.rows[0]?.[0] ?? null;
}

/** Status of a linearizable read on `node` answered within `timeoutMs`, or "no answer". */
async function queryWithin(node: NodeProcess, timeoutMs: number): Promise<number | "no answer"> {
  const r = await postJson(`${node.clientUrl}/v1/query`, { sql: "SELECT v FROM kv WHERE k = 'x'", consistency: "linearizable" }, timeoutMs).catch(() => null);
  return r === null ? "no answer" : r.status;
}

describe("failover of a three-node cluster", () => {
  beforeAll(() => {
    ensureBinary();
  });

  clusterTest("a new cluster forms: every node healthy, exactly one leader that all follow", {}, async (cluster) => {
    await cluster.start();
    const leader = await cluster.waitLeader();
    const hs = await Promise.all(cluster.nodes.map((n) => cluster.health(n)));
    expect(hs.map((h) => h?.status)).toEqual(["ok", "ok", "ok"]);
    expect(hs.filter((h) => h?.role === "leader").length).toBe(1);
    expect(hs.map((h) => h?.leader)).toEqual([leader.nodeId, leader.nodeId, leader.nodeId]);
    // One term for all: nobody is campaigning on the side.
    expect(new Set(hs.map((h) => h?.term)).size).toBe(1);
  });

  clusterTest("a write through any node is seen by a linearizable read on every node at once", {}, async (cluster) => {
    await cluster.start();
    await execute(cluster.nodes[0]!.clientUrl, [schema]);
    for (const [i, writer] of cluster.nodes.entries()) {
      // Followers forward the write to the leader; the answer comes once it is applied there.
      const r = await executeRaw(writer.clientUrl, [{ sql: "INSERT OR REPLACE INTO kv (k, v) VALUES (?, ?)", params: [`via-${writer.nodeId}`, i] }]);
      expect(r.status).toBe(200);
      // No waiting: a linearizable read must see an acknowledged write immediately, on any node.
      for (const reader of cluster.nodes) expect(await readLinearizable(reader, `via-${writer.nodeId}`)).toBe(i);
    }
  });

  clusterTest("when the leader is killed a new leader is elected, writes go on, and the old leader catches up on restart", {}, async (cluster) => {
    await cluster.start();
    await execute(cluster.nodes[0]!.clientUrl, [schema]);
    for (let i = 0; i < 50; i++) await cluster.executeAnywhere([{ sql: "INSERT OR REPLACE INTO kv (k, v) VALUES (?, ?)", params: [`before-${i}`, i] }]);

    const oldLeader = await cluster.waitLeader();
    const oldTerm = (await cluster.health(oldLeader))?.term ?? 0;
    await cluster.kill9(oldLeader);

    const survivors = cluster.others(oldLeader);
    const newLeader = await cluster.waitLeader(survivors);
    expect(newLeader.nodeId).not.toBe(oldLeader.nodeId);
    expect((await cluster.health(newLeader))?.term ?? 0).toBeGreaterThan(oldTerm);
    // The dead leader's peer port refused the survivors' redials: they did not wait out the
    // election timeout, they campaigned at once.
    expect(survivors.some((n) => n.log().includes("leader unreachable (its peer port refused a connection)"))).toBe(true);

    // Writes through both survivors (one forwards) succeed with a node down.
    for (let i = 0; i < 50; i++) {
      const via = survivors[i % survivors.length]!;
      const r = await executeRaw(via.clientUrl, [{ sql: "INSERT OR REPLACE INTO kv (k, v) VALUES (?, ?)", params: [`after-${i}`, i] }]);
      expect(r.status).toBe(200);
    }
    for (const n of survivors) expect(await readLinearizable(n, "after-49")).toBe(49);

    await oldLeader.start();
    await cluster.waitCaughtUp(oldLeader);
    // It rejoins as a follower of the new leader (its term is stale, so it cannot win back).
    const h = await cluster.health(oldLeader);
    expect(h?.role).toBe("follower");
    expect(h?.leader).toBe(newLeader.nodeId);

    await cluster.waitConverged();
    const reference = await cluster.dump(newLeader, "kv");
    expect(reference.length).toBe(100);
    for (const n of cluster.nodes) expect(await cluster.dump(n, "kv")).toEqual(reference);
    // And it serves linearizable reads of what was written while it was down.
    expect(await readLinearizable(oldLeader, "after-49")).toBe(49);
  });

  // A follower serves a linearizable read by asking the leader for its commit index
  // (ReadIndex). When the leader dies with that question unanswered, the read may fail, but
  // the follower must serve reads again once there is a new leader.
  clusterTest("a follower whose linearizable read was in flight when the leader died serves linearizable reads again under the new leader", {}, async (cluster) => {
    await cluster.start();
    await execute(cluster.nodes[0]!.clientUrl, [schema]);
    await execute(cluster.nodes[0]!.clientUrl, [{ sql: "INSERT INTO kv (k, v) VALUES ('x', 1)" }]);
    const oldLeader = await cluster.waitLeader();
    const follower = cluster.others(oldLeader)[0]!;
    // Frozen, the leader still holds its connections: the follower's request goes out and
    // stays unanswered; kill -9 then loses it for good.
    cluster.pause(oldLeader);
    const inFlight = await queryWithin(follower, 1_000);
    expect(inFlight).not.toBe(200);
    await cluster.kill9(oldLeader);
    await cluster.waitLeader(cluster.others(oldLeader));
    await waitFor(`${follower.nodeId} to answer a linearizable read under the new leader`, async () => (await queryWithin(follower, 2_000)) === 200, { deadlineMs: 15_000 });
  });

  clusterTest("a node left without a majority reports itself unavailable on /health, and ok again once a leader is back", {}, async (cluster) => {
    await cluster.start();
    const leader = await cluster.waitLeader();
    const [x, y] = cluster.others(leader);
    if (x === undefined || y === undefined) throw new Error("three nodes");
    expect(await x.stop()).toBe(0);
    expect(await y.stop()).toBe(0);
    const answer = await waitFor("/health to say there is no leader", async () => {
      const r = await fetch(`${leader.adminUrl}/health`);
      const body = (await r.json()) as { status: string; problem?: string; recovery: string };
      return r.status === 503 ? body : false;
    }, { deadlineMs: 30_000, intervalMs: 200 });
    expect(answer.status).toBe("unavailable");
    expect(answer.recovery).toBe("healthy");
    expect(answer.problem).toContain("reaches no majority");
    // The client port answers the same.
    expect((await fetch(`${leader.clientUrl}/health`)).status).toBe(503);
    // So does an action that belongs to the leader: no election is about to end here.
    const snapshot = await postJson<{ error: { code: string; hint: string } }>(`${leader.adminUrl}/admin/snapshot`, {});
    expect(snapshot.status).toBe(503);
    expect(snapshot.body?.error.code).toBe("NOT_LEADER");
    expect(snapshot.body?.error.hint).toContain("reaches no majority");
    expect(snapshot.body?.error.hint).toContain("?local=true");
    x.spawn();
    await cluster.waitLeader([leader, x], 30_000);
    await cluster.waitHealthy(leader, 30_000);
  });
});
