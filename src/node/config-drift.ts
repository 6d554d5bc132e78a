// Where this node's configuration file disagrees with the cluster it belongs to: a member of the
// replicated membership that [cluster] members leaves out, or lists at other addresses than the
// cluster replicated for it (add-node, set-member). The replicated addresses win while the node
// runs, but a node started on an empty data directory, and `init-cluster --bootstrap`, know only
// the file; and a member whose addresses are known neither way cannot be reached at all.

import type { Member } from "../config/index.ts";
import type { Membership } from "../raft/index.ts";
import type { MemberAddress } from "../store/index.ts";

export interface ConfigDrift {
  readonly id: string;
  /** This node's file's entry for the member; null: the file does not list it. */
  readonly inFile: MemberAddress | null;
  /** The addresses the cluster replicated for it; null: none (the file's entry is all there is). */
  readonly replicated: MemberAddress | null;
}

/**
 * Pure: every member of `membership` on which the file and the cluster disagree, in membership
 * order. This node itself is left out when the file does not list it (a lone node run from a
 * file with no members); a file that lists it is held to the same rule as for the others.
 */
export function configDrift(selfId: string, fileMembers: readonly Member[], membership: Membership, replicated: readonly MemberAddress[]): ConfigDrift[] {
  const drift: ConfigDrift[] = [];
  for (const id of [...membership.voters, ...membership.learners]) {
    const member = fileMembers.find((m) => m.id === id);
    const inFile = member === undefined ? null : { id, peer: member.peer.raw, client: member.client.raw, admin: member.admin.raw };
    const rep = replicated.find((m) => m.id === id) ?? null;
    if (inFile === null) {
      if (id !== selfId) drift.push({ id, inFile: null, replicated: rep });
    } else if (rep !== null && !sameAddresses(inFile, rep)) {
      drift.push({ id, inFile, replicated: rep });
    }
  }
  return drift;
}

/** Hosts are case-insensitive, as the configuration compares them. */
function sameAddresses(a: MemberAddress, b: MemberAddress): boolean {
  return (["peer", "client", "admin"] as const).every((k) => a[k].toLowerCase() === b[k].toLowerCase());
}

/** `{ id = "node4", peer = "…", client = "…", admin = "…" }`: the entry to write in [cluster] members. */
export function memberEntryToml(m: MemberAddress): string {
  return `{ id = ${JSON.stringify(m.id)}, peer = ${JSON.stringify(m.peer)}, client = ${JSON.stringify(m.client)}, admin = ${JSON.stringify(m.admin)} }`;
}
