import { describe, expect, test } from "bun:test";
import { RaftCore } from "../../src/raft/index.ts";
import type { Message } from "../../src/raft/index.ts";
import { bytes, configEntry, options, TestCluster } from "./raft-harness.ts";

const three = { voters: ["a", "b", "c"], learners: [] };

function follower(id = "b", extra: Parameters<typeof options>[1] = {}): RaftCore {
  return new RaftCore(options(id, extra), { hardState: { term: 2, vote: null, commit: 1 }, snapshot: null, entries: [configEntry(1, 1, three)] });
}

function drain(core: RaftCore): Message[] {
  const out: Message[] = [];
  while (core.hasReady()) {
    const rd = core.ready();
    out.push(...rd.messages);
    core.advance(rd);
  }
  return out;
}

describe("votes", () => {
  test("a node grants at most one vote per term", () => {
    const b = follower();
    b.step({ type: "vote", from: "a", to: "b", term: 3, lastIndex: 1, lastTerm: 1, transfer: false });
    b.step({ type: "vote", from: "c", to: "b", term: 3, lastIndex: 1, lastTerm: 1, transfer: false });
    const out = drain(b);
    expect(out).toEqual([
      { type: "vote_response", from: "b", to: "a", term: 3, reject: false },
      { type: "vote_response", from: "b", to: "c", term: 3, reject: true },
    ]);
    expect(b.status().vote).toBe("a");
  });

  test("the vote is in the Ready's hard state, so it is persisted before the response is sent", () => {
    const b = follower();
    b.step({ type: "vote", from: "a", to: "b", term: 3, lastIndex: 1, lastTerm: 1, transfer: false });
    const rd = b.ready();
    expect(rd.hardState).toEqual({ term: 3, vote: "a", commit: 1 });
    expect(rd.mustSync).toBe(true);
    expect(rd.messages).toHaveLength(1);
  });

  test("a voter refuses a candidate whose log is behind its own", () => {
    const b = new RaftCore(options("b"), {
      hardState: { term: 2, vote: null, commit: 1 },
      snapshot: null,
      entries: [configEntry(1, 1, three), { index: 2, term: 2, kind: "noop", timestampMs: 0, data: new Uint8Array() }],
    });
    b.step({ type: "vote", from: "a", to: "b", term: 3, lastIndex: 5, lastTerm: 1, transfer: false });
    expect(drain(b)).toEqual([{ type: "vote_response", from: "b", to: "a", term: 3, reject: true }]);
    expect(b.status().term).toBe(3);
  });

  test("a vote request from a higher term makes a leader step down", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.elect("a");
    a.core.step({ type: "vote", from: "c", to: "a", term: 10, lastIndex: 100, lastTerm: 9, transfer: false });
    expect(a.core.status().role).toBe("follower");
    expect(a.core.status().term).toBe(10);
  });

  test("a candidate that loses a majority of votes becomes a follower", () => {
    const c = TestCluster.withLogs({ a: [], b: [2], c: [2] });
    const a = c.node("a");
    a.core.campaign();
    c.deliverAll();
    expect(a.core.status().role).toBe("follower");
    expect(c.leaders()).toHaveLength(0);
  });

  test("after a split vote the next election timeout elects a leader", () => {
    const c = new TestCluster(["a", "b", "c"]);
    c.node("a").core.campaign();
    c.node("b").core.campaign();
    c.deliverAll();
    for (let i = 0; i < 100 && c.leaders().length === 0; i++) c.tickAll();
    expect(c.leaders()).toHaveLength(1);
  });

  test("a node with the most up-to-date log is the only one that can win", () => {
    const c = TestCluster.withLogs({ a: [1], b: [1, 1], c: [1, 1] });
    c.node("a").core.campaign();
    c.deliverAll();
    expect(c.node("a").core.status().role).not.toBe("leader");
    c.elect("b");
  });

  test("a follower elects itself only after its randomized election timeout", () => {
    const c = new TestCluster(["a", "b", "c"], { electionTimeoutTicks: 10 });
    c.tickAll(9);
    expect(c.leaders()).toHaveLength(0);
    c.tickAll(11);
    expect(c.leaders()).toHaveLength(1);
  });

  test("a leader's heartbeats keep followers from campaigning", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.elect("a");
    const term = a.core.status().term;
    c.tickAll(200);
    expect(c.leaders()).toEqual([a]);
    expect(a.core.status().term).toBe(term);
  });
});

describe("terms", () => {
  test("follower rejects append from a stale term and tells the sender its term", () => {
    const b = follower("b");
    b.step({ type: "append", from: "a", to: "b", term: 1, prevIndex: 1, prevTerm: 1, commit: 1, entries: [{ index: 2, term: 1, kind: "normal", timestampMs: 0, data: bytes("x") }] });
    expect(b.status().lastIndex).toBe(1);
    expect(b.status().droppedMessages["stale_term"]).toBe(1);
    const out = drain(b);
    expect(out).toHaveLength(1);
    expect(out[0]).toMatchObject({ type: "append_response", to: "a", term: 2 });
  });

  test("a stale leader steps down when a follower answers with a higher term", () => {
    const c = new TestCluster(["a", "b", "c"], { preVote: true });
    const a = c.elect("a");
    c.isolate("a");
    for (let i = 0; i < 100 && c.leaders().length < 2; i++) c.tickAll();
    const other = c.leaders().find((n) => n !== a);
    expect(other).toBeDefined();
    expect(a.core.status().role).toBe("leader");
    c.heal();
    a.core.tick();
    c.deliverAll();
    expect(a.core.status().role).toBe("follower");
    expect(a.core.status().term).toBe(other!.core.status().term);
  });

  test("a vote request from a stale term is answered with our term", () => {
    const b = follower();
    drain(b);
    b.step({ type: "vote", from: "c", to: "b", term: 1, lastIndex: 1, lastTerm: 1, transfer: false });
    expect(drain(b)).toEqual([{ type: "vote_response", from: "b", to: "c", term: 2, reject: true }]);
  });

  test("a message addressed to another node is dropped and counted", () => {
    const b = follower();
    drain(b);
    b.step({ type: "heartbeat", from: "a", to: "c", term: 2, commit: 1, readSeq: 0 });
    expect(b.status().droppedMessages["wrong_recipient"]).toBe(1);
    expect(b.hasReady()).toBe(false);
  });
});

describe("pre-vote", () => {
  test("a partitioned node running pre-votes does not raise its term", () => {
    const c = new TestCluster(["a", "b", "c"], { preVote: true });
    const a = c.elect("a");
    const term = a.core.status().term;
    c.isolate("c");
    c.tickAll(100);
    expect(c.node("c").core.status().term).toBe(term);
    expect(c.node("c").core.status().role).toBe("pre_candidate");
  });

  test("a rejoining node does not disrupt a healthy leader", () => {
    const c = new TestCluster(["a", "b", "c"], { preVote: true, checkQuorum: true });
    const a = c.elect("a");
    const term = a.core.status().term;
    c.isolate("c");
    c.tickAll(100);
    c.heal();
    c.tickAll(100);
    expect(c.leaders()).toEqual([a]);
    expect(a.core.status().term).toBe(term);
    expect(c.node("c").core.status().leaderId).toBe("a");
  });

  test("without pre-vote a rejoining node's higher term forces a new election", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.elect("a");
    const term = a.core.status().term;
    c.isolate("c");
    c.tickAll(100);
    expect(c.node("c").core.status().term).toBeGreaterThan(term);
    c.heal();
    c.tickAll(100);
    expect(c.leaders()[0]?.core.status().term).toBeGreaterThan(term);
  });

  test("pre-vote elects a leader when followers have lost theirs", () => {
    const c = new TestCluster(["a", "b", "c"], { preVote: true, checkQuorum: true });
    const a = c.elect("a");
    c.nodes.delete("a");
    c.tickAll(100);
    expect(c.leaders()).toHaveLength(1);
    expect(c.leaders()[0]).not.toBe(a);
  });

  test("a granted pre-vote changes neither the voter's term nor its vote", () => {
    const b = follower("b", { preVote: true });
    b.step({ type: "pre_vote", from: "a", to: "b", term: 3, lastIndex: 1, lastTerm: 1 });
    expect(drain(b)).toEqual([{ type: "pre_vote_response", from: "b", to: "a", term: 3, reject: false }]);
    expect(b.status().term).toBe(2);
    expect(b.status().vote).toBeNull();
  });
});

describe("leader lease", () => {
  test("a node that may not campaign stops honouring the lease once the leader is silent", () => {
    // A learner never campaigns, but it must still grant a pre-vote once its leader is gone.
    const l = new RaftCore(options("l", { preVote: true }), { hardState: { term: 2, vote: null, commit: 1 }, snapshot: null, entries: [configEntry(1, 1, { voters: ["a", "b"], learners: ["l"] })] });
    l.step({ type: "heartbeat", from: "a", to: "l", term: 2, commit: 1, readSeq: 0 });
    drain(l);
    l.step({ type: "pre_vote", from: "b", to: "l", term: 3, lastIndex: 1, lastTerm: 1 });
    expect(drain(l).filter((m) => m.type === "pre_vote_response")).toEqual([]);
    for (let i = 0; i < 40; i++) l.tick();
    l.step({ type: "pre_vote", from: "b", to: "l", term: 3, lastIndex: 1, lastTerm: 1 });
    expect(drain(l)).toEqual([{ type: "pre_vote_response", from: "l", to: "b", term: 3, reject: false }]);
  });
});

describe("check-quorum", () => {
  test("a leader cut off from its quorum steps down after an election timeout", () => {
    const c = new TestCluster(["a", "b", "c"], { checkQuorum: true, electionTimeoutTicks: 10 });
    const a = c.elect("a");
    c.isolate("a");
    for (let i = 0; i < 25; i++) a.core.tick();
    expect(a.core.status().role).toBe("follower");
  });

  test("a leader that hears from a quorum stays leader", () => {
    const c = new TestCluster(["a", "b", "c"], { checkQuorum: true });
    const a = c.elect("a");
    c.isolate("c");
    c.tickAll(100);
    expect(a.core.status().role).toBe("leader");
  });

  test("a voter that heard from its leader recently ignores a higher-term vote request", () => {
    const c = new TestCluster(["a", "b", "c"], { checkQuorum: true });
    c.elect("a");
    const b = c.node("b").core;
    b.step({ type: "vote", from: "c", to: "b", term: 50, lastIndex: 100, lastTerm: 49, transfer: false });
    expect(b.status().term).toBeLessThan(50);
    expect(b.status().droppedMessages["vote_within_leader_lease"]).toBe(1);
  });
});

describe("leader unreachable", () => {
  test("followers told their leader's port refuses connections elect a new leader within a few ticks", () => {
    const c = new TestCluster(["a", "b", "c"], { preVote: true, checkQuorum: true, electionTimeoutTicks: 10 });
    const a = c.elect("a");
    c.nodes.delete("a");
    // Each follower hears it from its own connection; they take turns, so the votes do not split.
    c.node("b").core.peerUnreachable("a");
    c.node("c").core.peerUnreachable("a");
    let ticks = 0;
    while (c.leaders().length === 0 && ticks < 100) {
      c.tickAll();
      ticks++;
    }
    expect(c.leaders()).toHaveLength(1);
    expect(c.leaders()[0]).not.toBe(a);
    // Without the report the first campaign waits out the election timeout (10 ticks or more).
    expect(ticks).toBeLessThanOrEqual(3);
  });

  test("a report about a member that is not the leader changes nothing", () => {
    const c = new TestCluster(["a", "b", "c"], { preVote: true, checkQuorum: true, electionTimeoutTicks: 10 });
    const a = c.elect("a");
    const term = a.core.status().term;
    c.node("b").core.peerUnreachable("c");
    c.tickAll(5);
    expect(c.leaders()).toEqual([a]);
    expect(c.node("b").core.status().role).toBe("follower");
    expect(a.core.status().term).toBe(term);
  });

  test("to a leader, a member found unreachable goes back to probing (its appends in flight were dropped)", () => {
    const c = new TestCluster(["a", "b", "c"], { preVote: true, checkQuorum: true, electionTimeoutTicks: 10 });
    const a = c.elect("a");
    a.core.propose(new TextEncoder().encode("x"), 0);
    c.deliverAll();
    expect(a.core.status().progress["c"]?.state).toBe("replicate");
    const term = a.core.status().term;
    a.core.peerUnreachable("c");
    expect(a.core.status().progress["c"]?.state).toBe("probe");
    expect(c.leaders()).toEqual([a]);
    expect(a.core.status().term).toBe(term);
  });

  test("a stale report about a leader that is up does not depose it", () => {
    const c = new TestCluster(["a", "b", "c"], { preVote: true, checkQuorum: true, electionTimeoutTicks: 10 });
    const a = c.elect("a");
    const term = a.core.status().term;
    c.node("b").core.peerUnreachable("a");
    c.tickAll(30);
    expect(c.leaders()).toEqual([a]);
    expect(a.core.status().term).toBe(term);
    expect(c.node("b").core.status().leaderId).toBe("a");
  });
});

describe("a node that belongs to no cluster yet", () => {
  test("holds the membership but does not campaign while its campaigns are held, and does once released", () => {
    const b = follower("b", { preVote: true });
    b.holdCampaigns(true);
    for (let i = 0; i < 100; i++) b.tick();
    expect(b.status().role).toBe("follower");
    expect(drain(b).filter((m) => m.type === "pre_vote" || m.type === "vote")).toEqual([]);
    // It still votes for a candidate whose log is as long as its own.
    b.step({ type: "vote", from: "a", to: "b", term: 3, lastIndex: 1, lastTerm: 1, transfer: false });
    expect(drain(b)).toEqual([{ type: "vote_response", from: "b", to: "a", term: 3, reject: false }]);
    b.holdCampaigns(false);
    for (let i = 0; i < 100 && b.status().role === "follower"; i++) b.tick();
    expect(b.status().role).not.toBe("follower");
  });
});
