import { describe, expect, test } from "bun:test";
import { RaftCore, encodeMembership } from "../../src/raft/index.ts";
import type { Entry } from "../../src/raft/index.ts";
import { bytes, configEntry, options, TestCluster } from "./raft-harness.ts";

function settle(c: TestCluster, ticks = 3): void {
  c.deliverAll();
  c.tickAll(ticks);
}

describe("membership changes", () => {
  test("an added learner receives the log but never counts for the quorum", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.elect("a");
    const d = c.add("d");
    expect(a.core.proposeMembership({ kind: "add_learner", id: "d" }, 0).ok).toBe(true);
    settle(c);
    a.core.propose(bytes("x"), 0);
    settle(c);
    expect(d.appliedTexts()).toEqual(["x"]);
    expect(d.core.status().membership).toEqual({ voters: ["a", "b", "c"], learners: ["d"] });
    c.isolate("b");
    c.cut.add("a|c");
    a.core.propose(bytes("y"), 0);
    settle(c);
    expect(d.core.status().lastIndex).toBe(a.core.status().lastIndex);
    expect(a.appliedTexts()).toEqual(["x"]);
  });

  test("a promoted learner counts for the quorum", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.elect("a");
    c.add("d");
    a.core.proposeMembership({ kind: "add_learner", id: "d" }, 0);
    settle(c);
    expect(a.core.proposeMembership({ kind: "promote", id: "d" }, 0).ok).toBe(true);
    settle(c);
    expect(a.core.status().membership.voters).toContain("d");
    // Four voters: a quorum is three. With c cut off, a, b and d commit.
    c.isolate("c");
    a.core.propose(bytes("y"), 0);
    settle(c);
    expect(a.appliedTexts()).toEqual(["y"]);
  });

  test("an empty node added as a voter catches up and can then be elected", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.elect("a");
    a.core.propose(bytes("x"), 0);
    c.deliverAll();
    const d = c.add("d");
    expect(a.core.proposeMembership({ kind: "add_voter", id: "d" }, 0).ok).toBe(true);
    settle(c);
    expect(d.appliedTexts()).toEqual(["x"]);
    expect(d.core.status().membership.voters).toEqual(["a", "b", "c", "d"]);
    c.nodes.delete("a");
    d.core.campaign();
    c.deliverAll();
    expect(d.core.status().role).toBe("leader");
  });

  test("a second change is refused while the first is not committed", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.elect("a");
    c.isolate("a");
    expect(a.core.proposeMembership({ kind: "add_learner", id: "d" }, 0).ok).toBe(true);
    expect(a.core.proposeMembership({ kind: "add_learner", id: "e" }, 0)).toEqual({ ok: false, code: "CHANGE_IN_PROGRESS" });
    c.heal();
    settle(c);
    expect(a.core.proposeMembership({ kind: "add_learner", id: "e" }, 0).ok).toBe(true);
  });

  test("a new leader refuses changes until it has committed an entry of its term", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.electWithoutAppends("a");
    expect(a.core.status().role).toBe("leader");
    expect(a.core.proposeMembership({ kind: "add_learner", id: "d" }, 0)).toEqual({ ok: false, code: "CHANGE_IN_PROGRESS" });
  });

  test("changes that make no sense are refused with INVALID_CHANGE", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.elect("a");
    for (const change of [
      { kind: "add_voter", id: "b" },
      { kind: "add_learner", id: "c" },
      { kind: "promote", id: "b" },
      { kind: "remove", id: "z" },
    ] as const) {
      expect(a.core.proposeMembership(change, 0)).toMatchObject({ ok: false, code: "INVALID_CHANGE" });
    }
  });

  test("a change whose new voters could not commit (too few heard within an election timeout) is refused", () => {
    const c = new TestCluster(["a", "b", "c", "d", "e"]);
    const a = c.elect("a");
    a.core.propose(bytes("x"), 0);
    settle(c);
    // d and e stop answering.
    c.isolate("d");
    c.isolate("e");
    settle(c, 30);
    expect(a.core.status().role).toBe("leader");
    // Removing a live voter would leave four, of which two answer: refused, naming the silent ones.
    const refused = a.core.proposeMembership({ kind: "remove", id: "b" }, 0);
    expect(refused).toMatchObject({ ok: false, code: "INVALID_CHANGE" });
    expect(!refused.ok && refused.code === "INVALID_CHANGE" && refused.reason).toContain("d, e have not answered");
    // Removing a silent one leaves four of which three answer: allowed; then the other.
    expect(a.core.proposeMembership({ kind: "remove", id: "d" }, 0).ok).toBe(true);
    settle(c);
    expect(a.core.proposeMembership({ kind: "remove", id: "e" }, 0).ok).toBe(true);
    settle(c);
    expect(a.core.status().membership.voters).toEqual(["a", "b", "c"]);
  });

  test("a learner is promoted only once it answers and holds (nearly) all that is committed", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.elect("a");
    for (let i = 0; i < 20; i++) a.core.propose(bytes(`x${i}`), 0);
    settle(c);
    c.add("d");
    c.isolate("d");
    expect(a.core.proposeMembership({ kind: "add_learner", id: "d" }, 0).ok).toBe(true);
    settle(c);
    // Never heard from: refused.
    const silent = a.core.proposeMembership({ kind: "promote", id: "d" }, 0);
    expect(!silent.ok && silent.code === "INVALID_CHANGE" && silent.reason).toContain("has not answered");
    c.heal();
    settle(c);
    expect(a.core.proposeMembership({ kind: "promote", id: "d" }, 0).ok).toBe(true);
    settle(c);
    expect(a.core.status().membership.voters).toContain("d");
  });

  test("the last voter cannot be removed", () => {
    const c = new TestCluster(["a"]);
    const a = c.elect("a");
    expect(a.core.proposeMembership({ kind: "remove", id: "a" }, 0)).toMatchObject({ ok: false, code: "INVALID_CHANGE" });
  });

  test("a follower uses a config entry as soon as it is appended, before it commits", () => {
    const b = new RaftCore(options("b"), { hardState: { term: 2, vote: null, commit: 1 }, snapshot: null, entries: [configEntry(1, 1, { voters: ["a", "b", "c"], learners: [] })] });
    b.step({ type: "append", from: "a", to: "b", term: 2, prevIndex: 1, prevTerm: 1, commit: 1, entries: [configEntry(2, 2, { voters: ["a", "b", "c", "d"], learners: [] })] });
    expect(b.status().commit).toBe(1);
    expect(b.status().membership.voters).toEqual(["a", "b", "c", "d"]);
  });

  test("a truncated config entry reverts the membership to the previous one", () => {
    const b = new RaftCore(options("b"), { hardState: { term: 2, vote: null, commit: 1 }, snapshot: null, entries: [configEntry(1, 1, { voters: ["a", "b", "c"], learners: [] })] });
    b.step({ type: "append", from: "a", to: "b", term: 2, prevIndex: 1, prevTerm: 1, commit: 1, entries: [configEntry(2, 2, { voters: ["a", "b", "c", "d"], learners: [] })] });
    const noop: Entry = { index: 2, term: 3, kind: "noop", timestampMs: 0, data: new Uint8Array() };
    b.step({ type: "append", from: "c", to: "b", term: 3, prevIndex: 1, prevTerm: 1, commit: 1, entries: [noop] });
    expect(b.status().membership.voters).toEqual(["a", "b", "c"]);
  });

  test("a config entry with an unreadable membership is ignored and counted", () => {
    const bad: Entry = { index: 2, term: 2, kind: "config", timestampMs: 0, data: bytes("not json") };
    const b = new RaftCore(options("b"), { hardState: { term: 2, vote: null, commit: 1 }, snapshot: null, entries: [configEntry(1, 1, { voters: ["a", "b"], learners: [] })] });
    b.step({ type: "append", from: "a", to: "b", term: 2, prevIndex: 1, prevTerm: 1, commit: 1, entries: [bad] });
    expect(b.status().membership.voters).toEqual(["a", "b"]);
    expect(b.status().droppedMessages["malformed_config_entry"]).toBe(1);
  });

  test("a removed leader steps down once the change commits and the rest elect a new leader", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.elect("a");
    expect(a.core.proposeMembership({ kind: "remove", id: "a" }, 0).ok).toBe(true);
    c.deliverAll();
    expect(a.core.status().role).toBe("follower");
    expect(a.core.status().membership.voters).toEqual(["b", "c"]);
    c.tickAll(60);
    const leaders = c.leaders();
    expect(leaders).toHaveLength(1);
    expect(leaders[0]!.id).not.toBe("a");
    leaders[0]!.core.propose(bytes("z"), 0);
    settle(c);
    expect(c.node("b").appliedTexts()).toEqual(["z"]);
  });

  test("a removed leader hands over as it steps down: a voter holding the whole log campaigns at once, with no election timeout", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.elect("a");
    a.core.propose(bytes("x"), 0);
    settle(c);
    expect(a.core.proposeMembership({ kind: "remove", id: "a" }, 0).ok).toBe(true);
    // No tick: only messages. Before, b and c waited out an election timeout (ticks) first.
    c.deliverAll();
    expect(a.core.status().role).toBe("follower");
    const leaders = c.leaders();
    expect(leaders.map((n) => n.id)).toEqual(["b"]);
    leaders[0]!.core.propose(bytes("z"), 0);
    c.deliverAll();
    expect(c.node("c").appliedTexts()).toEqual(["x", "z"]);
  });

  test("a leader that removes itself leads until the removal commits, and that takes the remaining voters: it must not be stopped before", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.elect("a");
    c.isolate("b");
    c.isolate("c");
    const r = a.core.proposeMembership({ kind: "remove", id: "a" }, 0);
    expect(r.ok).toBe(true);
    const index = r.ok ? r.index : 0;
    c.deliverAll();
    // The latest membership already leaves a out; the committed one, in force at the commit
    // index, still names it: a is the only node that holds the change and must carry it on.
    const s = a.core.status();
    expect(s.role).toBe("leader");
    expect(s.membership.voters).toEqual(["b", "c"]);
    expect(s.commit).toBeLessThan(index);
    expect(a.core.membershipAt(s.commit).voters).toContain("a");
    // Both remaining voters must hold it: b alone is not a majority of {b, c}.
    c.heal();
    c.isolate("c");
    c.tickAll(2);
    expect(a.core.status()).toMatchObject({ role: "leader" });
    expect(a.core.status().commit).toBeLessThan(index);
    c.heal();
    c.tickAll(2);
    expect(a.core.status().commit).toBeGreaterThanOrEqual(index);
    expect(a.core.status().role).toBe("follower");
    expect(a.core.membershipAt(a.core.status().commit).voters).toEqual(["b", "c"]);
  });

  test("a new member copying the log from before it was added is named by no configuration it holds; a removed one is", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.elect("a");
    // d holds only the log from before its addition: it was not removed, it is not there yet.
    const early = new RaftCore(options("d"), { hardState: { term: 1, vote: null, commit: 0 }, snapshot: null, entries: [configEntry(1, 1, { voters: ["a", "b", "c"], learners: [] })] });
    expect(early.namedInMembership()).toBe(false);
    a.core.proposeMembership({ kind: "remove", id: "c" }, 0);
    settle(c);
    expect(c.node("c").core.currentMembership().voters).not.toContain("c");
    expect(c.node("c").core.namedInMembership()).toBe(true);
  });

  test("a removed follower never campaigns and no longer receives entries", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.elect("a");
    a.core.proposeMembership({ kind: "remove", id: "c" }, 0);
    settle(c);
    const removed = c.node("c");
    const term = removed.core.status().term;
    a.core.propose(bytes("after"), 0);
    c.tickAll(100);
    expect(removed.core.status().term).toBe(term);
    expect(removed.appliedTexts()).toEqual([]);
    expect(a.core.status().progress["c"]).toBeUndefined();
  });

  test("the membership encoding round trips through a config entry", () => {
    const m = { voters: ["a", "b"], learners: ["c"] };
    const core = new RaftCore(options("a"), { hardState: { term: 1, vote: null, commit: 1 }, snapshot: null, entries: [{ index: 1, term: 1, kind: "config", timestampMs: 0, data: encodeMembership(m) }] });
    expect(core.status().membership).toEqual(m);
    expect(core.membershipAt(1)).toEqual(m);
  });
});

describe("leadership transfer", () => {
  test("a transfer to an up-to-date voter makes it leader at once", () => {
    const c = new TestCluster(["a", "b", "c"], { preVote: true, checkQuorum: true });
    const a = c.elect("a");
    expect(a.core.transferLeadership("b")).toEqual({ ok: true });
    c.deliverAll();
    expect(c.node("b").core.status().role).toBe("leader");
    expect(a.core.status().role).toBe("follower");
    expect(a.core.status().leaderId).toBe("b");
  });

  test("a transfer to a lagging voter waits until it has caught up", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.elect("a");
    c.isolate("b");
    a.core.propose(bytes("x"), 0);
    c.deliverAll();
    expect(a.core.transferLeadership("b").ok).toBe(true);
    c.deliverAll();
    expect(a.core.status().role).toBe("leader");
    c.heal();
    c.tickAll(3);
    expect(c.node("b").core.status().role).toBe("leader");
    expect(c.node("b").appliedTexts()).toEqual(["x"]);
  });

  test("proposals are refused while a transfer is in progress", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.elect("a");
    c.isolate("b");
    a.core.transferLeadership("b");
    expect(a.core.propose(bytes("x"), 0)).toEqual({ ok: false, code: "NOT_LEADER", leaderId: null });
  });

  test("a transfer that does not complete is abandoned after an election timeout", () => {
    const c = new TestCluster(["a", "b", "c"], { electionTimeoutTicks: 10 });
    const a = c.elect("a");
    c.isolate("b");
    a.core.transferLeadership("b");
    for (let i = 0; i < 10; i++) a.core.tick();
    expect(a.core.status().leadTransferee).toBeNull();
    expect(a.core.propose(bytes("x"), 0).ok).toBe(true);
  });

  test("a transfer to the leader itself holds already, and calls off a transfer away in progress", () => {
    const c = new TestCluster(["a", "b", "c"]);
    const a = c.elect("a");
    expect(a.core.transferLeadership("a")).toEqual({ ok: true });
    c.isolate("b");
    a.core.propose(bytes("x"), 0);
    c.deliverAll();
    expect(a.core.transferLeadership("b").ok).toBe(true);
    expect(a.core.propose(bytes("y"), 0).ok).toBe(false);
    // The latest request wins: a stays, takes proposals again, and b does not take over once back.
    expect(a.core.transferLeadership("a")).toEqual({ ok: true });
    expect(a.core.status().leadTransferee).toBeNull();
    expect(a.core.propose(bytes("y"), 0).ok).toBe(true);
    c.heal();
    c.tickAll(3);
    c.deliverAll();
    expect(a.core.status().role).toBe("leader");
    expect(c.node("b").core.status().role).toBe("follower");
  });

  test("a transfer to a learner or a stranger is refused", () => {
    const c = new TestCluster(["a", "b", "c"], {}, { voters: ["a", "b"], learners: ["c"] });
    const a = c.elect("a");
    expect(a.core.transferLeadership("c")).toMatchObject({ ok: false, code: "INVALID_TRANSFER", reason: "c is a learner: promote it first" });
    expect(a.core.transferLeadership("z")).toMatchObject({ ok: false, code: "INVALID_TRANSFER", reason: "z is not a member of the cluster" });
    expect(c.node("b").core.transferLeadership("b")).toEqual({ ok: false, code: "NOT_LEADER", leaderId: "a" });
  });
});

describe("membership change refusals name what is wrong", () => {
  test("promote: a voter is one already; an id that is no member is told to be added first", async () => {
    const { applyChange } = await import("../../src/raft/membership.ts");
    const m = { voters: ["n1", "n2"], learners: ["n3"] };
    expect(applyChange(m, { kind: "promote", id: "n1" })).toEqual({ ok: false, reason: "n1 is a voter already" });
    expect(applyChange(m, { kind: "promote", id: "nz" })).toEqual({ ok: false, reason: "nz is not a member of the cluster (add it with add-node)" });
    expect(applyChange(m, { kind: "promote", id: "n3" })).toEqual({ ok: true, membership: { voters: ["n1", "n2", "n3"], learners: [] } });
  });
});
