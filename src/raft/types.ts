// The data the Raft core exchanges with the node that drives it. The core is pure: it
// never touches a disk, a socket, a timer, a clock or a random source of its own.
//
// The log's plain data (entries, hard state, membership) is defined in util/log-data.ts, so
// that storage and store can persist and apply it without importing the consensus core.

import type { Membership } from "../util/log-data.ts";

export type { Entry, EntryKind, HardState, Membership, NodeId } from "../util/log-data.ts";
export { emptyMembership, encodeMembership, decodeMembership } from "../util/log-data.ts";

export interface SnapshotMeta {
  readonly index: number;
  readonly term: number;
  readonly membership: Membership;
}

export type Role = "follower" | "pre_candidate" | "candidate" | "leader";
