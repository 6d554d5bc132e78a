// A member that lost log entries it had acknowledged (SPEC §4.6: its WAL emptied, or all of
// its Raft state removed) while the cluster is quiet: no new entry will ever make the leader
// look at that member's log again, so the member must say what it lacks on the first
// heartbeat, and the leader must probe and send the log or a snapshot.

import { describe, expect, test } from "bun:test";
import type { Message } from "../../src/raft/index.ts";
import { bytes, TestCluster, TestNode } from "./raft-harness.ts";

/** Three nodes, a leads, five entries everywhere, then nothing more is written. */
function quietCluster(): { c: TestCluster; a: TestNode } {
  const c = new TestCluster(["a", "b", "c"]);
  const a = c.elect("a");
  for (let i = 0; i < 5; i++) a.core.propose(bytes(`v${i}`), 0);
  c.deliverAll();
  c.tickAll(2);
  return { c, a };
}

/**
 * Restart `n` as the node does after its WAL was emptied: the log keeps only the node's newest
 * snapshot (if any), commit falls back to it, term and vote stay.
 */
function loseLog(n: TestNode): void {
  const base = n.disk.snapshot?.index ?? 0;
  n.disk.entries = [];
  n.disk.hardState = { ...n.disk.hardState, commit: base };
  n.applied = n.applied.filter((e) => e.index <= base);
  n.appliedIndex = base;
  n.restart();
}

/** Restart `n` with nothing at all, as after a full state rebuild (raft/ and store/ removed). */
function loseEverything(n: TestNode): void {
  n.disk = { hardState: { term: 0, vote: null, commit: 0 }, snapshot: null, entries: [] };
  n.applied = [];
  n.appliedIndex = 0;
  n.restart();
}

/** Records every message `n` is stepped with. */
function recordInbound(n: TestNode): Message[] {
  const seen: Message[] = [];
  const step = n.core.step.bind(n.core);
  n.core.step = (m: Message) => {
    seen.push(m);
    step(m);
  };
  return seen;
}

describe("a member that lost log entries it acknowledged", () => {
  test("a follower whose log is shorter than the leader's heartbeat commit answers with a rejection naming its last index", () => {
    const { c, a } = quietCluster();
    const b = c.node("b");
    loseLog(b);
    const commit = a.core.status().commit;
    b.core.step({ type: "heartbeat", from: "a", to: "b", term: a.core.status().term, commit, readSeq: 0 });
    b.process();
    expect(b.outbox).toContainEqual(expect.objectContaining({ type: "append_response", to: "a", reject: true, index: commit, hintIndex: 0 }));
  });

  test("on a quiet cluster the leader sends the lost entries again after the next heartbeat", () => {
    const { c, a } = quietCluster();
    const b = c.node("b");
    loseLog(b);
    expect(b.core.status().lastIndex).toBe(0);
    c.tickAll(3);
    const leaderStatus = a.core.status();
    expect(b.core.status().lastIndex).toBe(leaderStatus.lastIndex);
    expect(b.core.status().commit).toBe(leaderStatus.commit);
    expect(b.appliedTexts()).toEqual(["v0", "v1", "v2", "v3", "v4"]);
    expect(leaderStatus.progress["b"]).toMatchObject({ state: "replicate", match: leaderStatus.lastIndex });
  });

  test("under continuing writes too, when the leader has not compacted past what the follower acknowledged", () => {
    // A probe at the old match is rejected, and probing never went below match + 1: only a
    // compaction past it (which sends a snapshot) used to bring the follower back.
    const { c, a } = quietCluster();
    const b = c.node("b");
    loseLog(b);
    for (let i = 0; i < 3; i++) {
      a.core.propose(bytes(`w${i}`), 0);
      c.tickAll(2);
    }
    expect(b.appliedTexts()).toEqual(["v0", "v1", "v2", "v3", "v4", "w0", "w1", "w2"]);
  });

  test("the leader's belief is corrected also when it had already noticed the follower was unreachable", () => {
    const { c, a } = quietCluster();
    a.core.reportUnreachable("b");
    expect(a.core.status().progress["b"]?.state).toBe("probe");
    const b = c.node("b");
    loseLog(b);
    c.tickAll(3);
    expect(b.appliedTexts()).toEqual(["v0", "v1", "v2", "v3", "v4"]);
    expect(a.core.status().progress["b"]?.state).toBe("replicate");
  });

  test("a follower that kept an older snapshot gets the entries after it", () => {
    const { c, a } = quietCluster();
    const b = c.node("b");
    const snap = b.compactTo(3);
    loseLog(b);
    expect(b.core.status().lastIndex).toBe(snap.index);
    c.tickAll(3);
    expect(b.core.status().lastIndex).toBe(a.core.status().lastIndex);
    expect(b.disk.snapshot?.index).toBe(snap.index);
    expect(b.appliedTexts()).toEqual(["v0", "v1", "v2", "v3", "v4"]);
    expect(b.appliedIndex).toBe(a.core.status().commit);
  });

  test("when the leader compacted past what the follower still holds, it sends a snapshot", () => {
    const { c, a } = quietCluster();
    const meta = a.compactTo(a.appliedIndex);
    const b = c.node("b");
    loseLog(b);
    const inbound = recordInbound(b);
    c.tickAll(3);
    expect(inbound.filter((m) => m.type === "snapshot").map((m) => m.type === "snapshot" && m.snapshot.index)).toEqual([meta.index]);
    expect(b.disk.snapshot?.index).toBe(meta.index);
    expect(b.core.status().commit).toBe(a.core.status().commit);
    expect(a.core.status().progress["b"]?.state).toBe("replicate");
  });

  test("a follower restarted with no state at all (full rebuild) is sent the log from the start", () => {
    const { c, a } = quietCluster();
    const b = c.node("b");
    loseEverything(b);
    expect(b.core.status().membership.voters).toEqual([]);
    c.tickAll(3);
    expect(b.core.status().lastIndex).toBe(a.core.status().lastIndex);
    expect(b.core.status().membership.voters).toEqual(["a", "b", "c"]);
    expect(b.appliedTexts()).toEqual(["v0", "v1", "v2", "v3", "v4"]);
  });

  test("a follower restarted with no state at all gets a snapshot when the leader compacted its log", () => {
    const { c, a } = quietCluster();
    const meta = a.compactTo(a.appliedIndex);
    const b = c.node("b");
    loseEverything(b);
    c.tickAll(3);
    expect(b.disk.snapshot?.index).toBe(meta.index);
    expect(b.core.status().membership.voters).toEqual(["a", "b", "c"]);
    expect(b.core.status().commit).toBe(a.core.status().commit);
  });

  test("a former leader that lost its log catches up from the new leader on a quiet cluster", () => {
    const { c, a } = quietCluster();
    const held = a.core.status().lastIndex;
    // a goes down; b leads; a comes back with its WAL emptied (a real node does not tick
    // while it lacks what it held, so it never campaigns: the test does not tick it early).
    c.isolate("a");
    const b = c.elect("b");
    c.deliverAll();
    loseLog(a);
    c.heal();
    c.tickAll(3);
    expect(b.core.status().role).toBe("leader");
    expect(a.core.status().lastIndex).toBe(b.core.status().lastIndex);
    expect(a.core.status().lastIndex).toBeGreaterThan(held);
    expect(a.appliedTexts()).toEqual(["v0", "v1", "v2", "v3", "v4"]);
  });

  test("a stale rejection below what the follower acknowledged costs a probe, not the follower's progress", () => {
    const { c, a } = quietCluster();
    const before = a.core.status().progress["b"]!;
    expect(before.state).toBe("replicate");
    const inbound = recordInbound(c.node("b"));
    // An answer to an append from long ago, when b lacked index 2.
    a.core.step({ type: "append_response", from: "b", to: "a", term: a.core.status().term, reject: true, index: 2, hintIndex: 1, hintTerm: 1 });
    c.tickAll(3);
    const after = a.core.status().progress["b"]!;
    expect(after).toMatchObject({ state: "replicate", match: before.match });
    expect(inbound.filter((m) => m.type === "append" && m.entries.length > 0)).toEqual([]);
    expect(inbound.filter((m) => m.type === "snapshot")).toEqual([]);
  });
});
