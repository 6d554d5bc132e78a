// What a follower needs to relay a request to the leader on the caller's behalf: the
// caller's Authorization header (the leader checks the token again) and how to reach a node
// over TLS. Set by the guard for the request being served, read by forward.ts, so the routes
// in between need not carry them.

import { AsyncLocalStorage } from "node:async_hooks";

export interface OutboundTls {
  /** PEM of the CA that signed the nodes' certificates; undefined trusts the system's roots. */
  readonly ca?: string;
  /** This node's certificate and key, presented when the leader asks for a client certificate. */
  readonly cert: string;
  readonly key: string;
}

export interface RelayContext {
  readonly authorization: string | null;
  readonly tls: OutboundTls | null;
}

export const relayContext = new AsyncLocalStorage<RelayContext>();

/** The scheme and options a relay uses to reach another node. */
export function relayTarget(): { scheme: "http" | "https"; headers: Record<string, string>; tls: OutboundTls | null } {
  const context = relayContext.getStore();
  const headers: Record<string, string> = {};
  if (context?.authorization != null) headers["authorization"] = context.authorization;
  const tls = context?.tls ?? null;
  return { scheme: tls === null ? "http" : "https", headers, tls };
}
