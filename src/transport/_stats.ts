// Counters of the peer transport. Every event is counted in the totals; it is also counted for a
// peer when it can be attributed to a configured peer (a raw connection that sends garbage before
// naming itself cannot be, and an id it claims is not trusted to create a series).

import { tlsRefusalReasons, type TlsRefusalReason } from "./_peer-tls.ts";

export interface TransportCounters {
  /** Frames decoded from peers (handshakes and fragments included). */
  framesIn: number;
  /** Frames handed to sockets. */
  framesOut: number;
  bytesIn: number;
  bytesOut: number;
  /** Connections closed for bad framing: garbage, bad CRC, oversized or unexpected frames. */
  badFrames: number;
  /** Handshakes refused, by this node or by the peer. */
  handshakeRejects: number;
  /** Handshakes refused and messages dropped because the sender is not a member. */
  nonMemberRejects: number;
  /** Accepted connections closed before they completed a handshake: timed out, or pushed out by a newer one. */
  handshakeTimeouts: number;
  /** Outbound connections established again after the first one to the peer. */
  reconnects: number;
  /** Outbound dials that failed to connect or to complete the handshake. */
  dialFailures: number;
  /** Messages refused by send(): lane full, unknown peer or oversized. */
  queueDrops: number;
  /**
   * Connections refused at the TLS handshake (mutual TLS only): no certificate, one from another
   * CA or expired, one naming no member, or, dialling, one that does not name the peer dialled.
   */
  tlsRefusals: number;
}

export interface PeerStats extends Readonly<TransportCounters> {
  readonly address: string;
  /** Our outbound connection to the peer has completed its handshake. */
  readonly connected: boolean;
  /** The peer's connection to us has completed its handshake. */
  readonly inboundConnected: boolean;
  readonly queuedMessages: number;
  readonly queuedBytes: number;
  /** Why the last dial or connection to the peer failed, while it is not connected (null: none). */
  readonly lastFailure: string | null;
}

export interface TransportStats {
  readonly totals: Readonly<TransportCounters>;
  readonly peers: Readonly<Record<string, PeerStats>>;
  /** The totals' tlsRefusals by why (sums to totals.tlsRefusals). */
  readonly tlsRefusals: Readonly<Record<TlsRefusalReason, number>>;
}

export function zeroTlsRefusals(): Record<TlsRefusalReason, number> {
  return Object.fromEntries(tlsRefusalReasons.map((r) => [r, 0])) as Record<TlsRefusalReason, number>;
}

/** Counts a refusal at the TLS handshake, in the totals, the peer's counters and by reason. */
export type CountTlsRefusal = (peer: TransportCounters | null, reason: TlsRefusalReason) => void;

export function zeroCounters(): TransportCounters {
  return {
    framesIn: 0, framesOut: 0, bytesIn: 0, bytesOut: 0, badFrames: 0,
    handshakeRejects: 0, nonMemberRejects: 0, handshakeTimeouts: 0, reconnects: 0, dialFailures: 0, queueDrops: 0, tlsRefusals: 0,
  };
}

/** Adds to the totals and, when known, to one peer's counters. */
export type Count = (peer: TransportCounters | null, field: keyof TransportCounters, amount?: number) => void;

export function counterSink(totals: TransportCounters): Count {
  return (peer, field, amount = 1) => {
    totals[field] += amount;
    if (peer !== null) peer[field] += amount;
  };
}
