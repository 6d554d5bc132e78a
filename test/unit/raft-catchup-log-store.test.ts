// A member behind the leader's in-memory log is sent the entries it needs from the leader's
// log store (read by the node on request, Ready.fetches → fetched), paced by its in-flight
// window; only when the log store no longer holds them does it get a snapshot.

import { describe, expect, test } from "bun:test";
import type { LogFetch, Message, RaftOptions } from "../../src/raft/index.ts";
import { bytes, TestCluster, TestNode } from "./raft-harness.ts";

const fromLogStore: Partial<RaftOptions> = { catchUpFromLogStore: true };

/** a leads a, b, c; c missed `count` entries, which a has compacted from memory (its log store keeps them). */
function laggingBehindMemory(opts: Partial<RaftOptions> = fromLogStore, count = 10, size = 8): { c: TestCluster; a: TestNode; lag: TestNode; snapIndex: number } {
  const c = new TestCluster(["a", "b", "c"], opts);
  const a = c.elect("a");
  c.isolate("c");
  for (let i = 0; i < count; i++) a.core.propose(bytes(`v${i}`.padEnd(size, ".")), 0);
  c.deliverAll();
  const meta = a.compactTo(a.appliedIndex);
  c.heal();
  return { c, a, lag: c.node("c"), snapIndex: meta.index };
}

/** Records what reaches `node` (and still steps it). */
function watch(node: TestNode): Message[] {
  const seen: Message[] = [];
  const step = node.core.step.bind(node.core);
  node.core.step = (m: Message) => {
    seen.push(m);
    step(m);
  };
  return seen;
}

describe("catch-up from the log store", () => {
  test("a member behind the in-memory log is asked for from the log store instead of being sent a snapshot", () => {
    const { c, a } = laggingBehindMemory();
    c.tickAll(2);
    expect(a.fetches.length).toBe(1);
    const f = a.fetches[0]!;
    expect(f.to).toBe("c");
    expect(f.through).toBe(a.core.status().snapshotIndex);
    expect(f.from).toBeLessThanOrEqual(f.through);
    expect(a.core.status().progress["c"]?.state).not.toBe("snapshot");
  });

  test("the entries read back reach the member as appends: it ends with the leader's log and no snapshot is sent", () => {
    const { c, a, lag } = laggingBehindMemory();
    const seen = watch(lag);
    c.tickAll(2);
    c.deliverAllWithLogStore();
    a.core.propose(bytes("after"), 0);
    c.deliverAllWithLogStore();
    expect(seen.some((m) => m.type === "snapshot")).toBe(false);
    expect(seen.some((m) => m.type === "append" && m.entries.length > 0)).toBe(true);
    expect(lag.disk.snapshot).toBe(null);
    expect(lag.appliedTexts()).toEqual(a.appliedTexts());
    expect(lag.core.status().commit).toBe(a.core.status().commit);
    expect(a.core.status().progress["c"]?.state).toBe("replicate");
  });

  test("an answer to a read the member's progress no longer waits for is ignored, and the read is asked again", () => {
    const { c, a, lag } = laggingBehindMemory({ ...fromLogStore, maxBytesPerAppend: 40 }, 20, 20);
    const seen = watch(lag);
    c.tickAll(2);
    // The probe's reads, one append's worth each, until one is accepted and the member is replicated to.
    for (let i = 0; i < 20 && a.core.status().progress["c"]?.state !== "replicate"; i++) {
      expect(a.answerFetches()).toBe(1);
      c.deliverAll();
    }
    expect(a.core.status().progress["c"]?.state).toBe("replicate");
    const stale = a.fetches.splice(0);
    expect(stale.length).toBe(1);
    const appendsBefore = seen.filter((m) => m.type === "append" && m.entries.length > 0).length;
    // The member became unreachable: its progress starts over, forgetting the read.
    a.core.reportUnreachable("c");
    a.core.fetched(stale[0]!, a.readLogStore(stale[0]!));
    c.deliverAll();
    // An answer for another member, or a second answer to the same read, is ignored too.
    a.core.fetched({ ...stale[0]!, to: "b" }, a.readLogStore(stale[0]!));
    a.core.fetched(stale[0]!, a.readLogStore(stale[0]!));
    c.deliverAll();
    expect(seen.filter((m) => m.type === "append" && m.entries.length > 0).length).toBe(appendsBefore);
    // The next heartbeat round asks again; that answer is taken.
    c.tickAll(1);
    expect(a.fetches.length).toBe(1);
    expect(a.fetches[0]!.seq).not.toBe(stale[0]!.seq);
    c.deliverAllWithLogStore();
    expect(lag.appliedTexts()).toEqual(a.appliedTexts());
    expect(seen.some((m) => m.type === "snapshot")).toBe(false);
  });

  test("an answer that comes after the leader stepped down is ignored", () => {
    const { c, a } = laggingBehindMemory();
    c.tickAll(2);
    const f = a.fetches.splice(0)[0]!;
    a.core.step({ type: "heartbeat", from: "b", to: "a", term: a.core.status().term + 1, commit: 0, readSeq: 0 });
    a.core.fetched(f, a.readLogStore(f));
    a.process();
    expect(a.outbox.some((m) => m.type === "append")).toBe(false);
  });

  test("a member the log store no longer holds entries for is sent a snapshot", () => {
    const { c, a, lag, snapIndex } = laggingBehindMemory();
    const seen = watch(lag);
    a.logStoreRemovedThrough = snapIndex;
    c.tickAll(2);
    expect(a.fetches.length).toBe(1);
    c.deliverAllWithLogStore();
    c.tickAll(2);
    expect(seen.filter((m) => m.type === "snapshot").length).toBe(1);
    expect(lag.disk.snapshot?.index).toBe(snapIndex);
    // The store is not asked again for what it said it no longer holds.
    c.tickAll(2);
    expect(a.fetches.length).toBe(0);
  });

  test("entries read back that are not the leader's log are not sent: the member gets a snapshot", () => {
    const { c, a, lag, snapIndex } = laggingBehindMemory();
    const seen = watch(lag);
    c.tickAll(2);
    const f = a.fetches.splice(0)[0]!;
    const read = a.readLogStore(f)!;
    // The entry at the compaction point with another term: a record a rewrite superseded.
    a.core.fetched(f, read.map((e) => (e.index === snapIndex ? { ...e, term: e.term + 1 } : e)));
    c.deliverAll();
    expect(seen.some((m) => m.type === "append" && m.entries.length > 0)).toBe(false);
    expect(seen.filter((m) => m.type === "snapshot").length).toBe(1);
  });

  test("a read asks for no more than the member's in-flight window holds, and what comes back is sent in appends of the usual bound", () => {
    const opts: Partial<RaftOptions> = { ...fromLogStore, maxInflightAppends: 3, maxBytesPerAppend: 40, maxInflightBytes: 100 };
    const { c, a, lag } = laggingBehindMemory(opts, 40, 20);
    const seen = watch(lag);
    // Probe first: one append's worth.
    c.tickAll(1);
    const reads: LogFetch[] = [];
    for (let round = 0; round < 200; round++) {
      c.deliverAll();
      const pending = a.fetches.splice(0);
      if (pending.length === 0) break;
      for (const f of pending) {
        reads.push(f);
        const inflight = a.core.status().progress["c"]?.inflight ?? 0;
        expect(inflight).toBeLessThan(3);
        expect(f.bytesMax).toBeLessThanOrEqual(100);
        a.core.fetched(f, a.readLogStore(f));
      }
    }
    expect(reads.length).toBeGreaterThan(3);
    for (const m of seen) if (m.type === "append" && m.entries.length > 1) expect(m.entries.reduce((n, e) => n + e.data.length + 32, 0)).toBeLessThanOrEqual(40);
    expect(lag.appliedTexts()).toEqual(a.appliedTexts());
    expect(seen.some((m) => m.type === "snapshot")).toBe(false);
  });

  test("the oldest image a member may be sent: past what the log store no longer holds, else where memory starts", () => {
    const { c, a, snapIndex } = laggingBehindMemory();
    // Nothing missing from the store yet: any image will do, the log after it is read back.
    expect(a.core.snapshotFloor()).toBe(1);
    a.logStoreRemovedThrough = snapIndex - 2;
    c.tickAll(2);
    c.deliverAllWithLogStore();
    // The store said it no longer holds an index: an image must be past it.
    expect(a.core.snapshotFloor()).toBeGreaterThan(1);
    expect(a.core.snapshotFloor()).toBeLessThanOrEqual(snapIndex);
    // Without reading back, an image must reach where the in-memory log starts.
    const plain = laggingBehindMemory({});
    expect(plain.a.core.snapshotFloor()).toBe(plain.snapIndex);
  });

  test("without the option the member gets a snapshot at once, as before", () => {
    const { c, a, lag } = laggingBehindMemory({});
    const seen = watch(lag);
    c.tickAll(2);
    expect(a.fetches.length).toBe(0);
    expect(seen.filter((m) => m.type === "snapshot").length).toBe(1);
  });
});
