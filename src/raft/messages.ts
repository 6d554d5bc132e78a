// The messages Raft peers exchange. Every message names its sender, its receiver and the
// sender's term; the node's transport carries them (encoded by codec.ts) and hands them to
// RaftCore.step() on the receiving side.

import type { Entry, NodeId, SnapshotMeta } from "./types.ts";

interface Envelope {
  readonly from: NodeId;
  readonly to: NodeId;
  readonly term: number;
}

/** A pre-candidate asks whether it could win; term is the term it would campaign in. */
export interface PreVoteMessage extends Envelope {
  readonly type: "pre_vote";
  readonly lastIndex: number;
  readonly lastTerm: number;
}

export interface VoteMessage extends Envelope {
  readonly type: "vote";
  readonly lastIndex: number;
  readonly lastTerm: number;
  /** Set when the campaign follows a leadership transfer: voters skip the leader-lease check. */
  readonly transfer: boolean;
}

export interface PreVoteResponseMessage extends Envelope {
  readonly type: "pre_vote_response";
  readonly reject: boolean;
}

export interface VoteResponseMessage extends Envelope {
  readonly type: "vote_response";
  readonly reject: boolean;
}

export interface AppendMessage extends Envelope {
  readonly type: "append";
  readonly prevIndex: number;
  readonly prevTerm: number;
  /** Contiguous, starting at prevIndex + 1. */
  readonly entries: readonly Entry[];
  readonly commit: number;
}

/**
 * accepted (reject=false): index is the last index the follower now holds from this append.
 * rejected: index is the prevIndex that did not match; hintIndex/hintTerm name the follower's
 * last entry whose term is <= the leader's prevTerm, so the leader can skip a whole term at once.
 */
export interface AppendResponseMessage extends Envelope {
  readonly type: "append_response";
  readonly reject: boolean;
  readonly index: number;
  readonly hintIndex: number;
  readonly hintTerm: number;
}

/** commit is capped at what the follower is known to hold; readSeq confirms ReadIndex rounds. */
export interface HeartbeatMessage extends Envelope {
  readonly type: "heartbeat";
  readonly commit: number;
  readonly readSeq: number;
}

/**
 * diskFull: the follower cannot persist entries (its disk is full): it answers heartbeats but
 * takes no appends, so the leader sends it none and does not count it toward writing a quorum.
 */
export interface HeartbeatResponseMessage extends Envelope {
  readonly type: "heartbeat_response";
  readonly readSeq: number;
  readonly diskFull?: boolean;
}

/**
 * Leader → follower: "install the snapshot at meta". The data travels out of band; on the
 * follower the node steps this message only once the data has arrived and been verified.
 */
export interface SnapshotMessage extends Envelope {
  readonly type: "snapshot";
  readonly snapshot: SnapshotMeta;
}

/** Leader → transfer target: campaign now, the leader is handing over. */
export interface TimeoutNowMessage extends Envelope {
  readonly type: "timeout_now";
}

/** Follower → leader: a ReadIndex request the follower's node received. */
export interface ReadIndexMessage extends Envelope {
  readonly type: "read_index";
  readonly requestId: number;
}

/** Leader → follower: the read index for the follower's request, once leadership is confirmed. */
export interface ReadIndexResponseMessage extends Envelope {
  readonly type: "read_index_response";
  readonly requestId: number;
  readonly index: number;
}

/**
 * Member → a node outside its committed configuration that sent it Raft traffic: "the
 * configuration in force at configIndex, at or below my commit index, does not name you".
 * configIndex is that configuration entry's index (its snapshot's index when the configuration
 * came with a snapshot). It is a statement about the committed log, not about terms: the
 * receiver never takes its term from it, and concludes it was removed only when it is certain
 * (see RaftCore.handleNotMember). A node of a version without it drops it as an unknown type.
 */
export interface NotMemberMessage extends Envelope {
  readonly type: "not_member";
  readonly configIndex: number;
}

export type Message =
  | PreVoteMessage
  | VoteMessage
  | PreVoteResponseMessage
  | VoteResponseMessage
  | AppendMessage
  | AppendResponseMessage
  | HeartbeatMessage
  | HeartbeatResponseMessage
  | SnapshotMessage
  | TimeoutNowMessage
  | ReadIndexMessage
  | ReadIndexResponseMessage
  | NotMemberMessage;

export type MessageType = Message["type"];

export const messageTypes: readonly MessageType[] = [
  "pre_vote",
  "vote",
  "pre_vote_response",
  "vote_response",
  "append",
  "append_response",
  "heartbeat",
  "heartbeat_response",
  "snapshot",
  "timeout_now",
  "read_index",
  "read_index_response",
  "not_member",
];
