// What --validate says of the validity dates of the [tls] certificates. A node starts with an
// expired or not yet valid certificate (and logs it), but every client and peer refuses it,
// so --validate calls it a problem. A certificate
// that expires soon is a warning; a CA bundle only needs one CA valid now (the old CA stays
// beside the new one while a rotation is under way), an expired one in it is a warning.

import { readFileSync } from "node:fs";
import type { TlsSettings } from "../config/index.ts";
import { certificateDates, outsideValidity, type CertificateDates } from "../util/index.ts";

/** Below this much validity left, cert_file is named in a warning. */
export const certExpiryWarningMs = 7 * 24 * 3_600_000;

export interface CertDateFindings {
  readonly problems: string[];
  readonly warnings: string[];
}

export function certificateDateFindings(tls: TlsSettings, nowMs: number): CertDateFindings {
  const findings: CertDateFindings = { problems: [], warnings: [] };
  checkCertFile(tls.certFile, nowMs, findings);
  for (const [key, path] of [["ca_file", tls.caFile], ["client_ca_file", tls.clientCaFile], ["peer_ca_file", tls.peerCaFile]] as const) {
    if (path !== "") checkCaFile(key, path, nowMs, findings);
  }
  return findings;
}

/**
 * cert_file: this node's certificate, which must be valid now, and its chain. A chain
 * certificate outside its dates is a warning: a verifier that reaches a trusted CA by another
 * path (an expired cross-signature kept in the bundle) never looks at it.
 */
function checkCertFile(path: string, nowMs: number, findings: CertDateFindings): void {
  const dates = read(path);
  dates.forEach((d, i) => {
    const which = i === 0 ? "its certificate" : `the chain certificate ${JSON.stringify(d.subject)}`;
    const outside = outsideValidity(d, nowMs);
    if (outside !== null && i === 0) {
      findings.problems.push(`${path} (tls.cert_file): ${which} ${outside} (${span(d)}): clients and peers refuse it; ` +
        "put a certificate valid now in cert_file (with its key and chain); a running node picks it up without a restart");
    } else if (outside !== null) {
      findings.warnings.push(`${path} (tls.cert_file): ${which} ${outside} (${span(d)}): a client that verifies through it refuses this node; ` +
        "replace the chain with the current intermediate, unless the CA is reached by another path");
    } else if (d.validToMs - nowMs < certExpiryWarningMs) {
      findings.warnings.push(`${path} (tls.cert_file): ${which} expires at ${iso(d.validToMs)} (${span(d)}); renew it before then`);
    }
  });
}

/** A CA file: trusted as a set, so it is a problem only when no CA in it is valid now. */
function checkCaFile(key: string, path: string, nowMs: number, findings: CertDateFindings): void {
  const dates = read(path);
  const outside = dates.map((d) => ({ d, why: outsideValidity(d, nowMs) })).filter((o) => o.why !== null);
  if (outside.length === 0) return;
  const listed = outside.map((o) => `${JSON.stringify(o.d.subject)} ${o.why} (${span(o.d)})`).join("; ");
  if (outside.length === dates.length) {
    findings.problems.push(`${path} (tls.${key}): no CA in it is valid now: ${listed}; nothing it signed can be verified. ` +
      `Put the current CA certificate in ${key}`);
  } else {
    findings.warnings.push(`${path} (tls.${key}): ${listed}; the other CAs in it are valid now. Remove it once nothing it signed is in use`);
  }
}

function span(d: CertificateDates): string {
  return `valid from ${iso(d.validFromMs)} to ${iso(d.validToMs)}`;
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function read(path: string): CertificateDates[] {
  try {
    return certificateDates(readFileSync(path, "utf8"));
  } catch {
    // Unreadable: loadTlsMaterial, run before, has said so.
    return [];
  }
}
