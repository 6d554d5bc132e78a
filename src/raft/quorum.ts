// Majority arithmetic over a set of voters. Learners never appear here.

import type { NodeId } from "./types.ts";

export function majority(voterCount: number): number {
  return Math.floor(voterCount / 2) + 1;
}

/**
 * The highest index that a majority of voters hold: sort the voters' match indices in
 * descending order and take the majority-th one. 0 when there are no voters.
 */
export function quorumIndex(voters: readonly NodeId[], matchOf: (id: NodeId) => number): number {
  if (voters.length === 0) return 0;
  const matches = voters.map(matchOf).sort((a, b) => b - a);
  return matches[majority(voters.length) - 1] ?? 0;
}

export type VoteOutcome = "won" | "lost" | "pending";

/** Tally of a (pre-)vote: granted and rejected by voter id; responses from non-voters do not count. */
export function voteOutcome(voters: readonly NodeId[], votes: ReadonlyMap<NodeId, boolean>): VoteOutcome {
  let granted = 0;
  let rejected = 0;
  for (const id of voters) {
    const v = votes.get(id);
    if (v === true) granted++;
    else if (v === false) rejected++;
  }
  const need = majority(voters.length);
  if (granted >= need) return "won";
  if (rejected > voters.length - need) return "lost";
  return "pending";
}

/** Whether the voters for which has(id) is true form a majority. */
export function hasQuorum(voters: readonly NodeId[], has: (id: NodeId) => boolean): boolean {
  let n = 0;
  for (const id of voters) if (has(id)) n++;
  return n >= majority(voters.length);
}
