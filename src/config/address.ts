// "host:port" as written in the config file; IPv6 hosts go in brackets ("[::1]:7878").
// A host is an IPv4 address, an IPv6 address in brackets, or a DNS name: anything else (a
// dotted quad with an octet past 255, say) is refused here, not at bind time.

import { isIPv4, isIPv6 } from "node:net";
import type { Address } from "./types.ts";

/**
 * One host name label: letters, digits, inner hyphens, at most 63 characters. Underscores
 * too: DNS forbids them in host names, but /etc/hosts and container networks use them.
 */
const dnsLabel = /^[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$/;

export type AddressParse = { readonly ok: true; readonly address: Address } | { readonly ok: false; readonly message: string };

export function parseAddress(raw: string): AddressParse {
  const bracketed = /^\[([^\]]+)\]:([^:]*)$/.exec(raw);
  const plain = /^([^:\s[\]]+):([^:]*)$/.exec(raw);
  const match = bracketed ?? plain;
  if (match === null) {
    return { ok: false, message: `expected "host:port" (IPv6 as "[::1]:7878"), got ${JSON.stringify(raw)}` };
  }
  const host = match[1] ?? "";
  const hostProblem = bracketed !== null ? (isIPv6(host) ? null : `${JSON.stringify(host)} in brackets is not an IPv6 address`) : checkHost(host);
  if (hostProblem !== null) return { ok: false, message: `${hostProblem}, in ${JSON.stringify(raw)}` };
  const portText = match[2] ?? "";
  const port = /^[0-9]{1,5}$/.test(portText) ? Number(portText) : NaN;
  if (!(port >= 1 && port <= 65535)) {
    return { ok: false, message: `port must be an integer between 1 and 65535, got ${JSON.stringify(portText)} in ${JSON.stringify(raw)}` };
  }
  return { ok: true, address: { host, port, raw } };
}

/** Why an unbracketed host is neither an IPv4 address nor a DNS name, or null. */
function checkHost(host: string): string | null {
  if (isIPv4(host)) return null;
  if (isIPv6(host)) return `IPv6 address ${host} must be written in brackets, e.g. [${host}]:7878`;
  const labels = host.split(".");
  // A name whose last label is all digits reads as an IPv4 address (999.1.1.1, 10.0.1): DNS
  // has no such top-level domain, and a resolver would not look it up as a name.
  if (/^[0-9]+$/.test(labels.at(-1) ?? "")) return `${JSON.stringify(host)} is not a valid IPv4 address (four numbers 0-255 separated by dots)`;
  if (host.length > 253 || !labels.every((l) => dnsLabel.test(l))) {
    return `${JSON.stringify(host)} is neither an IP address nor a host name (letters, digits, hyphens and underscores, in labels separated by dots)`;
  }
  return null;
}

/** Hosts that mean "every interface": fine to bind, useless for another node to dial. */
export function isWildcardHost(host: string): boolean {
  return host === "0.0.0.0" || host === "::" || host === "[::]";
}

/**
 * Where a process on this host reaches a listener: its address as written, a wildcard host
 * replaced by the loopback address of its family (0.0.0.0 → 127.0.0.1, :: → [::1]).
 */
export function localDialAddress(address: Address): string {
  if (!isWildcardHost(address.host)) return address.raw;
  return `${address.host === "0.0.0.0" ? "127.0.0.1" : "[::1]"}:${address.port}`;
}

/** The form used to compare addresses: hosts are case-insensitive. */
export function addressKey(address: Address): string {
  return `${address.host.toLowerCase()}:${address.port}`;
}
