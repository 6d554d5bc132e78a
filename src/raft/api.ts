// The shapes the node driver exchanges with RaftCore: options, the state loaded from disk,
// the Ready record, results of client-facing calls, and status.

import type { Logger, Prng } from "../util/index.ts";
import type { Message } from "./messages.ts";
import type { ProgressState } from "./progress.ts";
import type { Entry, HardState, Membership, NodeId, Role, SnapshotMeta } from "./types.ts";

export interface RaftOptions {
  readonly id: NodeId;
  /** Followers campaign after a randomized timeout in [T, 2T) ticks without hearing from a leader. */
  readonly electionTimeoutTicks: number;
  readonly heartbeatTicks: number;
  readonly prng: Prng;
  readonly logger: Logger;
  /** Ask "could I win?" before raising the term, so a node that was cut off does not disrupt. */
  readonly preVote: boolean;
  /** A leader that has not heard from a quorum within an election timeout steps down. */
  readonly checkQuorum: boolean;
  /** Per follower: appends sent and not yet acknowledged while replicating. */
  readonly maxInflightAppends: number;
  /**
   * Per follower: bytes of entry data sent and not yet acknowledged (default unbounded). With
   * maxBytesPerAppend it bounds what one turn encodes for a member far behind.
   */
  readonly maxInflightBytes?: number;
  readonly maxEntriesPerAppend: number;
  readonly maxBytesPerAppend: number;
  /** Bound on uncommitted entries on the leader and on pending ReadIndex requests. */
  readonly maxPendingProposals: number;
  /** Bound on Ready.committed; more come in the next Ready. Default 4096. */
  readonly maxCommittedEntriesPerReady?: number;
  /**
   * A member that needs entries this core has compacted from memory is first sent them from
   * the node's log store (Ready.fetches, answered through fetched()); a snapshot only when
   * the store no longer holds them. Default false: straight to a snapshot.
   */
  readonly catchUpFromLogStore?: boolean;
}

/**
 * Leader → node: read committed entries from..through back out of the log store and hand
 * them to fetched(). `from` is the prevIndex of the append they become (the first entry read
 * gives its prevTerm); the read stops once the entries after it reach bytesMax of data.
 */
export interface LogFetch {
  /** Names this request: an answer to an older one is stale and ignored. */
  readonly seq: number;
  /** The member the entries are for. */
  readonly to: NodeId;
  readonly from: number;
  /** The last compacted index: the core holds in memory everything after it. */
  readonly through: number;
  readonly bytesMax: number;
}

/**
 * A member told this node that the configuration committed at configIndex leaves it out, and
 * this node held no configuration that late: it was removed from the cluster while cut off
 * (RaftCore.handleNotMember). In force until this node's commit index reaches configIndex (its
 * own log then says whether it is a member); persisted by the node, so that a restart keeps it.
 */
export interface RemovalNotice {
  readonly configIndex: number;
  /** The member that said so. */
  readonly by: NodeId;
}

/** What the node loaded from disk at start. */
export interface RaftState {
  readonly hardState: HardState;
  /** The latest snapshot; the log before it is compacted. */
  readonly snapshot: SnapshotMeta | null;
  /** Log entries after the snapshot, in order. */
  readonly entries: readonly Entry[];
  /**
   * Membership to use when neither the snapshot nor any config entry defines one (a node
   * started from a bootstrap configuration). Otherwise it is derived from snapshot and log.
   */
  readonly membership?: Membership;
  /** The index the state machine has already applied (it records it with its data). Default: snapshot index. */
  readonly appliedIndex?: number;
  /** A removal this node learned of and persisted (see RemovalNotice); ignored once the log reaches it. */
  readonly removal?: RemovalNotice | null;
}

export interface ReadState {
  readonly requestId: number;
  /** Serve the read once the state machine has applied at least this index. */
  readonly index: number;
}

/**
 * One batch of work for the node, in this order: install snapshot (if any), append entries and
 * save hardState (fsync when mustSync), send messages, apply committed, then advance(ready).
 */
export interface Ready {
  /** Changed since the last Ready: persist. */
  readonly hardState: HardState | null;
  /** To append durably; entries[0].index may be <= the last stored index: the stored suffix from there is replaced. */
  readonly entries: readonly Entry[];
  /** A snapshot from the leader to install (the node already holds its verified data) before persisting entries. */
  readonly snapshot: SnapshotMeta | null;
  /**
   * Send after entries, hardState and snapshot are durable. The one allowed shortcut: once
   * term and vote are durable, every message except append_response may leave before the
   * entries' fsync completes (so a leader's appends overlap its own fsync; it counts its
   * own copy only at advance()). For every snapshot message the node streams the data and
   * then calls reportSnapshot(to, ok) once; if it no longer holds that snapshot, ok=false.
   */
  readonly messages: readonly Message[];
  /** Apply in order, after persisting. */
  readonly committed: readonly Entry[];
  readonly readStates: readonly ReadState[];
  /** Entries to read back from the log store for members behind the in-memory log; any time after ready(). */
  readonly fetches: readonly LogFetch[];
  /** Whether entries, term or vote changed, so the writes must be fsynced before sending. */
  readonly mustSync: boolean;
}

export type NotLeader = { readonly ok: false; readonly code: "NOT_LEADER"; readonly leaderId: NodeId | null };

export type ProposeResult =
  | { readonly ok: true; readonly index: number; readonly term: number }
  | NotLeader
  | { readonly ok: false; readonly code: "PROPOSALS_FULL" };

export type MembershipChangeResult =
  | ProposeResult
  | { readonly ok: false; readonly code: "CHANGE_IN_PROGRESS" }
  | { readonly ok: false; readonly code: "INVALID_CHANGE"; readonly reason: string };

export type ReadIndexResult = { readonly ok: true } | NotLeader | { readonly ok: false; readonly code: "READS_FULL" };

export type TransferResult =
  | { readonly ok: true }
  | NotLeader
  | { readonly ok: false; readonly code: "INVALID_TRANSFER"; readonly reason: string };

export interface PeerProgress {
  readonly match: number;
  readonly next: number;
  readonly state: ProgressState;
  /** Appends sent and not yet acknowledged. */
  readonly inflight: number;
  readonly recentActive: boolean;
  /** The member said its disk is full: it is sent no appends until it has room. */
  readonly diskFull: boolean;
  readonly learner: boolean;
  /** Ticks since the member was last heard from (0 for this node; large when never). */
  readonly ticksSinceHeard: number;
}

/** A leader's append that would replace entries this node committed: it is of another history. */
export interface Divergence {
  readonly leader: NodeId;
  /** The leader's term. */
  readonly term: number;
  /** The first index at which the leader's entries differ from this node's. */
  readonly index: number;
  /** This node's commit index then. */
  readonly commit: number;
}

export interface RaftStatus {
  readonly id: NodeId;
  readonly role: Role;
  readonly term: number;
  readonly vote: NodeId | null;
  readonly leaderId: NodeId | null;
  readonly commit: number;
  readonly applied: number;
  readonly lastIndex: number;
  readonly lastTerm: number;
  readonly persistedIndex: number;
  readonly snapshotIndex: number;
  readonly membership: Membership;
  /** Leader only: every member's replication state (its own included). */
  readonly progress: Readonly<Record<NodeId, PeerProgress>>;
  readonly leadTransferee: NodeId | null;
  readonly pendingReadCount: number;
  /** Messages dropped, by reason (stale term, malformed, ...). */
  readonly droppedMessages: Readonly<Record<string, number>>;
}
