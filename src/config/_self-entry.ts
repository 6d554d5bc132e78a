// This node's own entry in [cluster] members against its [listen] addresses: the other members
// dial the entry, so a port there that the node does not listen on leaves it unreachable.
// Reported by --validate only: serve starts, since after `set-member` moved the node the
// cluster's replicated addresses are the ones dialled, and the file may follow at leisure.

import { isIPv4, isIPv6 } from "node:net";
import { isWildcardHost } from "./address.ts";
import type { IndexedMember } from "./_members.ts";
import type { Problems } from "./_problems.ts";
import type { Address } from "./types.ts";

type Listen = Readonly<Record<"client" | "admin" | "peer", Address | undefined>>;

export function checkSelfEntry(nodeId: string | undefined, listen: Listen, members: readonly IndexedMember[], problems: Problems): void {
  const own = members.find((m) => m.member.id === nodeId);
  if (own === undefined) return;
  for (const key of ["peer", "client", "admin"] as const) {
    const bound = listen[key];
    if (bound === undefined) continue;
    const entry = own.member[key];
    const why = entry.port !== bound.port ? `port ${entry.port} is not the port it listens on`
      : hostsSurelyDiffer(entry.host, bound.host) ? `it listens only on ${bound.host}`
      : null;
    if (why === null) continue;
    problems.add(["cluster", "members", own.index, key],
      `this node's own entry (${JSON.stringify(own.member.id)}) gives ${key} = ${JSON.stringify(entry.raw)}, but listen.${key} = ${JSON.stringify(bound.raw)}: ${why}, ` +
        `so the other members, which dial the entry, cannot reach this node; make them agree (after \`svc admin set-member\` moved it, write its new addresses here)`);
  }
}

/**
 * Only where that is certain: both are IP addresses of one family and the node binds a single
 * one. A bind-all address takes any, and a host name may resolve to the address bound.
 */
function hostsSurelyDiffer(dialled: string, bound: string): boolean {
  if (isWildcardHost(bound)) return false;
  if (isIPv4(dialled) && isIPv4(bound)) return dialled !== bound;
  if (isIPv6(dialled) && isIPv6(bound)) return canonicalIpv6(dialled) !== canonicalIpv6(bound);
  return false;
}

/** "0:0::1" and "::1" are one address: the URL parser writes IPv6 hosts in their canonical form. */
function canonicalIpv6(host: string): string {
  return new URL(`http://[${host}]/`).hostname;
}
