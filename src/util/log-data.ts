// The replicated log's plain data: entries, the hard state, membership and its encoding.
// The consensus core (raft), the durable log (storage) and the state machine (store) all
// speak it. It lives here, below all three, rather than in raft: storage and store then
// depend on no part of the consensus algorithm (they persist and apply what they are given),
// raft stays pure and imports only util, and there is still one definition that cannot drift.
// raft/types.ts re-exports all of it as the core's vocabulary.

export type NodeId = string;

/**
 * normal: a state-machine command (opaque bytes for the core).
 * config: a membership change; data is encodeMembership() of the new membership.
 * noop: appended by a new leader to commit entries of earlier terms.
 */
export type EntryKind = "normal" | "config" | "noop";

export interface Entry {
  readonly term: number;
  readonly index: number;
  readonly kind: EntryKind;
  /** The leader's wall-clock time when the entry was proposed (ms since epoch); 0 for noop. */
  readonly timestampMs: number;
  readonly data: Uint8Array;
}

/** What must survive a crash besides the log. */
export interface HardState {
  readonly term: number;
  readonly vote: NodeId | null;
  readonly commit: number;
}

export interface Membership {
  readonly voters: readonly NodeId[];
  readonly learners: readonly NodeId[];
}

export const emptyMembership: Membership = Object.freeze({ voters: [], learners: [] });

/** Whether `nodeId` is the cluster's only member: its one voter, with no learner (no other node holds its log). */
export function isOnlyMember(m: Membership, nodeId: string): boolean {
  return m.voters.length === 1 && m.voters[0] === nodeId && m.learners.length === 0;
}

export function encodeMembership(m: Membership): Uint8Array {
  return new TextEncoder().encode(JSON.stringify({ voters: [...m.voters], learners: [...m.learners] }));
}

export function decodeMembership(data: Uint8Array): Membership | null {
  try {
    return membershipOf(JSON.parse(new TextDecoder().decode(data)));
  } catch {
    return null;
  }
}

/** A membership read from JSON: lists of node ids, or null when `v` is not one. */
export function membershipOf(v: unknown): Membership | null {
  if (typeof v !== "object" || v === null) return null;
  const { voters, learners } = v as { voters?: unknown; learners?: unknown };
  if (!Array.isArray(voters) || !Array.isArray(learners)) return null;
  if (!voters.every((x) => typeof x === "string") || !learners.every((x) => typeof x === "string")) return null;
  // A node is named once: a configuration that lists one twice was not written by svc.
  if (new Set([...voters, ...learners]).size !== voters.length + learners.length) return null;
  return { voters: voters as string[], learners: learners as string[] };
}
