// How current a member's facts are, as the SWIM core (src/gossip/core.ts) tracks them: every
// packet a member sends carries its own facts record, so hearing from it confirms the record
// even when nothing in it changed; a third member repeating the same record confirms nothing.
// cluster-status marks a view stale by this age, so a quiet cluster must not look stale.

import { describe, expect, test } from "bun:test";
import { GossipCore, defaultGossipTimings, packetOverheadBytes, type FactsRecord, type MemberFacts, type Outgoing } from "../../src/gossip/index.ts";
import { createPrng, silentLogger } from "../../src/util/index.ts";

const timings = defaultGossipTimings;
const tickMs = 100;

function facts(commitIndex: number): MemberFacts {
  return {
    role: "follower", term: 2, leader: "n1", commitIndex, appliedIndex: commitIndex, version: "1", recovery: "healthy",
    addresses: { peer: "127.0.0.1:1", client: "127.0.0.1:2", admin: "127.0.0.1:3" }, raftLinks: {}, archive: null,
  };
}

/** Members on a lossless network that delivers at once; every member's facts never change. */
function quietCluster(size: number): { cores: Map<string, GossipCore>; run: (fromMs: number, toMs: number, each?: (nowMs: number) => void) => void } {
  const ids = Array.from({ length: size }, (_, i) => `n${i + 1}`);
  const cores = new Map(ids.map((id, i) => {
    const core = new GossipCore({
      self: id, timings, bodyBytesMax: timings.packetBytesMax - packetOverheadBytes("c"), prng: createPrng(7, i), logger: silentLogger, incarnation: 1,
    });
    core.setMembers(ids, 0);
    core.setFacts(facts(10));
    return [id, core] as const;
  }));
  const deliver = (out: Outgoing[], nowMs: number): void => {
    const queue = [...out];
    for (let o = queue.shift(); o !== undefined; o = queue.shift()) queue.push(...(cores.get(o.to)?.receive(o.message, nowMs) ?? []));
  };
  const run = (fromMs: number, toMs: number, each?: (nowMs: number) => void): void => {
    for (let now = fromMs; now <= toMs; now += tickMs) {
      for (const core of cores.values()) deliver(core.tick(now), now);
      each?.(now);
    }
  };
  return { cores, run };
}

function known(core: GossipCore, subject: string, nowMs: number): { record: FactsRecord | null; recordAtMs: number | null } {
  const s = core.status(nowMs).find((m) => m.id === subject);
  if (s === undefined) throw new Error(`${core.self} does not know ${subject}`);
  return s;
}

describe("gossip facts age", () => {
  test("a quiet member's unchanged facts are confirmed by each of its packets: they never age past two probe rounds", () => {
    const size = 5;
    const { cores, run } = quietCluster(size);
    // Every member probes each other once per round of size − 1 periods, and is answered.
    const roundsMs = 2 * (size - 1) * timings.protocolPeriodMs;
    const oldest = { ageMs: 0, pair: "" };
    run(0, 4 * timings.suspicionTimeoutMs, (now) => {
      if (now < timings.suspicionTimeoutMs) return;
      for (const observer of cores.values()) {
        for (const s of observer.status(now)) {
          if (s.id === observer.self) continue;
          expect(s.state).toBe("alive");
          const ageMs = s.recordAtMs === null ? Infinity : now - s.recordAtMs;
          if (ageMs > oldest.ageMs) Object.assign(oldest, { ageMs, pair: `${observer.self} of ${s.id}` });
        }
      }
    });
    if (oldest.ageMs > roundsMs) throw new Error(`${oldest.pair}'s facts are ${oldest.ageMs} ms old, past two probe rounds (${roundsMs} ms)`);
  });

  test("a third member repeating an unchanged record does not confirm it; a newer record it relays does", () => {
    const { cores, run } = quietCluster(3);
    run(0, 5_000);
    const [n1, n2, n3] = ["n1", "n2", "n3"].map((id) => cores.get(id) as GossipCore) as [GossipCore, GossipCore, GossipCore];
    const before = known(n1, "n2", 5_000);
    if (before.record === null || before.recordAtMs === null) throw new Error("n1 has n2's facts");
    const n3Record = known(n3, "n3", 5_000).record as FactsRecord;

    const laterMs = before.recordAtMs + 3_000;
    n1.receive({ type: "ping", seq: 1_000, from: "n3", updates: [], facts: [n3Record, before.record] }, laterMs);
    expect(known(n1, "n2", laterMs).recordAtMs).toBe(before.recordAtMs);

    n2.setFacts(facts(11));
    const newer = known(n2, "n2", laterMs).record as FactsRecord;
    expect(newer.seq).toBeGreaterThan(before.record.seq);
    n1.receive({ type: "ping", seq: 1_001, from: "n3", updates: [], facts: [n3Record, newer] }, laterMs + 1);
    const after = known(n1, "n2", laterMs + 1);
    expect(after.record).toEqual(newer);
    expect(after.recordAtMs).toBe(laterMs + 1);
  });
});
