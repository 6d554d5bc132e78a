// Too many voters lost their log: a member that lost entries it held does not vote until a
// leader gives them back (it may have acknowledged writes no other member holds), so when the
// voters that kept their log are fewer than a majority, no leader can ever be elected and none
// of them gets anything back. Nothing automatic is safe then; this names the members and the
// operator's ways out, for /health, the log and cluster-status alike.

import { majority } from "../raft/index.ts";

export interface LostLogQuorum {
  /** Every voter, sorted. */
  readonly voters: readonly string[];
  /** The voters known to have lost their log, sorted. */
  readonly lost: readonly string[];
}

/**
 * The voters that lost their log when they leave too few to elect a leader; null otherwise.
 * `lost` holds what is known: a voter not heard from counts as one that kept its log (it may
 * come back and vote), so this never speaks too early.
 */
export function lostLogQuorum(voters: readonly string[], lost: (id: string) => boolean): LostLogQuorum | null {
  if (voters.length < 2) return null;
  const sorted = [...voters].sort();
  const lostIds = sorted.filter(lost);
  if (sorted.length - lostIds.length >= majority(sorted.length)) return null;
  return { voters: sorted, lost: lostIds };
}

/** A member as this node's gossip sees it: only what lostLogQuorumSeen reads. */
export interface GossipedMember {
  readonly id: string;
  readonly state: string;
  readonly record: { readonly facts: { readonly role: string; readonly term: number; readonly lostLog?: boolean } } | null;
}

/**
 * lostLogQuorum as this node sees it through gossip: itself by what it knows, the others by
 * what those alive now say (a stopped one may come back with its log). A member alive that
 * says it leads, in this node's term or a later one, is a leader that exists (this node may
 * only be cut off from it): nothing to say then, whatever the count.
 */
export function lostLogQuorumSeen(
  voters: readonly string[], self: { readonly id: string; readonly lostLog: boolean; readonly term: number }, members: readonly GossipedMember[],
): LostLogQuorum | null {
  const alive = members.filter((m) => m.id !== self.id && m.state === "alive");
  if (alive.some((m) => m.record?.facts.role === "leader" && m.record.facts.term >= self.term)) return null;
  return lostLogQuorum(voters, (id) => id === self.id ? self.lostLog : alive.some((m) => m.id === id && m.record?.facts.lostLog === true));
}

/** What is wrong and what to do, in one text. */
export function lostLogQuorumText(q: LostLogQuorum): string {
  const kept = q.voters.filter((id) => !q.lost.includes(id));
  const which = `(${q.lost.join(", ")} of ${q.voters.join(", ")})`;
  const what = q.lost.length >= majority(q.voters.length) ? `a majority of the voters lost their log ${which}` : `too many voters lost their log ${which}`;
  return `${what}: no leader can be elected. A member that lost log entries it held (raft/wal/ emptied or cut) does not vote until a leader gives them back, ` +
    `since it may have acknowledged writes no other member holds, and the members that kept their log (${kept.length === 0 ? "none" : kept.join(", ")}) are fewer than a majority. ` +
    // Every member restored from one archive made by hand (no raft/RESTORED) is the common case of all of them.
    (kept.length === 0 ? "If every member was restored from a copy of the same snapshot made by hand (an archive without raft/RESTORED), stop them all, " +
      "run `svc admin init-cluster --bootstrap` on each, and start them: one cluster with the archive's data. " : "") +
    "If their raft/wal/ was moved aside, stop each of them, put its own segments back into raft/wal/ (in place of what is there now), remove raft/LOST_LOG, and start it. " +
    (kept.length === 0 ? "Otherwise what they held after their own newest snapshots is gone but for what your backups hold: "
      : `Otherwise the writes they held are gone but for what ${kept.join(", ")} and your backups hold: `) +
    "restore every member from the newest full backup " +
    "(README, Backup and restore), or stop every member, run `svc admin init-cluster --bootstrap --force` on the one whose data you keep (a new cluster of what it holds; " +
    "acknowledged writes it lacks are lost), remove the contents of raft/ and store/ and <data_dir>/MEMBER on the others, and start them all: they are rebuilt from it";
}
