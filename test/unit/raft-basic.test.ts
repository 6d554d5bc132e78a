import { describe, expect, test } from "bun:test";
import { RaftCore } from "../../src/raft/index.ts";
import type { Message } from "../../src/raft/index.ts";
import { bytes, configEntry, options, TestCluster, TestNode, text } from "./raft-harness.ts";

function singleVoter(): TestNode {
  return new TestNode("n1", {}, {
    hardState: { term: 1, vote: null, commit: 0 },
    snapshot: null,
    entries: [configEntry(1, 1, { voters: ["n1"], learners: [] })],
  });
}

describe("single voter", () => {
  test("campaign makes a one-voter node leader at once", () => {
    const n = singleVoter();
    n.core.campaign();
    const s = n.core.status();
    expect(s.role).toBe("leader");
    expect(s.term).toBe(2);
    expect(s.leaderId).toBe("n1");
  });

  test("first election timeout makes a one-voter node leader", () => {
    const n = singleVoter();
    for (let i = 0; i < 20 && n.core.status().role !== "leader"; i++) n.core.tick();
    expect(n.core.status().role).toBe("leader");
  });

  test("the new leader's noop commits only once the node has persisted it", () => {
    const n = singleVoter();
    n.core.campaign();
    const rd = n.core.ready();
    expect(rd.entries.map((e) => e.kind)).toEqual(["noop"]);
    expect(rd.hardState).toEqual({ term: 2, vote: "n1", commit: 0 });
    expect(rd.mustSync).toBe(true);
    expect(rd.committed).toEqual([]);
    expect(n.core.status().commit).toBe(0);
    n.core.advance(rd);
    expect(n.core.status().commit).toBe(2);
    expect(n.core.hasReady()).toBe(true);
    const rd2 = n.core.ready();
    expect(rd2.committed.map((e) => e.index)).toEqual([1, 2]);
    expect(rd2.hardState?.commit).toBe(2);
    expect(rd2.mustSync).toBe(false);
    n.core.advance(rd2);
    expect(n.core.hasReady()).toBe(false);
  });

  test("a proposal is appended, persisted, then committed and applied", () => {
    const n = singleVoter();
    n.core.campaign();
    n.process();
    const r = n.core.propose(bytes("hello"), 1234);
    expect(r).toEqual({ ok: true, index: 3, term: 2 });
    const rd = n.core.ready();
    expect(rd.entries).toHaveLength(1);
    expect(rd.entries[0]!.timestampMs).toBe(1234);
    expect(rd.committed).toEqual([]);
    n.core.advance(rd);
    const rd2 = n.core.ready();
    expect(rd2.committed.map(text)).toEqual(["hello"]);
    n.core.advance(rd2);
  });

  test("many proposals between two ready() calls come out in one Ready (group commit)", () => {
    const n = singleVoter();
    n.core.campaign();
    n.process();
    for (let i = 0; i < 50; i++) expect(n.core.propose(bytes(`v${i}`), 0).ok).toBe(true);
    const rd = n.core.ready();
    expect(rd.entries).toHaveLength(50);
    n.core.advance(rd);
    const rd2 = n.core.ready();
    expect(rd2.committed).toHaveLength(50);
    n.core.advance(rd2);
  });

  test("proposals beyond maxPendingProposals are refused with PROPOSALS_FULL", () => {
    const n = new TestNode("n1", { maxPendingProposals: 3 }, {
      hardState: { term: 1, vote: null, commit: 1 },
      snapshot: null,
      entries: [configEntry(1, 1, { voters: ["n1"], learners: [] })],
    });
    n.core.campaign(); // noop is pending: 1
    expect(n.core.propose(bytes("a"), 0).ok).toBe(true);
    expect(n.core.propose(bytes("b"), 0).ok).toBe(true);
    expect(n.core.propose(bytes("c"), 0)).toEqual({ ok: false, code: "PROPOSALS_FULL" });
    n.process();
    expect(n.core.propose(bytes("c"), 0).ok).toBe(true);
  });

  test("a restarted one-voter node keeps its log, term and applied state", () => {
    const n = singleVoter();
    n.core.campaign();
    n.process();
    n.core.propose(bytes("x"), 0);
    n.process();
    n.restart();
    expect(n.core.status().term).toBe(2);
    expect(n.core.status().commit).toBe(3);
    expect(n.core.status().lastIndex).toBe(3);
    n.core.campaign();
    n.process();
    expect(n.core.status().term).toBe(3);
    expect(n.appliedTexts()).toEqual(["x"]);
  });

  test("advance() must receive the Ready from the last ready() call", () => {
    const n = singleVoter();
    n.core.campaign();
    const rd = n.core.ready();
    expect(() => n.core.ready()).toThrow();
    n.core.advance(rd);
    expect(() => n.core.advance(rd)).toThrow();
  });
});

describe("bootstrap rules", () => {
  test("a node with an empty membership never campaigns", () => {
    const core = new RaftCore(options("n1"), { hardState: { term: 0, vote: null, commit: 0 }, snapshot: null, entries: [] });
    for (let i = 0; i < 100; i++) core.tick();
    core.campaign();
    expect(core.status().role).toBe("follower");
    expect(core.hasReady()).toBe(false);
  });

  test("a learner never campaigns", () => {
    const core = new RaftCore(options("n2"), {
      hardState: { term: 1, vote: null, commit: 1 },
      snapshot: null,
      entries: [configEntry(1, 1, { voters: ["n1"], learners: ["n2"] })],
    });
    for (let i = 0; i < 100; i++) core.tick();
    core.campaign();
    expect(core.status().role).toBe("follower");
  });

  test("a node that is not in the membership never campaigns", () => {
    const core = new RaftCore(options("n9"), {
      hardState: { term: 1, vote: null, commit: 1 },
      snapshot: null,
      entries: [configEntry(1, 1, { voters: ["n1", "n2"], learners: [] })],
    });
    for (let i = 0; i < 100; i++) core.tick();
    expect(core.status().role).toBe("follower");
  });

  test("membership given at start is used when the log defines none", () => {
    const core = new RaftCore(options("n1"), { hardState: { term: 0, vote: null, commit: 0 }, snapshot: null, entries: [], membership: { voters: ["n1"], learners: [] } });
    core.campaign();
    expect(core.status().role).toBe("leader");
  });

  test("loaded state whose commit is beyond the log is refused with RAFT_STATE_INVALID", () => {
    expect(() => new RaftCore(options("n1"), { hardState: { term: 1, vote: null, commit: 5 }, snapshot: null, entries: [] })).toThrow(/beyond the last log index/);
  });
});

describe("three voters", () => {
  test("a campaigning node wins with the votes of the others", () => {
    const c = new TestCluster(["a", "b", "c"]);
    c.elect("a");
    expect(c.node("b").core.status().leaderId).toBe("a");
    expect(c.node("c").core.status().leaderId).toBe("a");
    expect(c.leaders()).toHaveLength(1);
  });

  test("proposals replicate and every node applies the same entries in order", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.elect("a");
    for (let i = 0; i < 20; i++) expect(a.core.propose(bytes(`v${i}`), 0).ok).toBe(true);
    c.deliverAll();
    const expected = Array.from({ length: 20 }, (_, i) => `v${i}`);
    for (const n of c.nodes.values()) {
      expect(n.appliedTexts()).toEqual(expected);
      expect(n.core.status().commit).toBe(22);
    }
  });

  test("a follower refuses proposals and names the leader", () => {
    const c = new TestCluster(["a", "b", "c"]);
    c.elect("a");
    expect(c.node("b").core.propose(bytes("x"), 0)).toEqual({ ok: false, code: "NOT_LEADER", leaderId: "a" });
  });

  test("an entry commits with a majority while one follower is cut off", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.elect("a");
    c.isolate("c");
    a.core.propose(bytes("x"), 0);
    c.deliverAll();
    expect(a.appliedTexts()).toEqual(["x"]);
    expect(c.node("b").core.status().lastIndex).toBe(3);
    expect(c.node("c").appliedTexts()).toEqual([]);
  });

  test("an entry does not commit without a majority", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.elect("a");
    c.isolate("a");
    a.core.propose(bytes("x"), 0);
    c.deliverAll();
    expect(a.core.status().commit).toBe(2);
    expect(a.appliedTexts()).toEqual([]);
  });

  test("a follower that was cut off catches up after the partition heals", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.elect("a");
    c.isolate("c");
    for (let i = 0; i < 10; i++) a.core.propose(bytes(`v${i}`), 0);
    c.deliverAll();
    c.heal();
    c.tickAll(2);
    expect(c.node("c").appliedTexts()).toHaveLength(10);
  });

  test("appends to a follower are bounded by maxInflightAppends while unacknowledged", () => {
    const c = new TestCluster(["a", "b", "c"], { maxInflightAppends: 2, maxEntriesPerAppend: 1 });
    const a = c.elect("a");
    for (let i = 0; i < 10; i++) a.core.propose(bytes(`v${i}`), 0);
    a.process();
    const toB = a.outbox.filter((m) => m.to === "b" && m.type === "append");
    expect(toB).toHaveLength(2);
    expect(a.core.status().progress["b"]?.inflight).toBe(2);
    c.deliverAll();
    expect(c.node("b").appliedTexts()).toHaveLength(10);
  });

  test("an append batches at most maxEntriesPerAppend entries", () => {
    const c = new TestCluster(["a", "b", "c"], { maxEntriesPerAppend: 3 });
    const a = c.elect("a");
    for (let i = 0; i < 7; i++) a.core.propose(bytes(`v${i}`), 0);
    a.process();
    const sizes = a.outbox.filter((m): m is Extract<Message, { type: "append" }> => m.to === "b" && m.type === "append").map((m) => m.entries.length);
    expect(sizes).toEqual([3, 3, 1]);
  });

  test("a restarted follower rejoins and catches up", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.elect("a");
    a.core.propose(bytes("x"), 0);
    c.deliverAll();
    c.node("b").restart();
    a.core.propose(bytes("y"), 0);
    c.deliverAll();
    c.tickAll(2);
    expect(c.node("b").appliedTexts()).toEqual(["x", "y"]);
  });
});
