// RUST_LOG=tensor_chain::raft=trace (SPEC §4.3) on real processes: a node started with it logs,
// under the tensor_chain::raft target, every Raft message it sends and receives (type, peer,
// term, indexes), the votes it grants or refuses and why, and the entries it appends and
// commits; a node of the same cluster started without RUST_LOG logs no trace line at all.

import { describe, expect } from "bun:test";
import {
  clusterConfigs, execute, health, postJson, procTest, useCompiledBinary, useProcessCleanup, waitFor, waitForLeader, type NodeProcess,
} from "../lib/proc.ts";

useProcessCleanup();
useCompiledBinary();

/** The trace lines of the raft target in a node's log, text format: `<ts> TRACE tensor_chain::raft <message> k=v…`. */
function raftTraceLines(node: NodeProcess): string[] {
  return node.log().split("\n").filter((l) => /^\S+ TRACE tensor_chain::raft /.test(l));
}

describe("RUST_LOG=tensor_chain::raft=trace", () => {
  procTest("traced nodes log every message sent and received, votes with their reasons and the entries appended and committed; an untraced one logs no trace line", async (env) => {
    const configs = await clusterConfigs(env.dir, 3);
    // node3 runs with RUST_LOG empty, as unset: whatever the test runner's environment says.
    const nodes = configs.map((c) => env.node(c, { env: { RUST_LOG: c.nodeId === "node3" ? "" : "tensor_chain::raft=trace" } }));
    for (const n of nodes) n.spawn();
    await Promise.all(nodes.map((n) => n.waitHealthy()));
    const leader = await waitForLeader(nodes);
    await execute(leader.clientUrl, ["CREATE TABLE t (id INTEGER PRIMARY KEY)"]);
    for (let i = 1; i <= 5; i++) await execute(leader.clientUrl, [{ sql: "INSERT INTO t (id) VALUES (?)", params: [i] }]);
    // Hand leadership to the other traced node: a campaign (timeout_now, then votes) between traced nodes.
    const traced = nodes.filter((n) => n.nodeId !== "node3");
    const to = traced.find((n) => n !== leader) ?? traced[0]!;
    if (to !== leader) {
      const r = await postJson(`${leader.adminUrl}/admin/transfer-leader`, { id: to.nodeId }, 30_000);
      expect(r.status).toBe(200);
      await waitFor(`${to.nodeId} to lead`, async () => (await health(to))?.body.role === "leader", { deadlineMs: 30_000 });
      await execute(to.clientUrl, [{ sql: "INSERT INTO t (id) VALUES (?)", params: [6] }]);
    }

    const all = traced.flatMap(raftTraceLines);
    const has = (pattern: RegExp): boolean => all.some((l) => pattern.test(l));
    // Messages both ways, naming the peer, the term and the indexes.
    expect(has(/ message sent type=append to=node\d term=\d+ prevIndex=\d+ prevTerm=\d+ entries=[1-9]\d* first=\d+ last=\d+ commit=\d+/)).toBe(true);
    expect(has(/ message received type=append from=node\d term=\d+ prevIndex=\d+/)).toBe(true);
    expect(has(/ message sent type=append_response to=node\d term=\d+ index=\d+/)).toBe(true);
    expect(has(/ message received type=append_response from=node\d term=\d+ index=\d+/)).toBe(true);
    expect(has(/ message sent type=heartbeat to=node\d term=\d+ commit=\d+/)).toBe(true);
    expect(has(/ message sent type=vote to=node\d term=\d+ lastIndex=\d+ lastTerm=\d+/)).toBe(true);
    expect(has(/ message received type=vote_response from=node\d term=\d+ granted=(true|false)/)).toBe(true);
    expect(has(/ message sent type=timeout_now to=node\d term=\d+/)).toBe(true);
    // Decisions: votes, the log and the commit index.
    expect(has(/ vote granted to=node\d term=\d+/)).toBe(true);
    expect(has(/ appending entries to the log first=\d+ last=\d+/)).toBe(true);
    expect(has(/ commit index advanced from=\d+ to=\d+/)).toBe(true);
    expect(has(/ entries committed, applying first=\d+ last=\d+/)).toBe(true);

    // The same cluster, the same events: nothing at trace level without RUST_LOG.
    const node3 = nodes.find((n) => n.nodeId === "node3")!;
    expect(node3.log()).toContain("tensor_chain::raft");
    expect(node3.log().split("\n").filter((l) => / TRACE /.test(l))).toEqual([]);
  }, 120_000);
});
