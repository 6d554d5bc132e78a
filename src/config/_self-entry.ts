// This node's own entry in [cluster] members against its [listen] addresses: the other members
// dial the entry, so a port there that the node does not listen on leaves it unreachable.
// Reported by --validate only: serve starts, since after `set-member` moved the node the
// cluster's replicated addresses are the ones dialled, and the file may follow at leisure.

import { isIPv4, isIPv6 } from "node:net";
import { canonicalIp } from "../util/ip.ts";
import { isWildcardHost } from "./address.ts";
import type { IndexedMember } from "./_members.ts";
import type { Problems } from "./_problems.ts";
import type { Address } from "./types.ts";

type Listen = Readonly<Record<"client" | "admin" | "peer", Address | undefined>>;

/**
 * A problem where the entry surely cannot reach the node: a port it does not listen on at the
 * very address it binds (or at a loopback address of a node bound to all or to loopback). A
 * warning where something between may forward it (NAT, a container's port mapping, a public
 * address in front of the one bound): the entry names a port or an address other than the
 * listener's, and only the network knows whether it leads there.
 */
export function checkSelfEntry(nodeId: string | undefined, listen: Listen, members: readonly IndexedMember[], problems: Problems, warnings: Problems): void {
  const own = members.find((m) => m.member.id === nodeId);
  if (own === undefined) return;
  for (const key of ["peer", "client", "admin"] as const) {
    const bound = listen[key];
    if (bound === undefined) continue;
    const entry = own.member[key];
    const portDiffers = entry.port !== bound.port;
    const where = ["cluster", "members", own.index, key];
    const says = `this node's own entry (${JSON.stringify(own.member.id)}) gives ${key} = ${JSON.stringify(entry.raw)}, but listen.${key} = ${JSON.stringify(bound.raw)}`;
    if (portDiffers && surelyThisListener(entry.host, bound.host)) {
      problems.add(where, `${says}: port ${entry.port} is not the port it listens on, so the other members, which dial the entry, cannot reach this node; ` +
        "make them agree (after `svc admin set-member` moved it, write its new addresses here)");
    } else if (portDiffers || hostsSurelyDiffer(entry.host, bound.host)) {
      warnings.add(where, `${says}: unless the network forwards ${entry.raw} to it (NAT, a container's port mapping), the other members, which dial the entry, cannot reach this node`);
    }
  }
}

/** The entry's host is the address bound, or a loopback address of a node bound to all or to loopback. */
function surelyThisListener(dialled: string, bound: string): boolean {
  const d = canonicalIp(dialled);
  const b = canonicalIp(bound);
  if (d === b) return true;
  return isLoopback(d) && (isWildcardHost(bound) || isLoopback(b));
}

/**
 * Only where that is certain: both are IP addresses of one family and the node binds a single
 * one. A bind-all address takes any, and a host name may resolve to the address bound.
 */
function hostsSurelyDiffer(dialled: string, bound: string): boolean {
  if (isWildcardHost(bound)) return false;
  if (isIPv4(dialled) && isIPv4(bound)) return dialled !== bound;
  if (isIPv6(stripZone(dialled)) && isIPv6(stripZone(bound))) return canonicalIp(dialled) !== canonicalIp(bound);
  return false;
}

function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || (isIPv4(host) && host.startsWith("127."));
}

function stripZone(host: string): string {
  const at = host.indexOf("%");
  return at < 0 ? host : host.slice(0, at);
}
