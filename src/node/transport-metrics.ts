// The peer transport's series in /metrics: what the peer port refused or dropped (frames that
// cannot be read, handshakes refused, senders that are not members, connections that never
// completed a handshake, failed dials, messages refused for a full lane), reconnections, bytes
// each way, and connections refused at the TLS handshake of the peer port (mutual TLS), by reason.
// The transport keeps the counts; a scrape brings the series up to them.

import { tlsRefusalReasons, type Transport, type TransportCounters } from "../transport/index.ts";
import type { CounterSeries, MetricsRegistry } from "../metrics/index.ts";

const events: readonly [string, keyof TransportCounters][] = [
  ["bad_frame", "badFrames"],
  ["handshake_refused", "handshakeRejects"],
  ["non_member_refused", "nonMemberRejects"],
  ["handshake_timeout", "handshakeTimeouts"],
  ["reconnect", "reconnects"],
  ["dial_failed", "dialFailures"],
  ["queue_drop", "queueDrops"],
];

function catchUp(c: CounterSeries, total: number): void {
  c.inc(Math.max(0, total - c.get()));
}

export function registerTransportMetrics(r: MetricsRegistry, transport: Transport): void {
  const refusals = r.counter(
    "tensor_chain_peer_tls_refusals_total",
    "Peer connections refused at the TLS handshake, by reason (no certificate, unknown CA, expired, naming no member, naming another peer, handshake failed, handshake timed out)",
    ["reason"],
  );
  for (const reason of tlsRefusalReasons) refusals.labels(reason);
  const transportEvents = r.counter(
    "tensor_chain_peer_transport_events_total",
    "Peer port events, by kind: bad_frame (a connection closed for garbage, a bad CRC or an oversized frame), handshake_refused (by this node or the peer, or past the connection limit: " +
      "another cluster, a bad handshake), non_member_refused (a sender that is not a member), handshake_timeout (an accepted connection that never completed a " +
      "handshake), reconnect, dial_failed, queue_drop (a message refused: lane full, unknown peer, oversized)",
    ["event"],
  );
  for (const [event] of events) transportEvents.labels(event);
  const bytes = r.counter("tensor_chain_peer_bytes_total", "Bytes exchanged with peers on the peer port, by direction (in, out)", ["direction"]);
  r.onScrape(() => {
    const stats = transport.stats();
    for (const reason of tlsRefusalReasons) catchUp(refusals.labels(reason), stats.tlsRefusals[reason]);
    for (const [event, field] of events) catchUp(transportEvents.labels(event), stats.totals[field]);
    catchUp(bytes.labels("in"), stats.totals.bytesIn);
    catchUp(bytes.labels("out"), stats.totals.bytesOut);
  });
}
