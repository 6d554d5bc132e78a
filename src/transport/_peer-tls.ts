// Mutual TLS on the peer port: both ends present a certificate the cluster CA signed, and a
// certificate counts as a node's when its subject alternative names hold the node id, as a DNS
// name or as the URI svc://<node_id>. The acceptor refuses at the TLS handshake a connection
// without a certificate, with one from another CA or expired, or with one naming no member;
// a handshake must then come from a node the certificate names. The dialer checks that the
// certificate it is served names the peer it meant to reach (host names are not checked: peers
// are dialled by address, and the node id is the identity).

import type { Socket } from "bun";

// The files are read by the node (src/node/peer-tls.ts) and may be replaced while it runs
// (Transport.setTls): new handshakes use the new ones, established connections stay up.

/** PEM texts: this node's certificate and key, and the CA that signed every member's. */
export interface PeerTls {
  readonly cert: string;
  readonly key: string;
  readonly ca: string;
}

const uriPrefix = "svc://";

/**
 * The node ids a certificate names: DNS names and svc:// URIs of its subject alternative
 * names, from node's "DNS:a, URI:svc://b, IP Address:…" form.
 */
export function certificateIds(subjectAltName: string | undefined): string[] {
  if (subjectAltName === undefined) return [];
  const ids: string[] = [];
  for (const part of subjectAltName.split(",")) {
    const entry = part.trim();
    if (entry.startsWith("DNS:")) ids.push(entry.slice(4));
    else if (entry.startsWith(`URI:${uriPrefix}`)) ids.push(entry.slice(4 + uriPrefix.length).replace(/\/+$/, ""));
  }
  return ids;
}

/** The ids the peer's certificate names, once its TLS handshake is done. */
export function peerCertificateIds(socket: Socket<undefined>): string[] {
  const certificate = socket.getPeerCertificate() as { subjectaltname?: string } | null | undefined;
  return certificateIds(certificate?.subjectaltname);
}

/** Bun.listen's tls: a client certificate the CA signed is required. */
export function listenTls(tls: PeerTls) {
  return { cert: tls.cert, key: tls.key, ca: tls.ca, requestCert: true, rejectUnauthorized: true } as const;
}

/**
 * Bun.connect's tls: this node's certificate and the CA. The handshake is not failed by Bun:
 * it would also fail a certificate that names the node id but not the address dialled, so
 * servedCertificateProblem judges the chain and the names instead.
 */
export function connectTls(tls: PeerTls) {
  return { cert: tls.cert, key: tls.key, ca: tls.ca, rejectUnauthorized: false } as const;
}

/**
 * Why the certificate a peer served is refused, or null: any verification error but a host
 * name mismatch (reported only once the chain is valid), or no name that is the peer's id.
 */
export function servedCertificateProblem(socket: Socket<undefined>, error: Error | null, peerId: string): { text: string; reason: TlsRefusalReason } | null {
  const code = error === null ? null : ((error as { code?: unknown }).code ?? error.message);
  if (error !== null && code !== "ERR_TLS_CERT_ALTNAME_INVALID") return { text: `its certificate was refused (${String(code)})`, reason: tlsErrorReason(error) };
  const ids = peerCertificateIds(socket);
  if (ids.includes(peerId)) return null;
  return { text: `its certificate names ${ids.map((id) => JSON.stringify(id)).join(", ") || "no node id"}, not ${JSON.stringify(peerId)}`, reason: "wrong_peer" };
}

/**
 * Why a connection was refused at the TLS handshake, the label of
 * tensor_chain_peer_tls_refusals_total: no certificate; one from a CA this node does not trust;
 * expired (or not yet valid); one naming no member; a member's certificate used for another
 * (or, dialling, not naming the peer dialled); any other failure of the handshake; no TLS
 * handshake within the handshake timeout.
 */
export type TlsRefusalReason = "no_certificate" | "unknown_ca" | "expired" | "not_a_member" | "wrong_peer" | "handshake_failed" | "handshake_timeout";

export const tlsRefusalReasons: readonly TlsRefusalReason[] = ["no_certificate", "unknown_ca", "expired", "not_a_member", "wrong_peer", "handshake_failed", "handshake_timeout"];

const unknownCaCodes = new Set([
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE", "UNABLE_TO_GET_ISSUER_CERT", "UNABLE_TO_GET_ISSUER_CERT_LOCALLY", "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT", "CERT_SIGNATURE_FAILURE", "CERT_UNTRUSTED", "CERT_REJECTED",
]);

/** The refusal reason of a failed TLS handshake's error (null: the peer sent no certificate). */
export function tlsErrorReason(error: Error | null): TlsRefusalReason {
  if (error === null) return "no_certificate";
  const code = (error as { code?: unknown }).code;
  const text = typeof code === "string" ? code : error.message;
  if (unknownCaCodes.has(text)) return "unknown_ca";
  if (text === "CERT_HAS_EXPIRED" || text === "CERT_NOT_YET_VALID") return "expired";
  // With no certificate sent, the code is a bare EPROTO: OpenSSL's reason is in the message.
  if (/PEER_DID_NOT_RETURN_A_CERTIFICATE|NO_CERTIFICATE|peer did not return a certificate/i.test(`${text} ${error.message}`)) return "no_certificate";
  return "handshake_failed";
}
