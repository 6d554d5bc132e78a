// The UDP driver around the SWIM core: one socket on the peer port's number (Raft uses the
// same number over TCP), a 100 ms timer that feeds the core the time, the node's members and
// its own facts, and packets encoded, sealed (authenticated, or encrypted with a shared key)
// and sent by member id. Sends are capped per tick (UDP drops bursts silently); everything
// dropped is counted by reason.

import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import type { Logger } from "../util/logger.ts";
import { createPrng } from "../util/prng.ts";
import { errorMessage } from "../util/errors.ts";
import { canonicalIp } from "../util/ip.ts";
import { decodePacket, dropReasons, encodePacket, packetOverheadBytes, type DropReason } from "./codec.ts";
import { GossipCore } from "./core.ts";
import { clusterDerivedKey, type GossipKey } from "./key.ts";
import { defaultGossipTimings, type GossipCounters, type GossipTimings, type MemberFacts, type MemberStatus, type Outgoing } from "./types.ts";

/** What the node tells gossip, read at every tick. */
export interface GossipSource {
  /** Raft's voters and learners with their peer addresses ("host:port"). */
  members(): readonly { readonly id: string; readonly peer: string }[];
  facts(): MemberFacts;
  /**
   * A node this one does not know sent an authenticated packet, giving its own peer address: a
   * member added while this node was cut off, say (its address travels in entries this node
   * lacks). Its packet is dropped all the same; what to make of it is the node's.
   */
  stranger?(id: string, peer: string): void;
}

export interface GossipDriverOptions {
  readonly self: string;
  readonly listen: { readonly host: string; readonly port: number };
  readonly logger: Logger;
  readonly timings?: GossipTimings;
  /**
   * The cluster's key for a cluster id; default: derived from the id (key.ts). A shared key
   * ([gossip] key_file) reads its secrets at every packet, so a reload needs no call here.
   */
  readonly keyFor?: (clusterId: string) => GossipKey;
  /** Members whose packets are dropped on arrival (tests cut gossip with it). */
  readonly blocked?: () => ReadonlySet<string>;
}

/** A point-in-time picture for cluster-status and the metrics. */
export interface GossipSnapshot {
  readonly self: string;
  readonly clusterId: string;
  readonly nowMs: number;
  readonly timings: GossipTimings;
  readonly members: readonly MemberStatus[];
  readonly counters: Readonly<GossipCounters>;
  readonly dropped: Readonly<Record<DropReason, number>>;
  /** Senders whose packets failed authentication lately, newest first (see RefusedSender). */
  readonly refused: readonly RefusedSender[];
}

/** The reasons a packet of this cluster (its id) fails authentication: a key that does not fit. */
const authFailures: ReadonlySet<DropReason> = new Set<DropReason>(["key_mismatch", "decrypt_failed", "bad_mac"]);

/**
 * A sender whose packets name this cluster but fail authentication: a member whose [gossip]
 * key_file differs (or that has one where this node has none, or the other way round). Its
 * packets are dropped, so the member looks dead; this says why.
 */
export interface RefusedSender {
  /** ip:port the packets come from. */
  readonly address: string;
  /** The member whose peer address that is, when one is. */
  readonly member: string | null;
  readonly reason: DropReason;
  /** The reason as an operator reads it (refusalCause). */
  readonly cause: string;
  readonly count: number;
  readonly lastMs: number;
}

/** Senders remembered at most (the least recently refused goes first): a bound against spoofed sources. */
const refusedSendersMax = 16;
/** A sender's refusal is logged at warn at most this often. */
const refusedLogEveryMs = 60_000;
/** An unknown sender's address is handed to the node at most this often per sender, */
const strangerEveryMs = 10_000;
/** and for at most this many senders a second. */
const strangersPerSecondMax = 4;
/** A refused sender not heard for this long is forgotten. */
const refusedForgetAfterMs = 10 * 60_000;
/** Refusals logged at most in a minute, all senders together. */
const refusalLogLinesPerMinuteMax = 8;

export interface GossipService {
  start(): Promise<void>;
  setClusterId(clusterId: string): void;
  setSource(source: GossipSource): void;
  /** Every member as this one sees it; its own record holds its facts as they are now. */
  snapshot(): GossipSnapshot;
  close(): void;
}

const tickMs = 100;
const sourceEveryMs = 500;
const sendsPerTickMax = 32;
const resolveEveryMs = 60_000;

export function createGossip(opts: GossipDriverOptions): GossipService {
  return new UdpGossip(opts);
}

class UdpGossip implements GossipService {
  private readonly timings: GossipTimings;
  private readonly log: Logger;
  private socket: Bun.udp.Socket<"uint8array"> | null = null;
  private timer: ReturnType<typeof setInterval> | null = null;
  private clusterId = "";
  private key: GossipKey | null = null;
  private core: GossipCore | null = null;
  private source: GossipSource | null = null;
  private membersText = "";
  /** Member id → "host:port" as the node names it, and its resolved IP. */
  private readonly addresses = new Map<string, { peer: string; host: string; port: number; ip: string | null; resolvedMs: number }>();
  private readonly dropped = Object.fromEntries(dropReasons.map((r) => [r, 0])) as Record<DropReason, number>;
  private sentThisTick = 0;
  private sourceReadMs = -Infinity;
  /** ip:port → its latest refusal; insertion order is refusal order (re-inserted on each). */
  private readonly refusedSenders = new Map<string, RefusedSender & { loggedMs: number }>();
  private refusalLogWindowMs = Number.NEGATIVE_INFINITY;
  /** When each unknown sender's address was last handed to the node (mayTellStranger); bounded. */
  private readonly strangersToldAt = new Map<string, number>();
  private strangerWindowMs = Number.NEGATIVE_INFINITY;
  private strangersThisWindow = 0;
  private refusalLogLines = 0;
  private refusalLinesUntold = 0;
  /** Errors the socket reported (mostly ICMP port unreachable from a member that is down). */
  private socketErrors = 0;
  private closed = false;

  constructor(private readonly opts: GossipDriverOptions) {
    this.timings = opts.timings ?? defaultGossipTimings;
    this.log = opts.logger;
  }

  async start(): Promise<void> {
    const socket = await Bun.udpSocket({
      hostname: this.opts.listen.host,
      port: this.opts.listen.port,
      binaryType: "uint8array",
      socket: {
        data: (_s, data, port, address) => this.onPacket(data, address, port),
        // A send to a member that is down comes back as ECONNREFUSED (ICMP port unreachable)
        // on a later receive: that is what probes are for, not an error of the socket.
        error: (_s, e) => {
          this.socketErrors += 1;
          if (this.log.enabled("trace")) this.log.trace("gossip: socket error", { error: errorMessage(e) });
        },
      },
    });
    this.socket = socket;
    this.timer = setInterval(() => this.tick(), tickMs);
    this.log.info("gossip: listening (UDP)", { address: `${this.opts.listen.host}:${socket.port}` });
  }

  setClusterId(clusterId: string): void {
    if (clusterId === this.clusterId || clusterId === "") return;
    this.clusterId = clusterId;
    this.key = (this.opts.keyFor ?? clusterDerivedKey)(clusterId);
    const now = Date.now();
    this.core = new GossipCore({
      self: this.opts.self,
      timings: this.timings,
      bodyBytesMax: this.timings.packetBytesMax - packetOverheadBytes(clusterId, this.key),
      prng: createPrng(now >>> 0, process.pid),
      logger: this.log,
      incarnation: now,
    });
    this.membersText = "";
    this.log.debug("gossip: cluster id set", { clusterId });
  }

  setSource(source: GossipSource): void {
    this.source = source;
  }

  snapshot(): GossipSnapshot {
    const now = Date.now();
    // What this member says of itself is read now: its copy for the others may be a source
    // period old (longer on a starved machine), and a node that just became healthy would
    // otherwise tell cluster-status it is still joining while its /health says healthy.
    if (this.core !== null && this.source !== null && !this.closed) {
      try {
        this.core.setFacts(this.source.facts());
      } catch {
        // The last read stands; a tick that fails to read them says why in the log.
      }
    }
    const empty: GossipCounters = { probes: 0, probesFailed: 0, indirectProbes: 0, suspicions: 0, deaths: 0, refutations: 0, joins: 0, packetsSent: 0, packetsReceived: 0 };
    return {
      self: this.opts.self,
      clusterId: this.clusterId,
      nowMs: now,
      timings: this.timings,
      members: this.core?.status(now) ?? [],
      counters: { ...(this.core?.counters ?? empty) },
      dropped: { ...this.dropped },
      refused: this.currentRefusals(now),
    };
  }

  close(): void {
    this.closed = true;
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.socket?.close();
    this.socket = null;
  }

  private tick(): void {
    const core = this.core;
    const source = this.source;
    if (core === null || source === null || this.closed) return;
    const now = Date.now();
    this.sentThisTick = 0;
    try {
      if (now - this.sourceReadMs >= sourceEveryMs) this.readSource(core, source, now);
      this.send(core.tick(now));
    } catch (e) {
      this.log.warn("gossip: tick failed", { error: errorMessage(e) });
    }
  }

  /** The node's members and facts: read every few ticks (the facts are at most that old). */
  private readSource(core: GossipCore, source: GossipSource, now: number): void {
    this.sourceReadMs = now;
    const members = source.members();
    const text = members.map((m) => `${m.id}@${m.peer}`).join(",");
    if (text !== this.membersText) {
      this.membersText = text;
      core.setMembers(members.map((m) => m.id), now);
      this.addresses.clear();
      for (const m of members) {
        const parsed = splitAddress(m.peer);
        if (parsed !== null) this.addresses.set(m.id, { peer: m.peer, ...parsed, ip: isIP(parsed.host) !== 0 ? parsed.host : null, resolvedMs: 0 });
      }
    }
    core.setFacts(source.facts());
  }

  private onPacket(data: Uint8Array, senderIp: string, senderPort: number): void {
    const core = this.core;
    const key = this.key;
    if (core === null || key === null) {
      this.dropped.no_cluster_id += 1;
      return;
    }
    const decoded = decodePacket(data, this.clusterId, key, this.timings.packetBytesMax);
    if (!decoded.ok) {
      this.dropped[decoded.reason] += 1;
      if (authFailures.has(decoded.reason)) this.refusedFrom(senderIp, senderPort, decoded.reason);
      else if (this.log.enabled("debug")) this.log.debug("gossip: packet dropped", { reason: decoded.reason, bytes: data.length });
      return;
    }
    const from = decoded.message.from;
    if (!this.addresses.has(from) || from === this.opts.self) {
      this.dropped.unknown_member += 1;
      if (from !== this.opts.self && this.mayTellStranger(from, Date.now())) {
        const own = decoded.message.facts.find((r) => r.id === from);
        if (own !== undefined) this.source?.stranger?.(from, own.facts.addresses.peer);
      }
      return;
    }
    if (this.opts.blocked?.().has(from) === true) return;
    if (this.log.enabled("trace")) this.log.trace("gossip: received", { type: decoded.message.type, from, seq: decoded.message.seq });
    this.send(core.receive(decoded.message, Date.now()));
  }

  private refusedFrom(ip: string, port: number, reason: DropReason): void {
    const now = Date.now();
    const host = canonicalIp(ip);
    const address = `${host.includes(":") ? `[${host}]` : host}:${port}`;
    const before = this.refusedSenders.get(address);
    this.refusedSenders.delete(address);
    if (before === undefined && this.refusedSenders.size >= refusedSendersMax) this.evictRefusedSender();
    let member: string | null = null;
    for (const [id, a] of this.addresses) if (a.ip !== null && a.port === port && canonicalIp(a.ip) === host) member = id;
    // At most once a minute per sender, whatever the reason, and a bounded number of senders a
    // minute in all: the cluster id (all a packet needs to get this far) travels in clear. Not
    // before the node's members were read (packets arrive from the moment the cluster id is
    // set): the line would lack the member's name for a minute. Its next packet is logged.
    const membersRead = this.sourceReadMs > Number.NEGATIVE_INFINITY;
    const due = membersRead && (before === undefined || now - before.loggedMs >= refusedLogEveryMs);
    const logNow = due && this.takeRefusalLogLine(now);
    this.refusedSenders.set(address, {
      address, member, reason, cause: refusalCause(reason), count: (before?.count ?? 0) + 1, lastMs: now,
      loggedMs: logNow ? now : (before?.loggedMs ?? Number.NEGATIVE_INFINITY),
    });
    if (!logNow) return;
    const untold = this.refusalLinesUntold;
    this.refusalLinesUntold = 0;
    this.log.warn(`gossip: packets from ${address}${member === null ? "" : ` (${member})`} fail authentication and are dropped: ${refusalCause(reason)}` +
      (untold > 0 ? ` (and ${untold} refusal${untold === 1 ? "" : "s"} of other senders not logged in the last minute)` : ""), {
      reason, hint: "give every member the same [gossip] key_file (during a rotation, every key listed on every member), or none on any; see README \"Gossip\"",
    });
  }

  /** The refused senders, newest first; one not heard for refusedForgetAfterMs is forgotten (its key was fixed, say). */
  private currentRefusals(now: number): RefusedSender[] {
    for (const [address, r] of this.refusedSenders) if (now - r.lastMs > refusedForgetAfterMs) this.refusedSenders.delete(address);
    return [...this.refusedSenders.values()].reverse().map(({ loggedMs: _, ...r }) => r);
  }

  /** Whether a refusal may be logged now (refusalLogLinesPerMinuteMax a minute); counts the ones that may not. */
  private takeRefusalLogLine(now: number): boolean {
    if (now - this.refusalLogWindowMs >= refusedLogEveryMs) {
      this.refusalLogWindowMs = now;
      this.refusalLogLines = 0;
    }
    if (this.refusalLogLines >= refusalLogLinesPerMinuteMax) {
      this.refusalLinesUntold += 1;
      return false;
    }
    this.refusalLogLines += 1;
    return true;
  }

  /**
   * A stranger's address goes to the node at most once per strangerEveryMs for each id, and
   * for strangersPerSecondMax ids a second in all: a removed member gossips on, and anyone who
   * knows the cluster id can forge such packets when no key file is set.
   */
  private mayTellStranger(id: string, now: number): boolean {
    const told = this.strangersToldAt.get(id);
    if (told !== undefined && now - told < strangerEveryMs) return false;
    if (now - this.strangerWindowMs >= 1_000) {
      this.strangerWindowMs = now;
      this.strangersThisWindow = 0;
    }
    if (this.strangersThisWindow >= strangersPerSecondMax) return false;
    this.strangersThisWindow += 1;
    if (told === undefined && this.strangersToldAt.size >= refusedSendersMax * 4) this.strangersToldAt.clear();
    this.strangersToldAt.set(id, now);
    return true;
  }

  /** Make room: the least recently refused sender that is no member goes first, so that strays cannot push a member out. */
  private evictRefusedSender(): void {
    let victim: string | undefined;
    for (const [address, r] of this.refusedSenders) {
      if (r.member === null) {
        victim = address;
        break;
      }
    }
    victim ??= this.refusedSenders.keys().next().value;
    if (victim !== undefined) this.refusedSenders.delete(victim);
  }

  private send(out: readonly Outgoing[]): void {
    const socket = this.socket;
    const key = this.key;
    if (socket === null || key === null) return;
    for (const o of out) {
      const address = this.addresses.get(o.to);
      if (address === undefined) continue;
      if (address.ip === null || Date.now() - address.resolvedMs > resolveEveryMs) this.resolve(o.to);
      if (address.ip === null || this.sentThisTick >= sendsPerTickMax) {
        this.dropped.send_failed += 1;
        continue;
      }
      this.sentThisTick += 1;
      const packet = encodePacket(o.message, this.clusterId, key);
      if (!socket.send(packet, address.port, address.ip)) this.dropped.send_failed += 1;
    }
  }

  /** Resolve a member's host name in the background; IP literals need nothing. */
  private resolve(id: string): void {
    const a = this.addresses.get(id);
    if (a === undefined) return;
    a.resolvedMs = Date.now();
    if (isIP(a.host) !== 0) return;
    lookup(a.host).then((r) => {
      if (this.addresses.get(id) === a) a.ip = r.address;
    }, (e: unknown) => this.log.debug("gossip: cannot resolve a member's peer host", { member: id, host: a.host, error: errorMessage(e) }));
  }
}

/** "host:port" or "[v6]:port" → parts; null when it does not parse. */
function splitAddress(raw: string): { host: string; port: number } | null {
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(raw) ?? /^([^:]+):(\d+)$/.exec(raw);
  if (m === null) return null;
  const port = Number(m[2]);
  return port >= 1 && port <= 65535 ? { host: m[1] ?? "", port } : null;
}

/** Why a packet of this cluster failed authentication, as an operator reads it. */
export function refusalCause(reason: DropReason): string {
  switch (reason) {
    case "key_mismatch":
      return "one of the two members has a [gossip] key_file and the other has none";
    case "decrypt_failed":
      return "it is encrypted with a key this node's [gossip] key_file does not hold";
    case "bad_mac":
      return "its authentication code does not match (altered on the way, or sealed with another cluster-derived key)";
    default:
      return reason;
  }
}
