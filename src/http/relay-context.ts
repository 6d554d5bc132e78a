// What a follower needs to relay a request to the leader on the caller's behalf: the
// caller's Authorization header (the leader checks the token again) and how to reach a node
// over TLS. Set by the guard for the request being served, keyed by that Request object
// (the one the routes receive), and read by forward.ts with it. A WeakMap, not an
// AsyncLocalStorage: a store entered for every request made every promise and callback of
// the request carry it, about 1 µs of a request's CPU in a profile, and the routes that
// relay already hold the request.

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

/** Entries go with their request: nothing outlives it. */
const contexts = new WeakMap<Request, RelayContext>();

/** Called by the guard before the app sees the request. */
export function setRelayContext(request: Request, context: RelayContext): void {
  contexts.set(request, context);
}

/**
 * The scheme and options a relay of `request` uses to reach another node: plain HTTP and no
 * Authorization when the guard set nothing for it (neither [tls] nor [auth]).
 */
export function relayTarget(request?: Request): { scheme: "http" | "https"; headers: Record<string, string>; tls: OutboundTls | null } {
  const context = request === undefined ? undefined : contexts.get(request);
  const headers: Record<string, string> = {};
  if (context?.authorization != null) headers["authorization"] = context.authorization;
  const tls = context?.tls ?? null;
  return { scheme: tls === null ? "http" : "https", headers, tls };
}
