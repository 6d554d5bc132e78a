// A node removed from the cluster while it was cut off never receives the entry that removed it:
// the members' not_member answer tells it, and it believes it only when that is certain.

import { describe, expect, test } from "bun:test";
import { RaftCore } from "../../src/raft/index.ts";
import type { Entry, Message, NotMemberMessage } from "../../src/raft/index.ts";
import { bytes, configEntry, options, TestCluster, type TestNode } from "./raft-harness.ts";

const realistic = { preVote: true, checkQuorum: true };

/** One tick everywhere, then deliver until quiet; returns every message that was sent. */
function tickRound(c: TestCluster): Message[] {
  const sent: Message[] = [];
  for (const n of c.nodes.values()) n.core.tick();
  for (let round = 0; round < 100; round++) {
    for (const n of c.nodes.values()) n.process();
    const out = [...c.nodes.values()].flatMap((n) => n.outbox.splice(0));
    if (out.length === 0) return sent;
    for (const m of out) {
      sent.push(m);
      if (c.cut.has(m.from < m.to ? `${m.from}|${m.to}` : `${m.to}|${m.from}`)) continue;
      c.nodes.get(m.to)?.core.step(m);
    }
  }
  throw new Error("cluster did not settle");
}

function rounds(c: TestCluster, count: number): Message[] {
  const sent: Message[] = [];
  for (let i = 0; i < count; i++) sent.push(...tickRound(c));
  return sent;
}

/** Three voters a (leader), b, c; c cut off, then removed by a and b. Returns the removal's index. */
function removeWhileCutOff(c: TestCluster): number {
  const a = c.elect("a");
  a.core.propose(bytes("x"), 0);
  c.deliverAll();
  c.isolate("c");
  const removal = a.core.proposeMembership({ kind: "remove", id: "c" }, 0);
  if (!removal.ok) throw new Error(`removal refused: ${JSON.stringify(removal)}`);
  rounds(c, 3);
  expect(a.core.status().commit).toBeGreaterThanOrEqual(removal.index);
  expect(c.node("c").core.status().membership.voters).toContain("c");
  return removal.index;
}

/** Step into `to` a message from `from` and return what `to` answers it with. */
function answer(to: TestNode, m: Message): Message[] {
  to.core.step(m);
  to.process();
  return to.outbox.splice(0);
}

describe("a node removed while cut off", () => {
  test("learns it from a member's refusal once it is back: it stops campaigning, and no member's term moves", () => {
    const c = new TestCluster(["a", "b", "c"], realistic);
    const removalIndex = removeWhileCutOff(c);
    // Cut off, it campaigns (pre-votes that reach no one).
    rounds(c, 30);
    const x = c.node("c");
    expect(x.core.status().role).toBe("pre_candidate");
    const terms = { a: c.node("a").core.status().term, b: c.node("b").core.status().term };

    c.heal();
    const afterHeal = rounds(c, 30);
    const refusal = afterHeal.find((m): m is NotMemberMessage => m.type === "not_member");
    expect(refusal).toMatchObject({ to: "c", configIndex: removalIndex });
    expect(x.core.removalNotice()).toEqual({ configIndex: removalIndex, by: refusal!.from });
    expect(x.core.status().role).toBe("follower");

    const later = rounds(c, 50);
    expect(later.filter((m) => m.from === "c")).toEqual([]);
    expect({ a: c.node("a").core.status().term, b: c.node("b").core.status().term }).toEqual(terms);
    expect(c.node("a").core.status().role).toBe("leader");
  });

  test("a removed node does not campaign, even on leadership transfer, but still answers votes; a restart that loads the notice keeps it so", () => {
    const c = new TestCluster(["a", "b", "c"], realistic);
    const removalIndex = removeWhileCutOff(c);
    c.heal();
    rounds(c, 30);
    const x = c.node("c");
    const notice = x.core.removalNotice();
    expect(notice?.configIndex).toBe(removalIndex);

    // Votes need no membership in Raft: a member wrongly told it was removed must still help elect.
    const term = x.core.status().term + 5;
    expect(answer(x, { type: "pre_vote", from: "b", to: "c", term, lastIndex: 100, lastTerm: term - 1 }).map((m) => m.type)).toEqual(["pre_vote_response"]);
    expect(answer(x, { type: "vote", from: "b", to: "c", term, lastIndex: 100, lastTerm: term - 1, transfer: false })).toMatchObject([{ type: "vote_response", reject: false }]);
    expect(x.core.removalNotice()).toEqual(notice);
    x.core.step({ type: "timeout_now", from: "a", to: "c", term });
    x.core.campaign();
    x.process();
    expect(x.outbox.filter((m) => m.type === "pre_vote" || m.type === "vote")).toEqual([]);

    // A refusal naming an earlier configuration does not undo it.
    answer(x, { type: "not_member", from: "b", to: "c", term, configIndex: 1 });
    expect(x.core.removalNotice()).toEqual(notice);

    const restarted = new RaftCore(options("c", realistic), { ...x.disk, entries: [...x.disk.entries], appliedIndex: x.appliedIndex, removal: notice });
    for (let i = 0; i < 100; i++) restarted.tick();
    expect(restarted.removalNotice()).toEqual(notice);
    expect(restarted.status().role).toBe("follower");
    expect(restarted.hasReady() ? restarted.ready().messages : []).toEqual([]);

    // A notice the loaded log has already reached is forgotten at start: the log speaks for the membership.
    const commit = x.core.status().commit;
    const reached = new RaftCore(options("c", realistic), { ...x.disk, entries: [...x.disk.entries], appliedIndex: x.appliedIndex, removal: { configIndex: commit, by: "b" } });
    expect(reached.removalNotice()).toBeNull();
    expect(reached.removalNotice()).toBeNull();
  });

  test("added back while it still holds its old log, it becomes a member again once its log reaches the configuration that removed it", () => {
    const c = new TestCluster(["a", "b", "c"], realistic);
    const removalIndex = removeWhileCutOff(c);
    c.heal();
    rounds(c, 30);
    const x = c.node("c");
    expect(x.core.removalNotice()).not.toBeNull();
    const a = c.node("a");
    expect(a.core.proposeMembership({ kind: "add_learner", id: "c" }, 0).ok).toBe(true);
    rounds(c, 5);
    expect(x.core.status().commit).toBeGreaterThan(removalIndex);
    expect(x.core.removalNotice()).toBeNull();
    expect(x.core.status().membership.learners).toEqual(["c"]);
  });

  test("a member whose committed configuration predates the one that added a node never makes that node think it was removed", () => {
    const c = new TestCluster(["a", "b", "c"], realistic);
    const a = c.elect("a");
    // c lags: it is cut off while d is added as a learner, then promoted.
    c.isolate("c");
    const d = c.add("d", realistic);
    expect(a.core.proposeMembership({ kind: "add_learner", id: "d" }, 0).ok).toBe(true);
    rounds(c, 3);
    expect(a.core.proposeMembership({ kind: "promote", id: "d" }, 0).ok).toBe(true);
    rounds(c, 3);
    expect(d.core.status().membership.voters).toContain("d");
    const lagging = c.node("c");
    expect(lagging.core.status().membership.voters).not.toContain("d");

    // d's traffic reaches c (a leader change would have d campaign): c answers not_member,
    // naming a configuration older than d's, and d ignores it.
    const status = d.core.status();
    const refusals = answer(lagging, { type: "pre_vote", from: "d", to: "c", term: status.term + 1, lastIndex: status.lastIndex, lastTerm: status.lastTerm });
    const refusal = refusals.find((m) => m.type === "not_member");
    expect(refusal).toMatchObject({ from: "c", to: "d", configIndex: 1 });
    d.core.step(refusal!);
    expect(d.core.removalNotice()).toBeNull();
    expect(d.core.status().droppedMessages["not_member_stale"]).toBe(1);

    // With the leader gone, the others elect one (c's refusals of d notwithstanding).
    c.nodes.delete("a");
    c.heal();
    rounds(c, 60);
    expect(["b", "c", "d"].filter((id) => c.node(id).core.status().role === "leader")).toHaveLength(1);
    expect(d.core.removalNotice()).toBeNull();
  });

  test("a new member still copying the log from before it was added ignores a refusal, however late its configuration", () => {
    const c = new TestCluster(["a", "b", "c"], realistic);
    c.elect("a");
    const d = c.add("d", realistic);
    d.core.step({ type: "not_member", from: "b", to: "d", term: 1, configIndex: 1_000 });
    expect(d.core.removalNotice()).toBeNull();
    // A member named in a configuration it holds at index 1 takes a refusal naming index 1 as stale too.
    const b = c.node("b");
    b.core.step({ type: "not_member", from: "a", to: "b", term: 1, configIndex: 1 });
    expect(b.core.removalNotice()).toBeNull();
    expect(b.core.status().droppedMessages["not_member_stale"]).toBe(1);
  });

  test("a member refuses a non-member at most once per election timeout, and never one its latest configuration is adding", () => {
    const c = new TestCluster(["a", "b", "c"], realistic);
    const a = c.elect("a");
    const b = c.node("b");
    const status = b.core.status();
    const preVote = (from: string): Message => ({ type: "pre_vote", from, to: "b", term: status.term + 1, lastIndex: 0, lastTerm: 0 });
    const first = answer(b, preVote("z"));
    expect(first.filter((m) => m.type === "not_member")).toHaveLength(1);
    for (let i = 0; i < 5; i++) expect(answer(b, preVote("z")).filter((m) => m.type === "not_member")).toEqual([]);
    for (let i = 0; i < 10; i++) b.core.tick();
    b.process();
    b.outbox.splice(0);
    expect(answer(b, preVote("z")).filter((m) => m.type === "not_member")).toHaveLength(1);

    // d is being added (the entry is in b's log, not yet committed there): b does not refuse it.
    c.add("d", realistic);
    c.cut.add("a|c");
    expect(a.core.proposeMembership({ kind: "add_learner", id: "d" }, 0).ok).toBe(true);
    a.process();
    for (const m of a.outbox.splice(0)) if (m.to === "b") b.core.step(m);
    expect(b.core.status().membership.learners).toEqual(["d"]);
    expect(answer(b, preVote("d")).filter((m) => m.type === "not_member")).toEqual([]);
  });

  test("a refusal is never sent for a refusal, nor by a node with no configuration entry to name", () => {
    const fresh = new RaftCore(options("n", realistic), { hardState: { term: 1, vote: null, commit: 0 }, snapshot: null, entries: [], membership: { voters: ["n", "m"], learners: [] } });
    fresh.step({ type: "pre_vote", from: "z", to: "n", term: 2, lastIndex: 0, lastTerm: 0 });
    expect(fresh.hasReady() ? fresh.ready().messages.filter((m) => m.type === "not_member") : []).toEqual([]);
    const member = new RaftCore(options("b", realistic), { hardState: { term: 1, vote: null, commit: 1 }, snapshot: null, entries: [configEntry(1, 1, { voters: ["a", "b"], learners: [] })] });
    member.step({ type: "not_member", from: "z", to: "b", term: 1, configIndex: 1 });
    expect(member.hasReady() ? member.ready().messages : []).toEqual([]);
  });
});

describe("a member wrongly told it was removed", () => {
  /** Five voters a, b, c, d, x: the log up to n (config at 1), then `extra`. */
  function log(n: number, extra: Entry[] = []): Entry[] {
    const entries: Entry[] = [configEntry(1, 1, { voters: ["a", "b", "c", "d", "x"], learners: [] })];
    for (let i = 2; i <= n; i++) entries.push({ index: i, term: 1, kind: "normal", timestampMs: 0, data: bytes(`${i}`) });
    return [...entries, ...extra];
  }

  /** One tick of every core, then its messages delivered (persisting as it goes) until none is sent. */
  function tickAndDeliver(nodes: ReadonlyMap<string, RaftCore>): void {
    for (const n of nodes.values()) n.tick();
    for (let round = 0; round < 50; round++) {
      const out: Message[] = [];
      for (const n of nodes.values()) {
        while (n.hasReady()) {
          const rd = n.ready();
          out.push(...rd.messages);
          n.advance(rd);
        }
      }
      if (out.length === 0) return;
      for (const m of out) nodes.get(m.to)?.step(m);
    }
  }

  test("x, removed at 100 and added back (learner 101, voter 102) with its old log, is told removed by c, which lags at 100: b, c and x still elect a leader, whose appends lift the notice", () => {
    const removed = configEntry(100, 1, { voters: ["a", "b", "c", "d"], learners: [] });
    const learner = configEntry(101, 1, { voters: ["a", "b", "c", "d"], learners: ["x"] });
    const voter = configEntry(102, 1, { voters: ["a", "b", "c", "d", "x"], learners: [] });
    // a and d are down. x still holds its log from before its removal (through 95).
    const nodes = new Map<string, RaftCore>([
      ["x", new RaftCore(options("x", realistic), { hardState: { term: 1, vote: null, commit: 95 }, snapshot: null, entries: log(95) })],
      ["c", new RaftCore(options("c", realistic), { hardState: { term: 1, vote: null, commit: 100 }, snapshot: null, entries: log(99, [removed]) })],
      ["b", new RaftCore(options("b", realistic), { hardState: { term: 1, vote: null, commit: 102 }, snapshot: null, entries: log(99, [removed, learner, voter]) })],
    ]);
    let toldRemoved = false;
    let leader: string | null = null;
    for (let tick = 0; tick < 3000 && leader === null; tick++) {
      tickAndDeliver(nodes);
      if (nodes.get("x")!.removalNotice() !== null) toldRemoved = true;
      for (const [id, n] of nodes) if (n.status().role === "leader") leader = id;
    }
    expect(toldRemoved).toBe(true);
    expect(leader).toBe("b");
    // The leader replicates to x (its configuration names x): the notice is past.
    for (let tick = 0; tick < 50; tick++) tickAndDeliver(nodes);
    expect(nodes.get("x")!.removalNotice()).toBeNull();
    expect(nodes.get("x")!.status().commit).toBeGreaterThanOrEqual(102);
  });

  test("a refusal from a node outside this node's own latest configuration is not believed", () => {
    const c = new TestCluster(["a", "b", "c"], realistic);
    const x = c.node("c");
    c.elect("a");
    expect(answer(x, { type: "not_member", from: "zz", to: "c", term: x.core.status().term, configIndex: 1_000 })).toEqual([]);
    expect(x.core.removalNotice()).toBeNull();
  });
});
