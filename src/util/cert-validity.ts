// Whether a certificate can be used now: a reload of [tls] refuses one that peers and clients
// would refuse, and keeps the one in use (http/security.ts, node/peer-tls.ts).

import { X509Certificate } from "node:crypto";

/** Why a certificate is outside its dates at `nowMs` ("expired at …", "is not valid until …"); null when it is within them. */
export function outsideValidity(d: CertificateDates, nowMs: number): string | null {
  if (d.validToMs < nowMs) return `expired at ${new Date(d.validToMs).toISOString()}`;
  if (d.validFromMs > nowMs) return `is not valid until ${new Date(d.validFromMs).toISOString()}`;
  return null;
}

/** Why the first certificate of `cert` (PEM) is not valid at `nowMs`, or null when it is, or cannot be read (the caller's own checks say so). */
function certOutsideValidity(cert: string, nowMs: number): string | null {
  const first = certificateDates(cert)[0];
  return first === undefined ? null : outsideValidity(first, nowMs);
}

/**
 * Whether a reload should keep the certificate in use rather than take `next`: `next` is
 * outside its validity while the one in use (`current`) is not. Peers and clients would refuse
 * `next` (a whole cluster stopped taking writes when a leader's expired certificate was
 * reloaded), so the reload is refused, with the reason; returns that reason, or null.
 */
export function refusedCertReload(next: string, current: string, nowMs: number): string | null {
  const why = certOutsideValidity(next, nowMs);
  if (why === null || certOutsideValidity(current, nowMs) !== null) return null;
  return `the new certificate cannot be used: it ${why}; peers and clients would refuse it`;
}

export interface CertificateDates {
  /** The subject as X509Certificate gives it, e.g. "CN=node1". */
  readonly subject: string;
  readonly validFromMs: number;
  readonly validToMs: number;
}

/**
 * The validity of every certificate in a PEM file (a certificate and its chain, or a bundle
 * of CAs), in file order; blocks that do not parse are left out (the caller's own checks say so).
 */
export function certificateDates(pem: string): CertificateDates[] {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  const dates: CertificateDates[] = [];
  for (const block of blocks) {
    try {
      const x = new X509Certificate(block);
      dates.push({ subject: x.subject.replaceAll("\n", ", "), validFromMs: Date.parse(x.validFrom), validToMs: Date.parse(x.validTo) });
    } catch {
      // Not a certificate svc can read: loadTlsMaterial and the peer checks report it.
    }
  }
  return dates;
}
