// SWIM membership as a pure state machine: time enters as a timestamp (ms) passed to tick()
// and receive(), packets in and out are values, randomness comes from a seeded PRNG. The UDP
// driver (udp.ts) and the simulator (test/sim/gossip*.test.ts) drive the same code.
//
// Each protocol period this member probes one other (round robin in a shuffled order): a
// ping, then after ackTimeoutMs a ping_req through k others; no ack by the period's end makes
// the target suspect. A suspect that does not refute (by raising its incarnation) within
// suspicionTimeoutMs is dead. Claims travel piggybacked on every packet, each a bounded
// number of times; so do facts records (what each member reports about itself and its view).
// Members are the ones the node names (Raft's membership): gossip decides who is alive,
// never who votes.

import { incarnationMax } from "./codec.ts";
import { assert } from "../util/assert.ts";
import type { Logger } from "../util/logger.ts";
import type { Prng } from "../util/prng.ts";
import type {
  FactsRecord, GossipCounters, GossipMessage, GossipTimings, MemberFacts, MemberState, MemberStatus, Outgoing, StateUpdate,
} from "./types.ts";

export interface GossipCoreOptions {
  readonly self: string;
  readonly timings: GossipTimings;
  /** Body bytes a message may take once encoded (the packet bound less the codec's header and MAC). */
  readonly bodyBytesMax: number;
  readonly prng: Prng;
  readonly logger: Logger;
  /**
   * This run's first incarnation. The driver passes the wall clock in ms, so a restarted
   * member outranks every claim about its previous run without having to refute it.
   */
  readonly incarnation: number;
}

interface Member {
  readonly id: string;
  state: MemberState;
  incarnation: number;
  everAlive: boolean;
  sinceMs: number;
  lastHeardMs: number | null;
  record: FactsRecord | null;
  /** When `record` was last known current: it arrived, or the member itself sent it again. */
  recordAtMs: number | null;
  /** When this member last sent it an unprompted ping to tell it of a claim (receive()). */
  noticedMs: number;
}

interface Probe {
  readonly target: string;
  readonly seq: number;
  readonly startedMs: number;
  indirectSent: boolean;
  acked: boolean;
}

/** A ping this member sends for another (ping_req): its ack goes back to the requester. */
interface Relay {
  readonly requester: string;
  readonly requesterSeq: number;
  readonly expiresMs: number;
}

/** Queued dissemination: sent at most `retransmits()` times, least-sent first. */
interface Pending<T> {
  item: T;
  sent: number;
}

const relaysMax = 64;
const membersMax = 256;

export class GossipCore {
  readonly counters: GossipCounters = {
    probes: 0, probesFailed: 0, indirectProbes: 0, suspicions: 0, deaths: 0, refutations: 0, joins: 0, packetsSent: 0, packetsReceived: 0,
  };
  private readonly members = new Map<string, Member>();
  private incarnation: number;
  private seq = 0;
  private ownFacts: MemberFacts | null = null;
  private ownRecord: FactsRecord | null = null;
  private ownRecordText = "";
  private probeOrder: string[] = [];
  private probe: Probe | null = null;
  private nextProbeMs = 0;
  /** When tick() last ran (null: not yet), and whether it put off its conclusions as late. */
  private lastTickMs: number | null = null;
  private putOff = false;
  private nextSeq = 1;
  private readonly relays = new Map<number, Relay>();
  private readonly updates = new Map<string, Pending<StateUpdate>>();
  private readonly records = new Map<string, Pending<FactsRecord>>();

  constructor(private readonly opts: GossipCoreOptions) {
    assert(opts.timings.ackTimeoutMs < opts.timings.protocolPeriodMs, "the ack timeout is shorter than the protocol period");
    assert(opts.bodyBytesMax >= 256, "a gossip packet has room for a facts record");
    this.incarnation = opts.incarnation;
  }

  get self(): string {
    return this.opts.self;
  }

  /** The members to watch (Raft's voters and learners), this one included or not. */
  setMembers(ids: readonly string[], nowMs: number): void {
    const wanted = new Set(ids.filter((id) => id !== this.opts.self).slice(0, membersMax));
    for (const id of [...this.members.keys()]) {
      if (wanted.has(id)) continue;
      this.members.delete(id);
      this.updates.delete(id);
      this.records.delete(id);
      this.opts.logger.info("gossip: member left the membership", { member: id });
    }
    for (const id of wanted) {
      if (this.members.has(id)) continue;
      // Not heard of yet: suspect from the start, so a member that never answers is declared
      // dead after one suspicion timeout. Incarnation -1 loses to any claim the member makes.
      this.members.set(id, { id, state: "suspect", incarnation: -1, everAlive: false, sinceMs: nowMs, lastHeardMs: null, record: null, recordAtMs: null, noticedMs: -Infinity });
    }
    this.probeOrder = this.probeOrder.filter((id) => wanted.has(id));
  }

  /** This member's own facts; a change is published with a new seq. */
  setFacts(facts: MemberFacts): void {
    this.ownFacts = facts;
    this.refreshOwnRecord();
  }

  /**
   * Advance time: start, escalate or conclude probes, expire suspicions. A tick later than
   * half the ack timeout after the one before comes from a loop that was held up here (a long
   * turn, a loaded host): the packets that arrived meanwhile, the acks of this member's probe
   * among them, are read only after it. Such a tick concludes nothing; the next one does,
   * late or not, so a member whose every tick is late still finds a member down.
   */
  tick(nowMs: number): Outgoing[] {
    const out: Outgoing[] = [];
    const t = this.opts.timings;
    const sinceLastMs = this.lastTickMs === null ? 0 : nowMs - this.lastTickMs;
    this.lastTickMs = nowMs;
    if (sinceLastMs > t.ackTimeoutMs / 2 && !this.putOff) {
      this.putOff = true;
      if (this.opts.logger.enabled("debug")) this.opts.logger.debug("gossip: this member's tick came late; probes are concluded at the next one", { sinceLastTickMs: sinceLastMs });
      return out;
    }
    this.putOff = false;
    const probe = this.probe;
    if (probe !== null && !probe.acked && !probe.indirectSent && nowMs - probe.startedMs >= t.ackTimeoutMs) {
      probe.indirectSent = true;
      const helpers = this.pick(t.indirectProbes, (m) => m.id !== probe.target && m.state === "alive");
      for (const h of helpers) {
        this.counters.indirectProbes += 1;
        out.push(this.envelope(h.id, { type: "ping_req", seq: probe.seq, target: probe.target }));
      }
      if (this.opts.logger.enabled("trace")) this.opts.logger.trace("gossip: indirect probe", { target: probe.target, through: helpers.map((h) => h.id) });
    }
    if (nowMs >= this.nextProbeMs) {
      if (probe !== null && !probe.acked) this.probeFailed(probe, nowMs);
      this.probe = null;
      this.nextProbeMs = nowMs + t.protocolPeriodMs;
      const target = this.nextTarget();
      if (target !== null) {
        const seq = this.nextSeq++;
        this.probe = { target, seq, startedMs: nowMs, indirectSent: false, acked: false };
        this.counters.probes += 1;
        if (this.opts.logger.enabled("trace")) this.opts.logger.trace("gossip: probe", { target, seq });
        out.push(this.envelope(target, { type: "ping", seq }));
      }
    }
    for (const m of this.members.values()) {
      if (m.state === "suspect" && nowMs - m.sinceMs >= t.suspicionTimeoutMs) {
        this.setState(m, "dead", m.incarnation, nowMs);
        this.counters.deaths += 1;
        this.opts.logger.info("gossip: member declared dead", { member: m.id, incarnation: m.incarnation, suspectForMs: t.suspicionTimeoutMs });
        if (m.incarnation >= 0) this.disseminate({ id: m.id, state: "dead", incarnation: m.incarnation });
      }
    }
    for (const [seq, r] of this.relays) if (r.expiresMs <= nowMs) this.relays.delete(seq);
    this.counters.packetsSent += out.length;
    return out;
  }

  /** A packet that the codec authenticated as this cluster's. */
  receive(msg: GossipMessage, nowMs: number): Outgoing[] {
    const sender = this.members.get(msg.from);
    if (sender === undefined || msg.from === this.opts.self) return [];
    this.counters.packetsReceived += 1;
    sender.lastHeardMs = nowMs;
    const refutationsBefore = this.counters.refutations;
    for (const r of msg.facts) this.learnRecord(r, r.id === msg.from, nowMs);
    for (const u of msg.updates) this.applyUpdate(u, nowMs);
    const out: Outgoing[] = [];
    // Tell the sender at once what it does not know yet: that this member refuted a claim
    // it made, or that it is itself thought suspect or dead here (envelope() carries the
    // claim, so it can refute). A ping is answered by an ack, which carries the same.
    const refuted = this.counters.refutations > refutationsBefore;
    // At most one such notice per member per ack timeout, so that two members that disagree
    // never bounce pings at network speed.
    const unaware = sender.state !== "alive" && sender.incarnation >= 0;
    if (msg.type !== "ping" && (refuted || unaware) && nowMs - sender.noticedMs >= this.opts.timings.ackTimeoutMs) {
      sender.noticedMs = nowMs;
      out.push(this.envelope(msg.from, { type: "ping", seq: this.nextSeq++ }));
    }
    switch (msg.type) {
      case "ping":
        out.push(this.envelope(msg.from, { type: "ack", seq: msg.seq }));
        break;
      case "ack": {
        const probe = this.probe;
        if (probe !== null && probe.seq === msg.seq) probe.acked = true;
        const relay = this.relays.get(msg.seq);
        if (relay !== undefined) {
          this.relays.delete(msg.seq);
          out.push(this.envelope(relay.requester, { type: "ack", seq: relay.requesterSeq }));
        }
        break;
      }
      case "ping_req": {
        if (!this.members.has(msg.target) || this.relays.size >= relaysMax) break;
        const seq = this.nextSeq++;
        this.relays.set(seq, { requester: msg.from, requesterSeq: msg.seq, expiresMs: nowMs + this.opts.timings.protocolPeriodMs });
        out.push(this.envelope(msg.target, { type: "ping", seq }));
        break;
      }
    }
    this.counters.packetsSent += out.length;
    return out;
  }

  /** Every member as seen here, this one first. */
  status(nowMs: number): MemberStatus[] {
    const own: MemberStatus = {
      id: this.opts.self, state: "alive", incarnation: this.incarnation, everAlive: true, sinceMs: 0, lastHeardMs: nowMs,
      record: this.ownRecord, recordAtMs: this.ownRecord === null ? null : nowMs,
    };
    return [own, ...[...this.members.values()].sort((a, b) => (a.id < b.id ? -1 : 1)).map((m) => ({
      id: m.id, state: m.state, incarnation: m.incarnation, everAlive: m.everAlive, sinceMs: m.sinceMs, lastHeardMs: m.lastHeardMs, record: m.record, recordAtMs: m.recordAtMs,
    }))];
  }

  /** This member's view of the others (what its facts record carries). */
  view(): Record<string, MemberState> {
    const v: Record<string, MemberState> = {};
    for (const m of this.members.values()) v[m.id] = m.state;
    return v;
  }

  // ─── state changes ────────────────────────────────────────────────────────────────────

  private probeFailed(probe: Probe, nowMs: number): void {
    this.counters.probesFailed += 1;
    const m = this.members.get(probe.target);
    if (m === undefined || m.state !== "alive") return;
    this.setState(m, "suspect", m.incarnation, nowMs);
    this.counters.suspicions += 1;
    this.opts.logger.info("gossip: member suspected (no ack, direct or indirect)", { member: m.id, incarnation: m.incarnation });
    this.disseminate({ id: m.id, state: "suspect", incarnation: m.incarnation });
  }

  /** SWIM's precedence: a higher incarnation wins; at equal ones dead > suspect > alive. */
  private applyUpdate(u: StateUpdate, nowMs: number): void {
    if (u.id === this.opts.self) {
      if (u.state !== "alive" && u.incarnation >= this.incarnation) {
        // Never past what every member accepts (codec.ts): a claim at the bound is forged.
        this.incarnation = Math.min(u.incarnation + 1, incarnationMax);
        this.counters.refutations += 1;
        this.opts.logger.info(`gossip: refuting a claim that this member is ${u.state}`, { incarnation: this.incarnation });
        this.disseminate({ id: this.opts.self, state: "alive", incarnation: this.incarnation });
        this.refreshOwnRecord();
      }
      return;
    }
    const m = this.members.get(u.id);
    if (m === undefined) return;
    const newer = u.incarnation > m.incarnation;
    const same = u.incarnation === m.incarnation;
    let take: boolean;
    switch (u.state) {
      case "alive":
        take = newer;
        break;
      case "suspect":
        take = newer || (same && m.state === "alive");
        break;
      case "dead":
        take = newer || (same && m.state !== "dead");
        break;
    }
    if (!take) return;
    const before = m.state;
    this.setState(m, u.state, u.incarnation, nowMs);
    this.disseminate(u);
    if (u.state === "alive") this.noteAlive(m, before);
    else if (u.state === "suspect" && before !== "suspect") {
      this.counters.suspicions += 1;
      this.opts.logger.debug("gossip: member suspected (heard from another member)", { member: m.id, incarnation: u.incarnation });
    } else if (u.state === "dead" && before !== "dead") {
      this.counters.deaths += 1;
      this.opts.logger.info("gossip: member declared dead (heard from another member)", { member: m.id, incarnation: u.incarnation });
    }
  }

  private noteAlive(m: Member, before: MemberState): void {
    if (!m.everAlive) {
      m.everAlive = true;
      this.counters.joins += 1;
      this.opts.logger.info("gossip: member joined", { member: m.id, incarnation: m.incarnation });
    } else if (before === "dead") {
      this.opts.logger.info("gossip: member alive again", { member: m.id, incarnation: m.incarnation });
    } else if (before === "suspect") {
      this.opts.logger.debug("gossip: member refuted its suspicion", { member: m.id, incarnation: m.incarnation });
    }
  }

  private learnRecord(r: FactsRecord, fromItself: boolean, nowMs: number): void {
    if (r.id === this.opts.self) return;
    const m = this.members.get(r.id);
    if (m === undefined) return;
    // A member's own packet says it is alive at its incarnation.
    if (fromItself) this.applyUpdate({ id: r.id, state: "alive", incarnation: r.incarnation }, nowMs);
    const known = m.record;
    if (known !== null && r.incarnation === known.incarnation && r.seq === known.seq) {
      // The member sends its record in every packet and raises seq only when something in it
      // changes: its own packet repeating the record says it is still current. A third member
      // repeating it says nothing of the sort (it may hold an old one), so confirms nothing.
      if (fromItself) m.recordAtMs = nowMs;
      return;
    }
    if (known !== null && (r.incarnation < known.incarnation || (r.incarnation === known.incarnation && r.seq < known.seq))) return;
    m.record = r;
    m.recordAtMs = nowMs;
    this.records.set(r.id, { item: r, sent: 0 });
  }

  private setState(m: Member, state: MemberState, incarnation: number, nowMs: number): void {
    if (m.state !== state) m.sinceMs = nowMs;
    if (state === "suspect" && m.state !== "suspect") {
      // Probe a new suspect next: the ping carries the claim, so a live one refutes within
      // a period instead of waiting for its turn in the round.
      this.probeOrder = [m.id, ...this.probeOrder.filter((id) => id !== m.id)];
    }
    m.state = state;
    m.incarnation = incarnation;
    this.refreshOwnRecord();
  }

  private disseminate(u: StateUpdate): void {
    this.updates.set(u.id, { item: u, sent: 0 });
  }

  private refreshOwnRecord(): void {
    if (this.ownFacts === null) return;
    const view = this.view();
    const text = JSON.stringify([this.incarnation, this.ownFacts, view]);
    if (text === this.ownRecordText) return;
    this.ownRecordText = text;
    this.seq += 1;
    this.ownRecord = { id: this.opts.self, incarnation: this.incarnation, seq: this.seq, facts: this.ownFacts, view };
  }

  // ─── sending ──────────────────────────────────────────────────────────────────────────

  /** How many times a claim or record is piggybacked: λ·log₂(n+1), as SWIM suggests. */
  private retransmits(): number {
    return 3 * Math.ceil(Math.log2(this.members.size + 2));
  }

  /**
   * A message to `to` with as much dissemination as fits the body bound: this member's own
   * record, then a claim about `to` itself if it is thought suspect or dead (so that it can
   * refute), then the least-sent claims and records.
   */
  private envelope(to: string, head: { type: "ping"; seq: number } | { type: "ack"; seq: number } | { type: "ping_req"; seq: number; target: string }): Outgoing {
    const updates: StateUpdate[] = [];
    const facts: FactsRecord[] = [];
    if (this.ownRecord !== null) facts.push(this.ownRecord);
    const build = (): GossipMessage => ({ ...head, from: this.opts.self, updates, facts });
    let size = byteLength(JSON.stringify(build()));
    const budget = this.opts.bodyBytesMax;
    const tryAdd = <T>(list: T[], item: T): boolean => {
      const extra = byteLength(JSON.stringify(item)) + 1;
      if (size + extra > budget) return false;
      list.push(item);
      size += extra;
      return true;
    };
    assert(size <= budget, "a message with this member's own facts fits a packet");
    const target = this.members.get(to);
    if (target !== undefined && target.state !== "alive" && target.incarnation >= 0) {
      tryAdd(updates, { id: to, state: target.state, incarnation: target.incarnation });
    }
    const limit = this.retransmits();
    for (const p of leastSent(this.updates)) {
      if (p.item.id === to && updates.length > 0 && updates[0]?.id === to) continue;
      if (!tryAdd(updates, p.item)) break;
      p.sent += 1;
      if (p.sent >= limit) this.updates.delete(p.item.id);
    }
    for (const p of leastSent(this.records)) {
      if (p.item.id === to) continue;
      if (!tryAdd(facts, p.item)) break;
      p.sent += 1;
      if (p.sent >= limit) this.records.delete(p.item.id);
    }
    return { to, message: build() };
  }

  private nextTarget(): string | null {
    if (this.probeOrder.length === 0) {
      // A fresh shuffled round: every member is probed once per round (SWIM's bound on
      // detection time), dead ones too, so that a member that comes back is seen again.
      this.probeOrder = [...this.members.keys()];
      for (let i = this.probeOrder.length - 1; i > 0; i--) {
        const j = this.opts.prng.nextInt(i + 1);
        const a = this.probeOrder[i] as string;
        this.probeOrder[i] = this.probeOrder[j] as string;
        this.probeOrder[j] = a;
      }
    }
    return this.probeOrder.shift() ?? null;
  }

  private pick(count: number, ok: (m: Member) => boolean): Member[] {
    const candidates = [...this.members.values()].filter(ok);
    const chosen: Member[] = [];
    while (chosen.length < count && candidates.length > 0) {
      const i = this.opts.prng.nextInt(candidates.length);
      chosen.push(candidates.splice(i, 1)[0] as Member);
    }
    return chosen;
  }
}

function leastSent<T>(pending: Map<string, Pending<T>>): Pending<T>[] {
  return [...pending.values()].sort((a, b) => a.sent - b.sent);
}

/** UTF-8 length of a string, without an encoder (the core uses no platform API). */
export function byteLength(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff) {
      n += 4;
      i += 1;
    } else n += 3;
  }
  return n;
}
