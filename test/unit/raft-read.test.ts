import { describe, expect, test } from "bun:test";
import { RaftCore } from "../../src/raft/index.ts";
import { bytes, configEntry, options, TestCluster, TestNode } from "./raft-harness.ts";

describe("ReadIndex", () => {
  test("a one-voter leader answers a read with its commit index without a round", () => {
    const n = new TestNode("n1", {}, { hardState: { term: 1, vote: null, commit: 1 }, snapshot: null, entries: [configEntry(1, 1, { voters: ["n1"], learners: [] })] });
    n.core.campaign();
    n.process();
    n.core.propose(bytes("x"), 0);
    n.process();
    expect(n.core.readIndex(7)).toEqual({ ok: true });
    n.process();
    expect(n.readStates).toEqual([{ requestId: 7, index: 3 }]);
  });

  test("the leader answers a read only after a heartbeat quorum confirms its leadership", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.elect("a");
    a.core.propose(bytes("x"), 0);
    c.deliverAll();
    expect(a.core.readIndex(1)).toEqual({ ok: true });
    a.process();
    expect(a.readStates).toEqual([]);
    expect(a.outbox.filter((m) => m.type === "heartbeat")).toHaveLength(2);
    c.deliverAll();
    expect(a.readStates).toEqual([{ requestId: 1, index: 3 }]);
  });

  test("a leader cut off from the quorum never answers a read", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.elect("a");
    c.isolate("a");
    a.core.readIndex(1);
    c.tickAll(5);
    expect(a.readStates).toEqual([]);
  });

  test("one follower's answer plus the leader's own is a quorum of three", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.elect("a");
    c.isolate("c");
    a.core.readIndex(1);
    c.deliverAll();
    expect(a.readStates.map((r) => r.requestId)).toEqual([1]);
  });

  test("a read that arrives before the new leader committed an entry of its term waits for that commit", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.electWithoutAppends("a");
    expect(a.core.status().role).toBe("leader");
    expect(a.core.status().commit).toBe(1);
    expect(a.core.readIndex(5)).toEqual({ ok: true });
    a.process();
    expect(a.readStates).toEqual([]);
    c.deliverAll();
    expect(a.readStates).toEqual([{ requestId: 5, index: 2 }]);
  });

  test("a follower forwards a read to the leader and gets the leader's commit index back", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.elect("a");
    a.core.propose(bytes("x"), 0);
    c.deliverAll();
    const b = c.node("b");
    expect(b.core.readIndex(42)).toEqual({ ok: true });
    c.deliverAll();
    expect(b.readStates).toEqual([{ requestId: 42, index: 3 }]);
    expect(a.readStates).toEqual([]);
  });

  test("a follower that knows no leader refuses a read with NOT_LEADER", () => {
    const core = new RaftCore(options("b"), { hardState: { term: 1, vote: null, commit: 1 }, snapshot: null, entries: [configEntry(1, 1, { voters: ["a", "b", "c"], learners: [] })] });
    expect(core.readIndex(1)).toEqual({ ok: false, code: "NOT_LEADER", leaderId: null });
  });

  test("reads beyond the pending bound are refused with READS_FULL", () => {
    const c = new TestCluster(["a", "b", "c"], { maxPendingProposals: 2 });
    const a = c.elect("a");
    c.isolate("a");
    expect(a.core.readIndex(1).ok).toBe(true);
    expect(a.core.readIndex(2).ok).toBe(true);
    expect(a.core.readIndex(3)).toEqual({ ok: false, code: "READS_FULL" });
  });

  test("reads confirmed by one heartbeat round are answered in the order they arrived", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.elect("a");
    for (let i = 1; i <= 5; i++) a.core.readIndex(i);
    c.deliverAll();
    expect(a.readStates.map((r) => r.requestId)).toEqual([1, 2, 3, 4, 5]);
  });

  test("a read index is never below what was committed when the read arrived", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.elect("a");
    a.core.propose(bytes("x"), 0);
    c.deliverAll();
    const commitAtRead = a.core.status().commit;
    a.core.readIndex(9);
    a.core.propose(bytes("y"), 0);
    c.deliverAll();
    expect(a.readStates[0]!.index).toBeGreaterThanOrEqual(commitAtRead);
  });
});
