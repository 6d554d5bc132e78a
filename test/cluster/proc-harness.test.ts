// The process harness with a cluster: three compiled nodes on loopback elect one leader and a
// write through it is read on every node. (Cluster behaviour proper is tested beside this.)

import { describe, expect } from "bun:test";
import { execute, procTest, queryRaw, startCluster, useCompiledBinary, useProcessCleanup, waitFor, waitForLeader } from "../lib/proc.ts";

useProcessCleanup();
useCompiledBinary();

describe("a three-node cluster of compiled nodes", () => {

  procTest("elects one leader that all nodes name, and a write through it reaches every node", async (env) => {
    const nodes = await startCluster(env, 3);
    const leader = await waitForLeader(nodes);
    expect(nodes.map((n) => n.nodeId)).toContain(leader.nodeId);
    await execute(leader.clientUrl, ["CREATE TABLE t (x INTEGER)", "INSERT INTO t VALUES (42)"]);
    for (const node of nodes) {
      // Stale reads show what each node itself has applied.
      await waitFor(`${node.nodeId} to apply the write`, async () => {
        const r = await queryRaw(node.clientUrl, "SELECT x FROM t", [], "stale");
        return r.status === 200 && JSON.stringify(r.body?.rows) === "[[42]]";
      });
    }
  });
});
