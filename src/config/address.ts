// "host:port" as written in the config file; IPv6 hosts go in brackets ("[::1]:7878").

import type { Address } from "./types.ts";

export type AddressParse = { readonly ok: true; readonly address: Address } | { readonly ok: false; readonly message: string };

export function parseAddress(raw: string): AddressParse {
  const bracketed = /^\[([^\]]+)\]:([^:]*)$/.exec(raw);
  const plain = /^([^:\s[\]]+):([^:]*)$/.exec(raw);
  const match = bracketed ?? plain;
  if (match === null) {
    return { ok: false, message: `expected "host:port" (IPv6 as "[::1]:7878"), got ${JSON.stringify(raw)}` };
  }
  const host = match[1] ?? "";
  const portText = match[2] ?? "";
  const port = /^[0-9]{1,5}$/.test(portText) ? Number(portText) : NaN;
  if (!(port >= 1 && port <= 65535)) {
    return { ok: false, message: `port must be an integer between 1 and 65535, got ${JSON.stringify(portText)} in ${JSON.stringify(raw)}` };
  }
  return { ok: true, address: { host, port, raw } };
}

/** Hosts that mean "every interface": fine to bind, useless for another node to dial. */
export function isWildcardHost(host: string): boolean {
  return host === "0.0.0.0" || host === "::" || host === "[::]";
}

/** The form used to compare addresses: hosts are case-insensitive. */
export function addressKey(address: Address): string {
  return `${address.host.toLowerCase()}:${address.port}`;
}
