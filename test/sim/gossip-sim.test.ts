// The SWIM core (src/gossip/core.ts) under a seeded simulation: 3 or 5 members, packets
// through the real codec, lost, duplicated, delayed and reordered, a partition that then
// heals, a member killed and restarted. Checked: once the network heals, no live member is
// dead in a live member's view after one suspicion timeout; a killed member is dead in every
// view within a bound (one probe round, the suspicion timeout and a few periods to spread);
// a restarted one is alive again everywhere within one suspicion timeout.
// Prints its seeds first; replay one with GOSSIP_SEED=<n>. GOSSIP_SIM_SEEDS=<n> runs n seeds.

import { describe, expect, test } from "bun:test";
import {
  GossipCore, clusterDerivedKey, decodePacket, defaultGossipTimings, encodePacket, packetOverheadBytes,
  type GossipMessage, type MemberFacts, type MemberState,
} from "../../src/gossip/index.ts";
import { createPrng, silentLogger, type Prng } from "../../src/util/index.ts";

const single = process.env["GOSSIP_SEED"];
const count = Number(process.env["GOSSIP_SIM_SEEDS"] ?? 40);
const seeds = single !== undefined ? [Number(single)] : Array.from({ length: count }, (_, i) => i + 1);
console.log(single !== undefined ? `gossip simulation: GOSSIP_SEED=${single}` : `gossip simulation: seeds 1..${count} (replay one with GOSSIP_SEED=<n>)`);

const timings = defaultGossipTimings;
const clusterId = "sim-cluster";
const key = clusterDerivedKey(clusterId);
const stepMs = 10;
const driverTickMs = 100;

interface SimMember {
  id: string;
  core: GossipCore;
  alive: boolean;
  /** Offset of this member's 100 ms timer. */
  phaseMs: number;
}

interface InFlight {
  deliverAtMs: number;
  order: number;
  from: string;
  to: string;
  packet: Uint8Array;
}

class SimNet {
  inflight: InFlight[] = [];
  lossRate = 0;
  duplicateRate = 0;
  delayMaxMs = 5;
  /** Member id → side of the partition; members on different sides do not hear each other. */
  side = new Map<string, number>();

  constructor(private readonly prng: Prng) {}

  send(from: string, to: string, packet: Uint8Array, nowMs: number): void {
    if (this.prng.next() < this.lossRate) return;
    const copies = this.prng.next() < this.duplicateRate ? 2 : 1;
    for (let i = 0; i < copies; i++) {
      this.inflight.push({ deliverAtMs: nowMs + 1 + this.prng.nextInt(this.delayMaxMs), order: this.prng.nextU32(), from, to, packet });
    }
  }

  due(nowMs: number): InFlight[] {
    const due = this.inflight.filter((p) => p.deliverAtMs <= nowMs).sort((a, b) => a.deliverAtMs - b.deliverAtMs || a.order - b.order);
    this.inflight = this.inflight.filter((p) => p.deliverAtMs > nowMs);
    return due.filter((p) => (this.side.get(p.from) ?? 0) === (this.side.get(p.to) ?? 0));
  }
}

function facts(id: string, commitIndex: number): MemberFacts {
  return {
    role: "follower", term: 3, leader: "n1", commitIndex, appliedIndex: commitIndex, version: "0.0.0-sim", recovery: "healthy",
    addresses: { peer: `10.0.0.1:7879`, client: `10.0.0.1:7878`, admin: `10.0.0.1:9090` },
    raftLinks: { [id === "n1" ? "n2" : "n1"]: true }, archive: null,
  };
}

class GossipSim {
  readonly prng: Prng;
  readonly net: SimNet;
  readonly members: SimMember[];
  nowMs = 0;
  readonly ids: string[];
  private restarts = 0;

  constructor(readonly seed: number, size: number) {
    this.prng = createPrng(seed, 0x605);
    this.net = new SimNet(createPrng(seed, 0x6e7));
    this.ids = Array.from({ length: size }, (_, i) => `n${i + 1}`);
    this.members = this.ids.map((id) => this.makeMember(id, 0));
  }

  private makeMember(id: string, incarnation: number): SimMember {
    const core = new GossipCore({
      self: id, timings, bodyBytesMax: timings.packetBytesMax - packetOverheadBytes(clusterId),
      prng: createPrng(this.seed, this.ids.indexOf(id) * 1000 + this.restarts), logger: silentLogger, incarnation,
    });
    core.setMembers(this.ids, this.nowMs);
    return { id, core, alive: true, phaseMs: this.prng.nextInt(driverTickMs / stepMs) * stepMs };
  }

  member(id: string): SimMember {
    const m = this.members.find((x) => x.id === id);
    if (m === undefined) throw new Error(`no member ${id}`);
    return m;
  }

  kill(id: string): void {
    this.member(id).alive = false;
  }

  /** A new process for the member: a fresh core at a higher incarnation (the driver uses the clock). */
  restart(id: string): void {
    this.restarts += 1;
    const i = this.members.findIndex((m) => m.id === id);
    this.members[i] = this.makeMember(id, this.nowMs);
  }

  private transmit(from: string, out: { to: string; message: GossipMessage }[]): void {
    for (const o of out) {
      const packet = encodePacket(o.message, clusterId, key);
      expect(packet.length).toBeLessThanOrEqual(timings.packetBytesMax);
      this.net.send(from, o.to, packet, this.nowMs);
    }
  }

  run(untilMs: number, check?: () => void): void {
    while (this.nowMs < untilMs) {
      this.nowMs += stepMs;
      for (const p of this.net.due(this.nowMs)) {
        const to = this.members.find((m) => m.id === p.to);
        if (to === undefined || !to.alive) continue;
        const decoded = decodePacket(p.packet, clusterId, key, timings.packetBytesMax);
        if (!decoded.ok) throw new Error(`a packet of ours failed to decode: ${decoded.reason}`);
        this.transmit(to.id, to.core.receive(decoded.message, this.nowMs));
      }
      for (const m of this.members) {
        if (!m.alive || (this.nowMs - m.phaseMs) % driverTickMs !== 0) continue;
        m.core.setFacts(facts(m.id, Math.floor(this.nowMs / 1000)));
        this.transmit(m.id, m.core.tick(this.nowMs));
      }
      check?.();
    }
  }

  /** What `observer` thinks of `subject`. */
  stateOf(observer: string, subject: string): MemberState {
    const s = this.member(observer).core.status(this.nowMs).find((x) => x.id === subject);
    if (s === undefined) throw new Error(`${observer} does not know ${subject}`);
    return s.state;
  }

  /** Every (observer, subject) pair among live members where the observer holds `state`. */
  live(): SimMember[] {
    return this.members.filter((m) => m.alive);
  }

  falseStates(state: MemberState): string[] {
    const live = this.live();
    const found: string[] = [];
    for (const o of live) for (const s of live) if (o !== s && this.stateOf(o.id, s.id) === state) found.push(`${o.id} sees ${s.id} ${state}`);
    return found;
  }
}

function scenario(seed: number): void {
  const prng = createPrng(seed, 0x5ce);
  const size = prng.next() < 0.5 ? 3 : 5;
  const sim = new GossipSim(seed, size);
  const faultyNet = (): void => {
    sim.net.lossRate = 0.05 + prng.next() * 0.25;
    sim.net.duplicateRate = prng.next() * 0.05;
    sim.net.delayMaxMs = 5 + prng.nextInt(200);
  };
  const healthyNet = (): void => {
    sim.net.lossRate = 0;
    sim.net.duplicateRate = 0;
    sim.net.delayMaxMs = 5;
    sim.net.side.clear();
  };

  // Start-up on a clean network: everyone sees everyone alive.
  sim.run(10_000);
  expect(sim.falseStates("dead")).toEqual([]);
  expect(sim.falseStates("suspect")).toEqual([]);

  // Loss, delay and duplicates, then a partition on top.
  faultyNet();
  sim.run(sim.nowMs + 15_000);
  const cut = 1 + prng.nextInt(size - 1);
  for (const [i, id] of sim.ids.entries()) sim.net.side.set(id, i < cut ? 0 : 1);
  sim.run(sim.nowMs + 20_000);
  // Across the partition, members are dead to each other.
  expect(sim.stateOf("n1", sim.ids[size - 1] ?? "")).toBe("dead");

  // The network heals: after one suspicion timeout, no live member is dead to another.
  healthyNet();
  const healedMs = sim.nowMs;
  // A false death seen after healing (a suspicion from before it may still expire) lasts at
  // most one suspicion timeout, counted from the healing or from the death if later.
  const deadSinceMs = new Map<string, number>();
  sim.run(healedMs + 3 * timings.suspicionTimeoutMs, () => {
    const wrong = new Set(sim.falseStates("dead"));
    for (const pair of [...deadSinceMs.keys()]) if (!wrong.has(pair)) deadSinceMs.delete(pair);
    for (const pair of wrong) {
      const since = deadSinceMs.get(pair) ?? sim.nowMs;
      deadSinceMs.set(pair, since);
      if (sim.nowMs - Math.max(since, healedMs) > timings.suspicionTimeoutMs) {
        throw new Error(`seed ${seed}: ${pair} for more than one suspicion timeout after healing (${sim.nowMs - healedMs} ms after it)`);
      }
    }
  });
  expect(sim.falseStates("dead")).toEqual([]);
  expect(sim.falseStates("suspect")).toEqual([]);

  // A member is killed: every live member declares it dead within the bound.
  const victim = sim.ids[prng.nextInt(size)] ?? "n1";
  if (prng.next() < 0.5) faultyNet();
  sim.net.lossRate = Math.min(sim.net.lossRate, 0.1);
  sim.kill(victim);
  const killedMs = sim.nowMs;
  const boundMs = timings.suspicionTimeoutMs + (size + 3) * timings.protocolPeriodMs;
  let allDeadAtMs: number | null = null;
  sim.run(killedMs + boundMs, () => {
    if (allDeadAtMs === null && sim.live().every((m) => sim.stateOf(m.id, victim) === "dead")) allDeadAtMs = sim.nowMs;
  });
  if (allDeadAtMs === null) {
    throw new Error(`seed ${seed}: ${victim} not dead everywhere ${boundMs} ms after it was killed: ${sim.live().map((m) => `${m.id}:${sim.stateOf(m.id, victim)}`).join(" ")}`);
  }
  // No one else died meanwhile.
  expect(sim.falseStates("dead")).toEqual([]);

  // It comes back (a new process): alive again everywhere within one suspicion timeout.
  healthyNet();
  sim.restart(victim);
  sim.run(sim.nowMs + timings.suspicionTimeoutMs);
  expect(sim.falseStates("dead")).toEqual([]);
  expect(sim.falseStates("suspect")).toEqual([]);
  // Each member's facts reached every other member.
  for (const o of sim.members) {
    for (const s of o.core.status(sim.nowMs)) expect(s.record?.facts.version).toBe("0.0.0-sim");
  }
}

describe("gossip under the seeded simulation", () => {
  for (const seed of seeds) {
    test(`seed ${seed}: no false death after healing; a killed member is declared dead, a restarted one alive`, () => {
      scenario(seed);
    }, 60_000);
  }
});
