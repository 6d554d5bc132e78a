import { describe, expect, test } from "bun:test";
import { RaftCore } from "../../src/raft/index.ts";
import type { Message } from "../../src/raft/index.ts";
import { bytes, configEntry, options, TestCluster, TestNode } from "./raft-harness.ts";

const three = { voters: ["a", "b", "c"], learners: [] };

/** A three-node cluster where c missed entries that the leader has compacted away. */
function laggingBehindSnapshot(): { c: TestCluster; a: TestNode; lag: TestNode; snapIndex: number } {
  const c = new TestCluster(["a", "b", "c"]);
  const a = c.elect("a");
  c.isolate("c");
  for (let i = 0; i < 10; i++) a.core.propose(bytes(`v${i}`), 0);
  c.deliverAll();
  const meta = a.compactTo(a.appliedIndex);
  return { c, a, lag: c.node("c"), snapIndex: meta.index };
}

describe("snapshots", () => {
  test("compaction drops entries up to the snapshot index", () => {
    const { a, snapIndex } = laggingBehindSnapshot();
    expect(a.core.status().snapshotIndex).toBe(snapIndex);
    expect(a.core.status().lastIndex).toBe(snapIndex);
  });

  test("a follower behind the leader's compacted log gets a snapshot, then the entries after it", () => {
    const { c, a, lag, snapIndex } = laggingBehindSnapshot();
    const sent: Message[] = [];
    c.heal();
    a.core.propose(bytes("after"), 0);
    a.process();
    const aStep = lag.core.step.bind(lag.core);
    lag.core.step = (m: Message) => {
      sent.push(m);
      aStep(m);
    };
    c.tickAll(3);
    expect(sent.filter((m) => m.type === "snapshot").map((m) => m.type === "snapshot" && m.snapshot.index)).toEqual([snapIndex]);
    expect(lag.disk.snapshot?.index).toBe(snapIndex);
    expect(lag.core.status().commit).toBe(a.core.status().commit);
    expect(lag.appliedTexts()).toEqual(["after"]);
    expect(a.core.status().progress["c"]?.state).toBe("replicate");
  });

  test("the leader holds back appends to a member while its snapshot is in flight", () => {
    const { c, a, lag } = laggingBehindSnapshot();
    c.heal();
    let snapshotsSeen = 0;
    let appendsAfterSnapshot = 0;
    const realStep = lag.core.step.bind(lag.core);
    lag.core.step = (m: Message) => {
      if (m.type === "snapshot") snapshotsSeen++; // the data never arrives: not stepped
      else realStep(m);
      if (m.type === "append" && snapshotsSeen > 0) appendsAfterSnapshot++;
    };
    c.tickAll(5);
    a.core.propose(bytes("more"), 0);
    c.tickAll(5);
    expect(snapshotsSeen).toBe(1);
    expect(appendsAfterSnapshot).toBe(0);
    expect(a.core.status().progress["c"]?.state).toBe("snapshot");
  });

  test("a failed snapshot send puts the member back to probing, and it is sent again", () => {
    const { c, a, lag } = laggingBehindSnapshot();
    c.heal();
    let snapshotsSeen = 0;
    const realStep = lag.core.step.bind(lag.core);
    lag.core.step = (m: Message) => {
      if (m.type === "snapshot") snapshotsSeen++;
      else realStep(m);
    };
    c.tickAll(2);
    expect(a.core.status().progress["c"]?.state).toBe("snapshot");
    a.core.reportSnapshot("c", false);
    expect(a.core.status().progress["c"]?.state).toBe("probe");
    c.tickAll(3);
    expect(snapshotsSeen).toBe(2);
  });

  test("a snapshot install puts the meta in Ready.snapshot and the log starts after it", () => {
    const b = new RaftCore(options("b"), { hardState: { term: 2, vote: null, commit: 1 }, snapshot: null, entries: [configEntry(1, 1, three)] });
    b.advance(b.ready());
    const meta = { index: 50, term: 2, membership: three };
    b.step({ type: "append", from: "a", to: "b", term: 2, prevIndex: 1, prevTerm: 1, commit: 1, entries: [] });
    b.advance(b.ready());
    b.step({ type: "snapshot", from: "a", to: "b", term: 2, snapshot: meta });
    const rd = b.ready();
    expect(rd.snapshot).toEqual(meta);
    expect(rd.committed).toEqual([]);
    expect(rd.hardState?.commit).toBe(50);
    expect(rd.messages).toEqual([{ type: "append_response", from: "b", to: "a", term: 2, reject: false, index: 50, hintIndex: 0, hintTerm: 0 }]);
    b.advance(rd);
    const s = b.status();
    expect(s.snapshotIndex).toBe(50);
    expect(s.lastIndex).toBe(50);
    expect(s.applied).toBe(50);
  });

  test("a snapshot at or below the follower's commit is acknowledged and ignored", () => {
    const b = new RaftCore(options("b"), { hardState: { term: 2, vote: null, commit: 1 }, snapshot: null, entries: [configEntry(1, 1, three)] });
    b.step({ type: "snapshot", from: "a", to: "b", term: 2, snapshot: { index: 1, term: 1, membership: three } });
    const rd = b.ready();
    expect(rd.snapshot).toBeNull();
    expect(rd.messages[0]).toMatchObject({ type: "append_response", index: 1, reject: false });
  });

  test("a follower that holds the snapshot's last entry keeps its log and only advances commit", () => {
    const entries = [configEntry(1, 1, three), ...[2, 3, 4].map((i) => ({ index: i, term: 2, kind: "normal" as const, timestampMs: 0, data: bytes(`${i}`) }))];
    const b = new RaftCore(options("b"), { hardState: { term: 2, vote: null, commit: 1 }, snapshot: null, entries });
    b.step({ type: "snapshot", from: "a", to: "b", term: 2, snapshot: { index: 3, term: 2, membership: three } });
    const rd = b.ready();
    expect(rd.snapshot).toBeNull();
    expect(b.status().commit).toBe(3);
    expect(b.status().lastIndex).toBe(4);
    expect(rd.committed.map((e) => e.index)).toEqual([1, 2, 3]);
  });

  test("an empty node learns its membership from a snapshot and may then campaign", () => {
    const d = new RaftCore(options("d"), { hardState: { term: 0, vote: null, commit: 0 }, snapshot: null, entries: [] });
    d.step({ type: "snapshot", from: "a", to: "d", term: 3, snapshot: { index: 10, term: 3, membership: { voters: ["a", "d"], learners: [] } } });
    expect(d.status().membership.voters).toEqual(["a", "d"]);
    // Not while the snapshot is still to be installed.
    d.campaign();
    expect(d.status().role).toBe("follower");
    d.advance(d.ready());
    d.campaign();
    expect(d.status().role).toBe("candidate");
  });

  test("a node restarted from a snapshot and the entries after it carries on", () => {
    const { c, a } = laggingBehindSnapshot();
    c.heal();
    a.core.propose(bytes("after"), 0);
    c.tickAll(3);
    a.restart();
    expect(a.core.status().snapshotIndex).toBeGreaterThan(0);
    c.tickAll(60);
    const leader = c.leaders()[0]!;
    leader.core.propose(bytes("later"), 0);
    c.tickAll(3);
    expect(c.node("c").appliedTexts()).toEqual(["after", "later"]);
    expect(a.appliedTexts().slice(-2)).toEqual(["after", "later"]);
  });

  test("a snapshot message queued before a newer compaction names the newer snapshot", () => {
    const { c, a } = laggingBehindSnapshot();
    a.core.propose(bytes("more"), 0);
    c.deliverAll(); // c is still cut off; a applies past its snapshot
    const term = a.core.status().term;
    a.core.reportUnreachable("c");
    // c's rejection of a probe makes the leader queue a snapshot message for it.
    a.core.step({ type: "append_response", from: "c", to: "a", term, reject: true, index: 2, hintIndex: 2, hintTerm: 2 });
    expect(a.core.status().progress["c"]?.state).toBe("snapshot");
    const newer = a.compactTo(a.appliedIndex);
    a.process();
    const sent = a.outbox.filter((m): m is Extract<Message, { type: "snapshot" }> => m.type === "snapshot");
    expect(sent.map((m) => m.snapshot.index)).toEqual([newer.index]);
  });

  test("compacting beyond the applied index is refused", () => {
    const n = new TestNode("n1", {}, { hardState: { term: 1, vote: null, commit: 1 }, snapshot: null, entries: [configEntry(1, 1, { voters: ["n1"], learners: [] })] });
    n.core.campaign();
    n.core.propose(bytes("x"), 0);
    expect(() => n.core.compact({ index: 3, term: 2, membership: { voters: ["n1"], learners: [] } })).toThrow();
  });
});
