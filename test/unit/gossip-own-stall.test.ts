// A member whose own event loop was held up (a long turn, a loaded host) runs its overdue tick
// before it reads the packets that arrived meanwhile: the ack of its probe may be among them.
// That tick must not conclude that the probed member failed; the next one, after the packets
// are read, does. A member whose every tick is late still detects a member that is down.

import { describe, expect, test } from "bun:test";
import { GossipCore, defaultGossipTimings, packetOverheadBytes, type MemberFacts, type Outgoing } from "../../src/gossip/index.ts";
import { createPrng, silentLogger } from "../../src/util/index.ts";

const timings = defaultGossipTimings;
const tickMs = 100;

function facts(): MemberFacts {
  return {
    role: "follower", term: 2, leader: "n1", commitIndex: 10, appliedIndex: 10, version: "1", recovery: "healthy",
    addresses: { peer: "127.0.0.1:1", client: "127.0.0.1:2", admin: "127.0.0.1:3" }, raftLinks: {}, archive: null,
  };
}

/** Three members on a network that delivers at once, except what `held` keeps back. */
function cluster(): { cores: Map<string, GossipCore>; deliver: (out: Outgoing[], nowMs: number, hold?: (o: Outgoing) => boolean) => Outgoing[] } {
  const ids = ["n1", "n2", "n3"];
  const cores = new Map(ids.map((id, i) => {
    const core = new GossipCore({
      self: id, timings, bodyBytesMax: timings.packetBytesMax - packetOverheadBytes("c"), prng: createPrng(11, i), logger: silentLogger, incarnation: 1,
    });
    core.setMembers(ids, 0);
    core.setFacts(facts());
    return [id, core] as const;
  }));
  const deliver = (out: Outgoing[], nowMs: number, hold?: (o: Outgoing) => boolean): Outgoing[] => {
    const held: Outgoing[] = [];
    const queue = [...out];
    for (let o = queue.shift(); o !== undefined; o = queue.shift()) {
      if (hold?.(o) === true) held.push(o);
      else queue.push(...(cores.get(o.to)?.receive(o.message, nowMs) ?? []));
    }
    return held;
  };
  return { cores, deliver };
}

function stateOf(core: GossipCore, id: string, nowMs: number): string | undefined {
  return core.status(nowMs).find((m) => m.id === id)?.state;
}

/** Runs every member's ticks from `fromMs` to `toMs`; returns when n1 next sends a probe (a ping) after that, and to whom. */
function runUntilProbe(c: ReturnType<typeof cluster>, fromMs: number): { atMs: number; target: string; out: Outgoing[] } {
  for (let now = fromMs; ; now += tickMs) {
    for (const [id, core] of c.cores) {
      const out = core.tick(now);
      const ping = id === "n1" ? out.find((o) => o.message.type === "ping") : undefined;
      if (ping !== undefined) return { atMs: now, target: ping.to, out };
      c.deliver(out, now);
    }
  }
}

describe("gossip: a member's own stalled loop", () => {
  test("an overdue tick does not suspect a member whose ack is waiting to be read; the next tick sees the ack", () => {
    const c = cluster();
    for (let now = 0; now <= 5_000; now += tickMs) for (const core of c.cores.values()) c.deliver(core.tick(now), now);
    const n1 = c.cores.get("n1")!;
    expect(stateOf(n1, "n2", 5_000)).toBe("alive");
    expect(stateOf(n1, "n3", 5_000)).toBe("alive");

    const probe = runUntilProbe(c, 5_100);
    // n1's loop is held up from here: the ack comes back but waits in its socket.
    const held = c.deliver(probe.out, probe.atMs, (o) => o.to === "n1");
    expect(held.some((o) => o.message.type === "ack")).toBe(true);
    const lateMs = probe.atMs + timings.protocolPeriodMs + 500;
    // The overdue tick runs first…
    c.deliver(n1.tick(lateMs), lateMs);
    expect(stateOf(n1, probe.target, lateMs)).toBe("alive");
    // …then the packets that waited are read, and the next tick finds the probe answered.
    for (const o of held) c.deliver(c.cores.get(o.to)!.receive(o.message, lateMs), lateMs);
    c.deliver(n1.tick(lateMs + tickMs), lateMs + tickMs);
    expect(stateOf(n1, probe.target, lateMs + tickMs)).toBe("alive");
    expect(n1.counters.probesFailed).toBe(0);
    expect(n1.counters.suspicions).toBe(0);
  });

  test("a member that does not answer is still suspected, one tick later, when every tick is late", () => {
    const c = cluster();
    for (let now = 0; now <= 5_000; now += tickMs) for (const core of c.cores.values()) c.deliver(core.tick(now), now);
    const n1 = c.cores.get("n1")!;
    const probe = runUntilProbe(c, 5_100);
    // The target is down: nothing reaches it, so no ack, direct or indirect.
    const down = probe.target;
    c.deliver(probe.out, probe.atMs, (o) => o.to === down);
    let now = probe.atMs;
    let suspectedAt: number | null = null;
    // n1's ticks now come 700 ms apart: every one is late.
    for (let i = 0; i < 10 && suspectedAt === null; i++) {
      now += 700;
      c.deliver(n1.tick(now), now, (o) => o.to === down);
      if (stateOf(n1, down, now) !== "alive") suspectedAt = now;
    }
    expect(suspectedAt).not.toBeNull();
    expect(suspectedAt! - probe.atMs).toBeLessThanOrEqual(3 * 700);
  });
});
