// [tls] as what node:tls takes: this node's certificate and key, TLS 1.2 or later only, and,
// with client_ca_file, a client certificate that CA signed (mutual TLS: a client without one,
// or with one from another CA or expired, is refused at the handshake). The files are read
// and checked together, so a reload takes all of them or none.

import { X509Certificate } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { createSecureContext, type TlsOptions } from "node:tls";
import type { TlsSettings } from "../config/index.ts";
import { SvcError, errorMessage } from "../util/errors.ts";
import type { OutboundTls } from "./relay-context.ts";

export interface TlsMaterial {
  /** For tls.createServer and setSecureContext. */
  readonly server: TlsOptions;
  /** For this node's own connections to other nodes (relays to the leader). */
  readonly outbound: OutboundTls;
  /** When this node's certificate stops being valid (ms since the epoch). */
  readonly certValidToMs: number;
}

export function loadTlsMaterial(settings: TlsSettings): TlsMaterial {
  const cert = readPem(settings.certFile, "cert_file");
  const key = readPem(settings.keyFile, "key_file");
  const clientCa = settings.clientCaFile === "" ? undefined : readPem(settings.clientCaFile, "client_ca_file");
  const ca = settings.caFile === "" ? undefined : readPem(settings.caFile, "ca_file");
  let validToMs: number;
  try {
    validToMs = Date.parse(new X509Certificate(cert).validTo);
  } catch (e) {
    throw invalid(`${settings.certFile} (tls.cert_file) is not a PEM certificate: ${errorMessage(e)}`, "give the node's certificate in PEM form, its chain after it");
  }
  const server: TlsOptions = {
    cert,
    key,
    minVersion: "TLSv1.2",
    ...(clientCa === undefined ? {} : { ca: clientCa, requestCert: true, rejectUnauthorized: true }),
  };
  try {
    // Refuses a key that does not match the certificate, or a CA file that is not PEM.
    createSecureContext(server);
  } catch (e) {
    throw invalid(`the [tls] files cannot be used together: ${errorMessage(e)}`, "check that key_file is the private key of cert_file and that every file is PEM");
  }
  return { server, outbound: { ...(ca === undefined ? {} : { ca }), cert, key }, certValidToMs: validToMs };
}

/** What identifies the current [tls] files: a change of any of them reloads TLS. */
export function tlsFilesStamp(settings: TlsSettings): string {
  return filesStamp([settings.certFile, settings.keyFile, settings.clientCaFile, settings.caFile]);
}

/** Inode, size and modification time of each file ("" skipped): changes when a file is replaced or edited. */
export function filesStamp(paths: readonly string[]): string {
  return paths
    .filter((p) => p !== "")
    .map((p) => {
      const s = statSync(p, { throwIfNoEntry: false });
      return s === undefined ? `${p}:-` : `${p}:${s.ino}:${s.size}:${s.mtimeMs}`;
    })
    .join("|");
}

function readPem(path: string, key: string): string {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    throw invalid(`cannot read ${path} (tls.${key}): ${errorMessage(e)}`, `check the path and that the svc user may read it`);
  }
  if (!text.includes("-----BEGIN ")) throw invalid(`${path} (tls.${key}) is not a PEM file`, "give a PEM file (-----BEGIN …-----)");
  return text;
}

function invalid(message: string, hint: string): SvcError {
  return new SvcError("TLS_INVALID", message, { hint });
}
