// Membership as the log defines it. Following the Raft dissertation (§4.1), a node uses the
// latest configuration entry in its log as soon as the entry is appended, committed or not,
// and falls back to the previous one if that entry is truncated away. Changes add or remove
// one voter at a time, so any two successive configurations share a majority.

import type { Entry, Membership, NodeId, SnapshotMeta } from "./types.ts";
import { decodeMembership } from "./types.ts";

export type MembershipChange =
  | { readonly kind: "add_voter"; readonly id: NodeId }
  | { readonly kind: "add_learner"; readonly id: NodeId }
  | { readonly kind: "promote"; readonly id: NodeId }
  | { readonly kind: "remove"; readonly id: NodeId };

export function isVoter(m: Membership, id: NodeId): boolean {
  return m.voters.includes(id);
}

export function isLearner(m: Membership, id: NodeId): boolean {
  return m.learners.includes(id);
}

export function isMember(m: Membership, id: NodeId): boolean {
  return isVoter(m, id) || isLearner(m, id);
}

export function allMembers(m: Membership): NodeId[] {
  return [...m.voters, ...m.learners];
}

export function membershipEquals(a: Membership, b: Membership): boolean {
  const same = (x: readonly NodeId[], y: readonly NodeId[]): boolean =>
    x.length === y.length && [...x].sort().every((v, i) => v === [...y].sort()[i]);
  return same(a.voters, b.voters) && same(a.learners, b.learners);
}

/** The membership after change, or a reason why the change makes no sense against m. */
export function applyChange(m: Membership, change: MembershipChange): { ok: true; membership: Membership } | { ok: false; reason: string } {
  const { id } = change;
  if (id.length === 0) return { ok: false, reason: "node id is empty" };
  switch (change.kind) {
    case "add_voter":
      if (isMember(m, id)) return { ok: false, reason: `${id} is already a ${isVoter(m, id) ? "voter" : "learner (use promote)"}` };
      return { ok: true, membership: { voters: [...m.voters, id], learners: [...m.learners] } };
    case "add_learner":
      if (isMember(m, id)) return { ok: false, reason: `${id} is already a member` };
      return { ok: true, membership: { voters: [...m.voters], learners: [...m.learners, id] } };
    case "promote":
      if (!isLearner(m, id)) return { ok: false, reason: isVoter(m, id) ? `${id} is a voter already` : `${id} is not a member of the cluster (add it with add-node)` };
      return { ok: true, membership: { voters: [...m.voters, id], learners: m.learners.filter((x) => x !== id) } };
    case "remove":
      if (!isMember(m, id)) return { ok: false, reason: `${id} is not a member` };
      if (isVoter(m, id) && m.voters.length === 1) return { ok: false, reason: `${id} is the last voter` };
      return { ok: true, membership: { voters: m.voters.filter((x) => x !== id), learners: m.learners.filter((x) => x !== id) } };
  }
}

/** Validates a membership read from a peer or the log: ids non-empty and distinct. */
export function isWellFormedMembership(m: Membership): boolean {
  if (typeof m !== "object" || m === null || !Array.isArray(m.voters) || !Array.isArray(m.learners)) return false;
  const all = allMembers(m);
  return all.every((id) => typeof id === "string" && id.length > 0) && new Set(all).size === all.length;
}

/**
 * The configuration entries present in the log, on top of a base membership (the snapshot's,
 * or the one the node was started with). current() is always the latest.
 */
export class MembershipHistory {
  private base: Membership;
  /** Config entries after the base, by increasing index. */
  private configs: { index: number; membership: Membership }[] = [];

  constructor(base: Membership) {
    this.base = base;
  }

  current(): Membership {
    return this.configs.at(-1)?.membership ?? this.base;
  }

  /** The membership in force at index: the latest config entry at or before it, else the base. */
  at(index: number): Membership {
    let m = this.base;
    for (const c of this.configs) {
      if (c.index > index) break;
      m = c.membership;
    }
    return m;
  }

  /** Whether `id` is a member of the base or of any configuration in the log. */
  named(id: string): boolean {
    const names = (m: Membership): boolean => m.voters.includes(id) || m.learners.includes(id);
    return names(this.base) || this.configs.some((c) => names(c.membership));
  }

  /** Index of the latest config entry at or before index, 0 when the membership in force there is the base. */
  configIndexAt(index: number): number {
    let at = 0;
    for (const c of this.configs) {
      if (c.index > index) break;
      at = c.index;
    }
    return at;
  }

  /** Index of the latest config entry in the log, 0 when the membership comes from the base. */
  latestConfigIndex(): number {
    return this.configs.at(-1)?.index ?? 0;
  }

  /** Records config entries among appended entries. Malformed config data is ignored (and reported). */
  onAppend(entries: readonly Entry[], onMalformed: (e: Entry) => void): void {
    for (const e of entries) {
      if (e.kind !== "config") continue;
      const m = decodeMembership(e.data);
      if (m === null || !isWellFormedMembership(m)) {
        onMalformed(e);
        continue;
      }
      this.configs.push({ index: e.index, membership: m });
    }
  }

  /** Entries from index on were removed from the log. */
  onTruncate(fromIndex: number): void {
    for (let last = this.configs.at(-1); last !== undefined && last.index >= fromIndex; last = this.configs.at(-1)) this.configs.pop();
  }

  /** The log now starts after snapshot: its membership becomes the base. */
  onSnapshot(meta: SnapshotMeta): void {
    this.configs = this.configs.filter((c) => c.index > meta.index);
    this.base = meta.membership;
  }
}
