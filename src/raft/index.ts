// The pure Raft core: the node driver's whole view of consensus.

export { RaftCore, safetyDropReasons } from "./core.ts";
export type {
  RaftOptions,
  LogFetch,
  RaftState,
  Ready,
  ReadState,
  ProposeResult,
  MembershipChangeResult,
  ReadIndexResult,
  TransferResult,
  NotLeader,
  PeerProgress,
  RaftStatus,
  Divergence,
  RemovalNotice,
} from "./api.ts";
export type {
  Message,
  MessageType,
  PreVoteMessage,
  VoteMessage,
  PreVoteResponseMessage,
  VoteResponseMessage,
  AppendMessage,
  AppendResponseMessage,
  HeartbeatMessage,
  HeartbeatResponseMessage,
  SnapshotMessage,
  TimeoutNowMessage,
  ReadIndexMessage,
  ReadIndexResponseMessage,
  NotMemberMessage,
} from "./messages.ts";
export { messageTypes } from "./messages.ts";
export type { MembershipChange } from "./membership.ts";
export { applyChange, isVoter, isLearner, isMember } from "./membership.ts";
export { majority } from "./quorum.ts";
export type { ProgressState } from "./progress.ts";
export type { Entry, EntryKind, HardState, Membership, NodeId, Role, SnapshotMeta } from "./types.ts";
export { emptyMembership, encodeMembership, decodeMembership } from "./types.ts";
export { encodeMessage, decodeMessage, codecVersion, nodeIdBytesMax } from "./codec.ts";
export type { DecodeResult, DecodeError, DecodeErrorCode } from "./codec.ts";
export type { RaftErrorCode, RaftRefusalCode } from "./errors.ts";
