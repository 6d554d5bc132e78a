// The peer transport's series in /metrics: connections refused at the TLS handshake of the
// peer port (mutual TLS), by reason.

import { tlsRefusalReasons, type Transport } from "../transport/index.ts";
import type { MetricsRegistry } from "../metrics/index.ts";

export function registerTransportMetrics(r: MetricsRegistry, transport: Transport): void {
  const refusals = r.counter(
    "tensor_chain_peer_tls_refusals_total",
    "Peer connections refused at the TLS handshake, by reason (no certificate, unknown CA, expired, naming no member, naming another peer, handshake failed, handshake timed out)",
    ["reason"],
  );
  for (const reason of tlsRefusalReasons) refusals.labels(reason);
  r.onScrape(() => {
    const counts = transport.stats().tlsRefusals;
    for (const reason of tlsRefusalReasons) {
      const c = refusals.labels(reason);
      c.inc(Math.max(0, counts[reason] - c.get()));
    }
  });
}
