// Per-client limits on one HTTP port ([limits] client_requests_per_second and
// client_connections_max; 0 turns each off): a client is its remote address. Requests beyond
// the rate, or made on a connection beyond the cap, are answered 429 TOO_MANY_REQUESTS with
// Retry-After, and such a connection is closed after its answer. A connection counts from its
// first request until it closes. Requests a member relays (a follower forwarding to the
// leader, from a member's host, with the member's relay proof: forward.ts) are not limited:
// their clients were, at the member.
// Both tables are bounded: past clientsTrackedMax addresses the least recently seen is dropped.

import { SvcError } from "../util/errors.ts";
import { isRelayProof } from "./forward.ts";

export interface ClientLimitSettings {
  readonly requestsPerSecond: number;
  readonly connectionsMax: number;
  /** Hosts of the members' addresses: their relayed requests pass. */
  readonly memberHosts: ReadonlySet<string>;
  /** This node's cluster ("" until it knows it): what a relay proof is checked against. */
  readonly clusterId: () => string;
}

/** What a request says of its relaying: x-svc-forwarded-by and x-svc-relay-proof. */
export interface RelayClaim {
  readonly by: string;
  readonly proof: string;
}

/** Addresses whose buckets are kept at once. */
const clientsTrackedMax = 100_000;

interface Bucket {
  tokens: number;
  atMs: number;
}

/** Identifies a connection: the object node:http gives every request on it. */
type Connection = object & { once(event: "close", listener: () => void): unknown };

export class ClientLimiter {
  readonly #buckets = new Map<string, Bucket>();
  readonly #open = new Map<string, number>();
  /** Connections counted so far, and whether each is beyond the cap. */
  readonly #seen = new WeakMap<Connection, boolean>();

  constructor(private readonly settings: ClientLimitSettings, private readonly nowMs: () => number = () => performance.now()) {}

  get active(): boolean {
    return this.settings.requestsPerSecond > 0 || this.settings.connectionsMax > 0;
  }

  /** Null to serve the request; the error to answer (and close the connection) otherwise. */
  admit(remoteAddress: string, connection: Connection, relay: RelayClaim | null): SvcError | null {
    // An IPv4 client on a dual-stack socket shows as ::ffff:a.b.c.d.
    const client = remoteAddress.startsWith("::ffff:") ? remoteAddress.slice(7) : remoteAddress;
    if (relay !== null && this.settings.memberHosts.has(client) && isRelayProof(this.settings.clusterId(), relay.by, relay.proof)) return null;
    if (this.settings.connectionsMax > 0 && this.#overCap(client, connection)) {
      return tooMany(`${client} has more than ${this.settings.connectionsMax} connections open to this port`, 1, "reuse connections (keep-alive) instead of opening more", "connections");
    }
    if (this.settings.requestsPerSecond > 0) {
      const waitMs = this.#take(client);
      if (waitMs > 0) {
        return tooMany(`${client} made more than ${this.settings.requestsPerSecond} requests a second`, Math.ceil(waitMs / 1000), "slow down: retry after the time in Retry-After", "rate");
      }
    }
    return null;
  }

  #overCap(client: string, connection: Connection): boolean {
    const known = this.#seen.get(connection);
    if (known !== undefined) return known;
    const open = (this.#open.get(client) ?? 0) + 1;
    this.#open.set(client, open);
    const over = open > this.settings.connectionsMax;
    this.#seen.set(connection, over);
    connection.once("close", () => {
      const left = (this.#open.get(client) ?? 1) - 1;
      if (left <= 0) this.#open.delete(client);
      else this.#open.set(client, left);
    });
    return over;
  }

  /** A token from the client's bucket (capacity: one second of requests); else ms until one refills. */
  #take(client: string): number {
    const rate = this.settings.requestsPerSecond;
    const now = this.nowMs();
    let bucket = this.#buckets.get(client);
    if (bucket === undefined) {
      if (this.#buckets.size >= clientsTrackedMax) {
        const oldest = this.#buckets.keys().next().value;
        if (oldest !== undefined) this.#buckets.delete(oldest);
      }
      bucket = { tokens: rate, atMs: now };
    } else {
      // Re-inserted so that the map's order is least recently seen first.
      this.#buckets.delete(client);
      bucket.tokens = Math.min(rate, bucket.tokens + ((now - bucket.atMs) * rate) / 1000);
      bucket.atMs = now;
    }
    this.#buckets.set(client, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return ((1 - bucket.tokens) * 1000) / rate;
  }
}

function tooMany(message: string, retryAfterS: number, hint: string, limit: "rate" | "connections"): SvcError {
  return new SvcError("TOO_MANY_REQUESTS", message, { hint, details: { retryAfterS, limit } });
}
