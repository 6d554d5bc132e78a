// The secrets of the peer port as the configuration names them: mutual TLS ([tls] peer_ca_file:
// this node presents cert_file, whose SAN names its node id, and accepts only members whose
// certificates that CA signed; src/transport/_peer-tls.ts) and the gossip keys ([gossip]
// key_file; src/gossip/key.ts). Read at start, where a file that cannot be used stops the node
// with the path and what to do; read again by reload() (SIGHUP, or a file changed: the
// client and admin ports' watch calls it, src/http/security.ts), where a file that cannot be
// used is logged and what was in use stays. New peer handshakes use reloaded certificates;
// the next gossip packet uses reloaded keys. Nothing here logs a key.

import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { createSecureContext } from "node:tls";
import { readGossipKeyFile, type Config } from "../config/index.ts";
import { clusterDerivedKey, sharedKey, type GossipKey } from "../gossip/index.ts";
import { certificateIds, type PeerTls, type Transport } from "../transport/index.ts";
import { SvcError, errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/logger.ts";
import { refusedCertReload } from "../util/cert-validity.ts";

export class PeerSecrets {
  #tls: PeerTls | undefined;
  #gossipKeys: readonly Uint8Array[] | null;
  #transport: Transport | null = null;

  private constructor(private readonly config: Config, private readonly log: Logger) {
    this.#tls = readPeerTls(config);
    this.#gossipKeys = readGossipKeys(config);
  }

  /** Reads every file now; throws SvcError (PEER_TLS_INVALID, GOSSIP_KEY_INVALID) when one cannot be used. */
  static load(config: Config, log: Logger): PeerSecrets {
    return new PeerSecrets(config, log);
  }

  /** The peer port's TLS at start; undefined: plain TCP. */
  get tls(): PeerTls | undefined {
    return this.#tls;
  }

  /** How gossip seals packets: the shared keys of the key file, or the key derived from the cluster id. */
  gossipKeyFor(): (clusterId: string) => GossipKey {
    if (this.#gossipKeys === null) return clusterDerivedKey;
    const key = sharedKey(() => this.#gossipKeys ?? []);
    return () => key;
  }

  /** The transport whose certificates a reload replaces. */
  attach(transport: Transport): void {
    this.#transport = transport;
  }

  /** The files a reload reads: a change of any of them is worth one. */
  files(): string[] {
    const tls = this.config.tls;
    const peer = tls == null || tls.peerCaFile === "" ? [] : [tls.certFile, tls.keyFile, tls.peerCaFile];
    return [...peer, ...(this.config.gossip == null ? [] : [this.config.gossip.keyFile])];
  }

  /** Why the certificate in cert_file could not be used on the peer port now; null when it could (or the port has no TLS). */
  certificateRefusal(): string | null {
    if (this.#tls === undefined) return null;
    try {
      const tls = readPeerTls(this.config);
      return tls === undefined ? null : refusedCertReload(tls.cert, this.#tls.cert, Date.now());
    } catch (e) {
      return errorMessage(e);
    }
  }

  /** Reads the files again; one that cannot be used leaves what was in use and is logged. */
  reload(why: string): void {
    if (this.#tls !== undefined) {
      try {
        const tls = readPeerTls(this.config);
        const refused = tls === undefined ? null : refusedCertReload(tls.cert, this.#tls.cert, Date.now());
        if (refused !== null) {
          this.log.error(`peer TLS not reloaded (${why}); the previous certificates stay in use: ${refused}`, {
            cert_file: this.config.tls?.certFile,
            hint: "put a certificate valid now in cert_file (with its key); it is picked up without a restart",
          });
        } else if (tls !== undefined && !sameTls(tls, this.#tls)) {
          this.#transport?.setTls(tls);
          this.#tls = tls;
          this.log.info(`peer TLS reloaded (${why})`, { cert_file: this.config.tls?.certFile, cert_valid_to: validTo(tls.cert) });
        }
      } catch (e) {
        this.log.error(`peer TLS not reloaded (${why}); the previous certificates stay in use: ${errorMessage(e)}`);
      }
    }
    if (this.#gossipKeys !== null) {
      try {
        const keys = readGossipKeys(this.config);
        // Said only when the keys differ: a reload for another file (the tokens, a
        // certificate) reads this one too, and must not claim to have changed it.
        if (keys !== null && !sameKeys(keys, this.#gossipKeys)) {
          this.#gossipKeys = keys;
          this.log.info(`gossip keys reloaded (${why})`, { key_file: this.config.gossip?.keyFile, keys: keys.length });
        }
      } catch (e) {
        this.log.error(`gossip keys not reloaded (${why}); the previous keys stay in use: ${errorMessage(e)}`);
      }
    }
  }
}

/** The peer port's certificate, key and CA, checked to work together; undefined without peer_ca_file. */
function readPeerTls(config: Config): PeerTls | undefined {
  const tls = config.tls;
  if (tls == null || tls.peerCaFile === "") return undefined;
  const read = (path: string, key: string): string => {
    try {
      return readFileSync(path, "utf8");
    } catch (e) {
      throw new SvcError("PEER_TLS_INVALID", `cannot read ${path} (tls.${key}) for the peer port: ${errorMessage(e)}`, {
        hint: "check the path and that the svc user may read it",
      });
    }
  };
  const material = { cert: read(tls.certFile, "cert_file"), key: read(tls.keyFile, "key_file"), ca: read(tls.peerCaFile, "peer_ca_file") };
  let chain: X509Certificate[];
  let cas: X509Certificate[];
  try {
    // Refuses a key that does not match the certificate, or a file that is not PEM.
    createSecureContext(material);
    chain = pemCertificates(material.cert);
    cas = pemCertificates(material.ca);
    if (chain.length === 0 || cas.length === 0) throw new Error(chain.length === 0 ? "cert_file holds no certificate" : "peer_ca_file holds no certificate");
  } catch (e) {
    throw new SvcError("PEER_TLS_INVALID", `the [tls] files cannot be used together on the peer port: ${errorMessage(e)}`, {
      hint: "check that key_file is the private key of cert_file and that cert_file and peer_ca_file are PEM",
    });
  }
  // What every peer checks of this node's certificate, checked here first: a node whose
  // certificate they refuse would start, and never reach any of them.
  const leaf = chain[0]!;
  const ids = certificateIds(leaf.subjectAltName);
  if (!ids.includes(config.nodeId)) {
    throw new SvcError("PEER_TLS_INVALID", `${tls.certFile} (tls.cert_file) names ${ids.length === 0 ? "no node id" : ids.join(", ")}, not this node (${config.nodeId}): every member would refuse it on the peer port`, {
      hint: `issue this node a certificate whose subject alternative names hold DNS:${config.nodeId} or URI:svc://${config.nodeId}`,
    });
  }
  if (!issuedByAnyOf(leaf, chain.slice(1), cas)) {
    throw new SvcError("PEER_TLS_INVALID", `${tls.certFile} (tls.cert_file) was not issued by a CA in ${tls.peerCaFile} (tls.peer_ca_file): every member would refuse it on the peer port`, {
      hint: "issue the certificate from the cluster's CA, or put that CA in peer_ca_file on every node (beside the old one while both are in use)",
    });
  }
  return material;
}

/** The certificates of a PEM text, in order. */
function pemCertificates(pem: string): X509Certificate[] {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  return blocks.map((b) => new X509Certificate(b));
}

/** Whether `cert` chains to one of `cas`, through the intermediates `chain` (cert_file's other certificates). */
function issuedByAnyOf(cert: X509Certificate, chain: readonly X509Certificate[], cas: readonly X509Certificate[]): boolean {
  const signedBy = (child: X509Certificate, issuer: X509Certificate): boolean => {
    try {
      return child.checkIssued(issuer) && child.verify(issuer.publicKey);
    } catch {
      return false;
    }
  };
  let current = cert;
  for (let depth = 0; depth <= chain.length; depth++) {
    if (cas.some((ca) => ca.fingerprint256 === current.fingerprint256 || signedBy(current, ca))) return true;
    const next = chain.find((c) => signedBy(current, c));
    if (next === undefined) return false;
    current = next;
  }
  return false;
}

function readGossipKeys(config: Config): Uint8Array[] | null {
  const gossip = config.gossip;
  if (gossip == null) return null;
  const read = readGossipKeyFile(gossip.keyFile);
  if ("problem" in read) throw new SvcError("GOSSIP_KEY_INVALID", `gossip.key_file: ${read.problem}`, { hint: "fix the key file; `svc admin gossip keygen` prints a new key" });
  return read.keys;
}

function sameKeys(a: readonly Uint8Array[], b: readonly Uint8Array[]): boolean {
  return a.length === b.length && a.every((k, i) => Buffer.from(k).equals(b[i] ?? new Uint8Array()));
}

function sameTls(a: PeerTls, b: PeerTls): boolean {
  return a.cert === b.cert && a.key === b.key && a.ca === b.ca;
}

function validTo(cert: string): string {
  try {
    return new Date(Date.parse(new X509Certificate(cert).validTo)).toISOString();
  } catch {
    return "unknown";
  }
}
