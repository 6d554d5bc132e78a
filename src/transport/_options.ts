// Options of the peer transport, their defaults and their validation.

import { SvcError, type Logger } from "../util/index.ts";
import { ID_BYTES_MAX, idBytes } from "./_hello.ts";
import type { PeerTls } from "./_peer-tls.ts";

const MiB = 1024 * 1024;
/** Below this, fragment headers would cost more than they carry. */
const FRAGMENT_BYTES_MIN = 1024;

export type MessageHandler = (fromPeerId: string, type: number, payload: Uint8Array) => void;

export interface TransportOptions {
  readonly nodeId: string;
  /** "" while the node is not in a cluster yet; it then talks to peers of any cluster. */
  readonly clusterId: string;
  /** Where the peer listener binds, e.g. { hostname: "0.0.0.0", port: 7879 }; port 0 picks one. */
  readonly listen: { readonly hostname: string; readonly port: number };
  /**
   * Called once per message, in the order the peer sent them. Must not throw. The payload is
   * the handler's: the transport allocates one per message and never touches it again.
   */
  readonly onMessage: MessageHandler;
  /**
   * Called when a dial to a peer fails at once (refused: nothing listens at its address), as
   * opposed to timing out. Must not throw.
   */
  readonly onPeerUnreachable?: (peerId: string) => void;
  /** Called when a connection to a peer is ready after none was (first connect or reconnect). Must not throw. */
  readonly onPeerReachable?: (peerId: string) => void;
  /** Pass the node's logger's child("transport"). */
  readonly logger?: Logger;
  /** Source of reconnect jitter, in [0, 1). */
  readonly random?: () => number;
  /** Largest message, control or bulk, in bytes (bounds every frame a peer may send). */
  readonly frameBytesMax?: number;
  /** Control lane bounds per peer. */
  readonly queueMessagesMax?: number;
  readonly queueBytesMax?: number;
  /** Bulk lane bounds per peer. */
  readonly bulkQueueMessagesMax?: number;
  readonly bulkQueueBytesMax?: number;
  /** Size of the pieces bulk messages are cut into; a small message waits behind at most one. */
  readonly fragmentBytes?: number;
  /** Reconnect backoff: doubles from min up to max, each delay jittered to 50–100 %. */
  readonly reconnectDelayMsMin?: number;
  readonly reconnectDelayMsMax?: number;
  readonly connectTimeoutMs?: number;
  /** A connection (either way) that has not completed its handshake by then is closed. */
  readonly handshakeTimeoutMs?: number;
  /** An outbound connection with bytes pending and no write progress for this long is dropped. */
  readonly writeStallTimeoutMs?: number;
  /**
   * Accepted connections at once, handshaken or not. When full, a new connection pushes out
   * the oldest one that has not completed its handshake.
   */
  readonly inboundConnectionsMax?: number;
  /** Refused connections are logged at most once per remote address in this window. */
  readonly refusalLogWindowMs?: number;
  /** Mutual TLS with the cluster CA on every connection (see _peer-tls.ts); absent: plain TCP. */
  readonly tls?: PeerTls;
}

export interface ResolvedOptions {
  readonly nodeId: string;
  readonly listen: { readonly hostname: string; readonly port: number };
  readonly random: () => number;
  readonly frameBytesMax: number;
  readonly queueMessagesMax: number;
  readonly queueBytesMax: number;
  readonly bulkQueueMessagesMax: number;
  readonly bulkQueueBytesMax: number;
  readonly fragmentBytes: number;
  readonly reconnectDelayMsMin: number;
  readonly reconnectDelayMsMax: number;
  readonly connectTimeoutMs: number;
  readonly handshakeTimeoutMs: number;
  readonly writeStallTimeoutMs: number;
  readonly inboundConnectionsMax: number;
  readonly refusalLogWindowMs: number;
  /** Smallest write handed to the socket when more is queued: fewer syscalls for small messages. */
  readonly writeBatchBytesMin: number;
  readonly tls: PeerTls | null;
}

function intAtLeast(name: string, value: number, min: number): number {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new SvcError("TRANSPORT_BAD_OPTION", `transport option ${name} must be an integer of at least ${min}, got ${value}`);
  }
  return value;
}

function positiveInt(name: string, value: number): number {
  return intAtLeast(name, value, 1);
}

export function checkId(what: string, id: string): void {
  const bytes = idBytes(id);
  if (bytes > ID_BYTES_MAX) {
    throw new SvcError("TRANSPORT_BAD_OPTION", `${what} ${JSON.stringify(id)} is ${bytes} bytes long; at most ${ID_BYTES_MAX} fit a handshake`, {
      hint: "choose a shorter id",
    });
  }
}

export function resolveOptions(o: TransportOptions): ResolvedOptions {
  if (o.nodeId === "") throw new SvcError("TRANSPORT_BAD_OPTION", "transport needs a non-empty node id");
  checkId("node id", o.nodeId);
  checkId("cluster id", o.clusterId);
  const frameBytesMax = intAtLeast("frameBytesMax", o.frameBytesMax ?? 64 * MiB, FRAGMENT_BYTES_MIN);
  if (frameBytesMax > 0xffff_ffff) throw new SvcError("TRANSPORT_BAD_OPTION", `frameBytesMax ${frameBytesMax} exceeds what a frame can carry`);
  const reconnectDelayMsMin = positiveInt("reconnectDelayMsMin", o.reconnectDelayMsMin ?? 100);
  const reconnectDelayMsMax = positiveInt("reconnectDelayMsMax", o.reconnectDelayMsMax ?? 5_000);
  if (reconnectDelayMsMax < reconnectDelayMsMin) {
    throw new SvcError("TRANSPORT_BAD_OPTION", "reconnectDelayMsMax must not be below reconnectDelayMsMin");
  }
  return {
    nodeId: o.nodeId,
    listen: o.listen,
    random: o.random ?? Math.random,
    frameBytesMax,
    queueMessagesMax: positiveInt("queueMessagesMax", o.queueMessagesMax ?? 4096),
    queueBytesMax: positiveInt("queueBytesMax", o.queueBytesMax ?? 64 * MiB),
    bulkQueueMessagesMax: positiveInt("bulkQueueMessagesMax", o.bulkQueueMessagesMax ?? 4),
    bulkQueueBytesMax: positiveInt("bulkQueueBytesMax", o.bulkQueueBytesMax ?? 4 * frameBytesMax),
    fragmentBytes: Math.min(frameBytesMax, intAtLeast("fragmentBytes", o.fragmentBytes ?? 256 * 1024, FRAGMENT_BYTES_MIN)),
    reconnectDelayMsMin,
    reconnectDelayMsMax,
    connectTimeoutMs: positiveInt("connectTimeoutMs", o.connectTimeoutMs ?? 5_000),
    // A handshake is one round trip: a peer that takes longer is broken or is not a peer.
    handshakeTimeoutMs: positiveInt("handshakeTimeoutMs", o.handshakeTimeoutMs ?? 2_000),
    writeStallTimeoutMs: positiveInt("writeStallTimeoutMs", o.writeStallTimeoutMs ?? 30_000),
    inboundConnectionsMax: positiveInt("inboundConnectionsMax", o.inboundConnectionsMax ?? 256),
    refusalLogWindowMs: positiveInt("refusalLogWindowMs", o.refusalLogWindowMs ?? 10_000),
    writeBatchBytesMin: 64 * 1024,
    tls: o.tls ?? null,
  };
}

/** Splits "host:port" or "[v6]:port". */
export function parsePeerAddress(peerId: string, address: string): { hostname: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(address);
  const port = m === null ? NaN : Number(m[3]);
  const hostname = m === null ? undefined : (m[1] ?? m[2]);
  if (hostname === undefined || !(port >= 1 && port <= 65535)) {
    throw new SvcError("TRANSPORT_BAD_ADDRESS", `peer ${JSON.stringify(peerId)} has address ${JSON.stringify(address)}, which is not host:port`, {
      hint: "write peer addresses as host:port, e.g. 10.0.0.2:7879 or [fd00::2]:7879",
    });
  }
  return { hostname, port };
}
