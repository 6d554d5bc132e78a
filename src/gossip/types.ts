// What gossip carries: each member's state as others judge it (alive, suspect, dead, with the
// incarnation that orders claims about it) and what each member reports about itself (its
// facts, and its own view of the others). The messages are plain values; codec.ts puts them
// on the wire, core.ts decides what to send.

export type MemberState = "alive" | "suspect" | "dead";

export const memberStates: readonly MemberState[] = ["alive", "suspect", "dead"];

/** What a member reports about itself. The node fills it (src/node/gossip.ts). */
export interface MemberFacts {
  /** Raft role: follower, pre_candidate, candidate, leader; or learner (a follower that does not vote), or removed (no longer a member). */
  readonly role: string;
  readonly term: number;
  /** The leader this member follows (null: none known). */
  readonly leader: string | null;
  readonly commitIndex: number;
  readonly appliedIndex: number;
  readonly version: string;
  /** Recovery state (SPEC §3.1): starting … healthy. */
  readonly recovery: string;
  /** The member's data directory's disk is full (absent from members that do not say). */
  readonly diskFull?: boolean;
  /**
   * The member lost log entries it held (its WAL emptied or cut) and does not vote until a
   * leader gives them back (absent from members that do not say).
   */
  readonly lostLog?: boolean;
  readonly addresses: { readonly peer: string; readonly client: string; readonly admin: string };
  /** This member's Raft links: peer id → a working connection both ways. */
  readonly raftLinks: Readonly<Record<string, boolean>>;
  /** WAL archiving as this member sees it (null: wal.archive_command is not set there). */
  readonly archive: {
    /** The cluster's replicated mark: every entry up to here is archived. */
    readonly archivedThrough: number;
    readonly lastArchivedSegment: string | null;
    /** The last archive_command run failed. */
    readonly failing: boolean;
    readonly segmentsWaiting: number;
  } | null;
}

/** A member's facts as it last published them, with its view of the others. */
export interface FactsRecord {
  readonly id: string;
  /** The member's incarnation when it published; with seq, orders records (newest wins). */
  readonly incarnation: number;
  /** Raised by the member at every change of its facts or view within one incarnation. */
  readonly seq: number;
  readonly facts: MemberFacts;
  /** The member's view of every other member. */
  readonly view: Readonly<Record<string, MemberState>>;
}

/** A claim about one member's state (SWIM's alive/suspect/confirm messages), piggybacked. */
export interface StateUpdate {
  readonly id: string;
  readonly state: MemberState;
  readonly incarnation: number;
}

interface Envelope {
  readonly from: string;
  /** Dissemination: claims about members, a bounded number per packet. */
  readonly updates: readonly StateUpdate[];
  /** The sender's own facts first, then others' as room allows. */
  readonly facts: readonly FactsRecord[];
}

export type GossipMessage =
  | (Envelope & { readonly type: "ping"; readonly seq: number })
  | (Envelope & { readonly type: "ack"; readonly seq: number })
  | (Envelope & { readonly type: "ping_req"; readonly seq: number; readonly target: string });

/** A message to send to a member, by id (the driver knows the addresses). */
export interface Outgoing {
  readonly to: string;
  readonly message: GossipMessage;
}

/** One member as this node sees it. */
export interface MemberStatus {
  readonly id: string;
  readonly state: MemberState;
  readonly incarnation: number;
  /** Whether this node has ever heard of the member being alive. */
  readonly everAlive: boolean;
  /** When the state last changed, and when a packet from the member last arrived (null: never). */
  readonly sinceMs: number;
  readonly lastHeardMs: number | null;
  /**
   * The member's newest facts known here, and when they were last known current (null: none
   * yet): when they arrived, or when the member itself last sent them again unchanged.
   */
  readonly record: FactsRecord | null;
  readonly recordAtMs: number | null;
}

export interface GossipCounters {
  probes: number;
  probesFailed: number;
  indirectProbes: number;
  suspicions: number;
  deaths: number;
  refutations: number;
  joins: number;
  packetsSent: number;
  packetsReceived: number;
}

export interface GossipTimings {
  /** One probe per period, round robin over the other members. */
  readonly protocolPeriodMs: number;
  /** Without an ack by then, ask `indirectProbes` others to probe the target. */
  readonly ackTimeoutMs: number;
  readonly indirectProbes: number;
  /** A suspect that does not refute within this is declared dead. */
  readonly suspicionTimeoutMs: number;
  /** Bytes a packet may take on the wire (headers and MAC included). */
  readonly packetBytesMax: number;
}

export const defaultGossipTimings: GossipTimings = {
  protocolPeriodMs: 1_000,
  ackTimeoutMs: 400,
  indirectProbes: 2,
  suspicionTimeoutMs: 5_000,
  packetBytesMax: 1_400,
};
