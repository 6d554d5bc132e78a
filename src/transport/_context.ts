// What the outbound and inbound connection handlers share, and the guard every socket callback
// runs under: nothing a peer sends, and no bug of ours, may throw out of a Bun socket callback.

import { AssertionError, errorMessage, type Logger } from "../util/index.ts";
import type { ResolvedOptions } from "./_options.ts";
import type { PeerTls } from "./_peer-tls.ts";
import type { Count, CountTlsRefusal } from "./_stats.ts";

export interface TransportContext {
  readonly options: ResolvedOptions;
  readonly logger: Logger;
  readonly count: Count;
  readonly countTlsRefusal: CountTlsRefusal;
  /**
   * The certificate, key and CA new handshakes use (null: plain TCP). Replaced by
   * Transport.setTls; null stays null and non-null stays non-null.
   */
  tls(): PeerTls | null;
  /** The current cluster id ("" until the node joins one). */
  clusterId(): string;
  /** A dial to the peer failed at once: nothing listens at its address (TransportOptions.onPeerUnreachable). */
  peerUnreachable(peerId: string): void;
  /** A connection to the peer is ready (TransportOptions.onPeerReachable). */
  peerReachable(peerId: string): void;
  /** A member's handshake was read, either way: the cluster id it sent ("" for none). */
  heard(peerId: string, clusterId: string): void;
  /** The peer refused this node's handshake saying it belongs to a cluster, which it did not name. */
  heardInACluster(peerId: string): void;
  /** The peer refused this node's handshake as one from another cluster than its own. */
  heardOfAnotherCluster(peerId: string): void;
}

/**
 * Runs a socket callback. A failure is logged and answered by onFailure (which closes the
 * connection). A failed assertion is a bug in svc and stays fatal: it is rethrown outside the
 * socket callback, where it stops the process as every failed assertion does.
 */
export function guard(logger: Logger, what: string, body: () => void, onFailure: () => void): void {
  try {
    body();
  } catch (e) {
    logger.error(`peer transport: ${what} failed: ${errorMessage(e)}`);
    try {
      onFailure();
    } catch (closeError) {
      logger.error(`peer transport: closing after a failed ${what} failed too: ${errorMessage(closeError)}`);
    }
    if (e instanceof AssertionError) {
      queueMicrotask(() => {
        throw e;
      });
    }
  }
}
