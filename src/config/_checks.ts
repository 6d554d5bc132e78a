// Checks that involve more than one key: run after every key has been read on its own, on
// the values that were valid, so that one mistake is not reported twice.

import { addressKey, isWildcardHost } from "./address.ts";
import type { IndexedMember } from "./_members.ts";
import { formatKeyPath } from "./_path.ts";
import type { Problems } from "./_problems.ts";
import { ELECTION_TO_HEARTBEAT_RATIO_MIN } from "./schema.ts";
import type { Address } from "./types.ts";

export function checkListenPorts(listen: Readonly<Record<"client" | "admin" | "peer", Address | undefined>>, problems: Problems): void {
  const seen = new Map<number, string>();
  for (const key of ["client", "admin", "peer"] as const) {
    const address = listen[key];
    if (address === undefined) continue;
    const other = seen.get(address.port);
    if (other !== undefined) {
      problems.add(["listen", key], `port ${address.port} is also used by listen.${other}; each listener needs its own port`);
    } else {
      seen.set(address.port, key);
    }
  }
}

export function checkRaftTimes(heartbeatIntervalMs: number | undefined, electionTimeoutMs: number | undefined, problems: Problems): void {
  if (heartbeatIntervalMs === undefined || electionTimeoutMs === undefined) return;
  const minMs = ELECTION_TO_HEARTBEAT_RATIO_MIN * heartbeatIntervalMs;
  if (electionTimeoutMs < minMs) {
    problems.add(
      ["raft", "election_timeout_ms"],
      `must be at least ${ELECTION_TO_HEARTBEAT_RATIO_MIN} × raft.heartbeat_interval_ms (${ELECTION_TO_HEARTBEAT_RATIO_MIN} × ${heartbeatIntervalMs} = ${minMs}), got ${electionTimeoutMs}; ` +
        `raise election_timeout_ms or lower heartbeat_interval_ms, or followers will campaign while the leader is healthy`,
    );
  }
}

export function checkMembers(members: readonly IndexedMember[], problems: Problems): void {
  const ids = new Map<string, number>();
  const addresses = new Map<string, string>();
  for (const { index, member } of members) {
    const firstIndex = ids.get(member.id);
    if (firstIndex !== undefined) {
      problems.add(["cluster", "members", index, "id"], `duplicate member id ${JSON.stringify(member.id)}, also cluster.members[${firstIndex}]; every member needs its own id`);
    } else {
      ids.set(member.id, index);
    }
    for (const kind of ["peer", "client", "admin"] as const) {
      const address = member[kind];
      const path = ["cluster", "members", index, kind];
      if (isWildcardHost(address.host)) {
        problems.add(path, `${address.raw} is a bind-all address that other nodes cannot dial; use this member's IP address or host name`);
      }
      const key = addressKey(address);
      const first = addresses.get(key);
      if (first !== undefined) {
        problems.add(path, `address ${address.raw} is also ${first}; every member and every port needs its own address`);
      } else {
        addresses.set(key, formatKeyPath(path));
      }
    }
  }
}

/** A node must find itself among the members it is given, and a bootstrapping node most of all. */
export function checkSelfInMembers(nodeId: string | undefined, bootstrap: boolean | undefined, memberIds: readonly string[] | undefined, problems: Problems): void {
  if (nodeId === undefined || memberIds === undefined) return;
  if (memberIds.length === 0) {
    if (bootstrap === true) {
      problems.add(
        ["cluster", "bootstrap"],
        `bootstrap = true needs cluster.members to list the first members, this node (${JSON.stringify(nodeId)}) among them; ` +
          `add { id = ${JSON.stringify(nodeId)}, peer = "host:port", client = "host:port", admin = "host:port" }`,
      );
    }
    return;
  }
  if (memberIds.includes(nodeId)) return;
  const ids = memberIds.join(", ");
  const lead = bootstrap === true ? "bootstrap = true but this node's" : "this node's";
  problems.add(
    ["cluster", "members"],
    `${lead} node_id ${JSON.stringify(nodeId)} is not among the members (${ids}); add a member with id = ${JSON.stringify(nodeId)} or fix node_id`,
  );
}
