// Writes that once stopped a whole cluster, through the compiled binary on three nodes. Each
// must be answered with a statement error or a refusal, and leave every node applying and
// serving, with the same data:
//   - an insert into a table out of rowids (SQLite says "database or disk is full", which was
//     taken for a full disk on every node at once, for ever, restarts included);
//   - an insert whose cost lies in an index's expression (it entered the log untried, and
//     every node spent seconds per row applying it, long enough for elections).

import { describe, expect } from "bun:test";
import { execute, executeRaw, getJson, procTest, queryRaw, startCluster, useCompiledBinary, useProcessCleanup, waitFor, waitForLeader, type NodeProcess } from "../lib/proc.ts";

useProcessCleanup();
useCompiledBinary();

/** Every node answers /health ok, and holds `expected` as the answer to `sql` (read locally). */
async function everyNodeHolds(nodes: readonly NodeProcess[], sql: string, expected: unknown): Promise<void> {
  for (const node of nodes) {
    await waitFor(`${node.nodeId} to be healthy and hold ${JSON.stringify(expected)}`, async () => {
      const health = await getJson<{ status: string }>(`${node.adminUrl}/health`).catch(() => null);
      if (health?.status !== "ok") return false;
      const r = await queryRaw(node.clientUrl, sql, [], "stale");
      return r.status === 200 && JSON.stringify(r.body?.rows) === JSON.stringify(expected);
    });
  }
}

describe("writes that must not stop a cluster", () => {
  procTest("an insert into a table out of rowids is a statement error on every node, plain or tried first; writes go on, restarts too", async (env) => {
    const nodes = await startCluster(env, 3);
    const leader = await waitForLeader(nodes);
    await execute(leader.clientUrl, ["CREATE TABLE ai (id INTEGER PRIMARY KEY AUTOINCREMENT, v)", "CREATE TABLE x (v)"]);
    await execute(leader.clientUrl, ["INSERT INTO ai (id, v) VALUES (9223372036854775807, 'last')"]);
    const follower = nodes.find((n) => n !== leader)!;
    for (const [via, statements] of [
      [leader, ["INSERT INTO ai (v) VALUES ('plain')"]],
      [follower, ["INSERT INTO x VALUES ('rolled back with its batch')", "INSERT INTO ai (v) VALUES ('plain, second of two')"]],
      [leader, ["INSERT INTO ai (v) SELECT 'tried before the log'"]],
    ] as const) {
      const r = await executeRaw(via.clientUrl, statements, 20_000);
      expect({ statements, status: r.status, code: r.body?.error?.code }).toEqual({ statements, status: 400, code: "SQL_ERROR" });
      expect(r.body?.error?.message).toContain("no rowid is left");
    }
    await execute(follower.clientUrl, ["INSERT INTO x VALUES ('after')"]);
    await everyNodeHolds(nodes, "SELECT (SELECT group_concat(v) FROM x), (SELECT count(*) FROM ai)", [["after", 1]]);
    for (const node of nodes) expect(node.log()).not.toContain("disk is full");
    // Every node replays those entries at its restart alike.
    for (const node of nodes) {
      expect(await node.stop()).toBe(0);
      node.spawn();
      await node.waitHealthy();
    }
    await execute((await waitForLeader(nodes)).clientUrl, ["INSERT INTO x VALUES ('after restarts')"]);
    await everyNodeHolds(nodes, "SELECT group_concat(v) FROM x", [["after,after restarts"]]);
  }, 120_000);

  procTest("an insert whose cost is in an index's expression is tried before the log, and refused there", async (env) => {
    const nodes = await startCluster(env, 3);
    const leader = await waitForLeader(nodes);
    await execute(leader.clientUrl, ["CREATE TABLE ei (x)", "CREATE INDEX ei_i ON ei (length(printf('%.*c', x, 'a')))"]);
    // Each row's index key is a string of x characters: 300 MB each, past the memory a write may take when tried.
    const r = await executeRaw(leader.clientUrl, ["INSERT INTO ei VALUES (300000000), (300000000), (300000000)"], 60_000);
    expect({ status: r.status, code: r.body?.error?.code }).toEqual({ status: 400, code: "WRITE_TOO_EXPENSIVE" });
    await execute(leader.clientUrl, ["INSERT INTO ei VALUES (3)"]);
    await everyNodeHolds(nodes, "SELECT x FROM ei", [[3]]);
  }, 120_000);
});
