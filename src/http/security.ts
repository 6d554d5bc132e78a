// TLS, tokens and per-client limits for the client and admin ports of one node, as [tls],
// [auth] and [limits] configure them. Everything is read at start (a file that cannot be used stops the node there), again
// on SIGHUP, and whenever one of the files changes (checked every tlsWatchIntervalMs): a
// reload that fails keeps what was in use and logs why, so a bad edit never drops the node.
// Nothing here logs a token, a hash or a key; only paths and counts.

import type { TlsOptions } from "node:tls";
import type { Config } from "../config/index.ts";
import type { Logger } from "../util/logger.ts";
import { errorMessage } from "../util/errors.ts";
import type { Port } from "./access.ts";
import { ClientLimiter } from "./client-limits.ts";
import { guardApp, type FetchApp } from "./guard.ts";
import type { BoundServer } from "./server.ts";
import { filesStamp, loadTlsMaterial, tlsFilesStamp, type TlsMaterial } from "./tls.ts";
import { refusedCertReload } from "../util/cert-validity.ts";
import { TokenSet } from "./tokens.ts";

/** How often the certificate, key, CA and tokens files are looked at for a change. */
export const securityWatchIntervalMs = 2_000;

/** Other secrets read from files and reloaded with these (the peer port's certificates, the gossip keys). */
export interface ReloadableSecrets {
  /** The files whose change calls for a reload. */
  files(): readonly string[];
  /** Reads them again; a file that cannot be used must leave what was in use, and be logged. */
  reload(why: string): void;
  /**
   * Why the certificate in cert_file now could not be used there (the peer port checks it
   * against peer_ca_file and the node's id); null when it could. cert_file is one file for
   * every port: a certificate one port refuses is taken by none.
   */
  certificateRefusal?(): string | null;
}

export class HttpSecurity {
  #tls: TlsMaterial | null;
  #tokens: TokenSet | null;
  #stamp: string;
  #servers: BoundServer[] = [];
  #timer: ReturnType<typeof setInterval> | null = null;
  readonly #others: ReloadableSecrets[] = [];

  private constructor(private readonly config: Config, private readonly log: Logger) {
    this.#tls = config.tls == null ? null : loadTlsMaterial(config.tls);
    this.#tokens = config.auth == null ? null : TokenSet.read(config.auth.tokensFile);
    this.#stamp = this.#filesStamp();
  }

  /** Reads every file now; throws SvcError (TLS_INVALID, TOKENS_FILE_INVALID) when one cannot be used. */
  static load(config: Config, log: Logger): HttpSecurity {
    const security = new HttpSecurity(config, log);
    security.#logState("loaded");
    return security;
  }

  /** Options for listen(): undefined serves plain HTTP. */
  get serverTls(): TlsOptions | undefined {
    return this.#tls?.server;
  }

  /** The app behind the token check (and the relay context); as is when neither [tls] nor [auth] is set. */
  guard(app: FetchApp, port: Port): FetchApp {
    if (this.config.tls == null && this.config.auth == null) return app;
    return guardApp(app, port, {
      nodeId: this.config.nodeId,
      tokens: () => this.#tokens,
      metricsOpen: this.config.auth?.metricsOpen ?? false,
      outboundTls: () => this.#tls?.outbound ?? null,
    });
  }

  /**
   * Per-client limits ([limits]) for one port, each port its own budget; inactive unless
   * configured. `clusterId`: this node's, "" until it knows it (members' relays are told by it).
   */
  limiter(clusterId: () => string): ClientLimiter {
    const members = this.config.cluster.members;
    return new ClientLimiter({
      requestsPerSecond: this.config.limits.clientRequestsPerSecond ?? 0,
      connectionsMax: this.config.limits.clientConnectionsMax ?? 0,
      memberHosts: new Set(members.flatMap((m) => [m.client.host, m.admin.host, m.peer.host])),
      clusterId,
    });
  }

  /** Secrets reloaded with these, on SIGHUP and when one of their files changes. */
  watch(others: ReloadableSecrets): void {
    this.#others.push(others);
    this.#stamp = this.#filesStamp();
  }

  /** Servers whose certificates a reload replaces; starts watching the files. */
  serve(servers: readonly BoundServer[]): void {
    this.#servers.push(...servers);
    if (this.#timer !== null || (this.config.tls == null && this.config.auth == null && this.#others.every((o) => o.files().length === 0))) return;
    this.#timer = setInterval(() => {
      const stamp = this.#filesStamp();
      if (stamp !== this.#stamp) this.reload("a file changed");
    }, securityWatchIntervalMs);
    this.#timer.unref();
  }

  /** Reads the files again; a file that cannot be used leaves the current TLS or tokens in place. */
  reload(why: string): void {
    this.#stamp = this.#filesStamp();
    let reloaded = false;
    // What the reload took that differs from what was in use, for the log line.
    const changed: string[] = [];
    if (this.config.tls != null) {
      let material: TlsMaterial | null = null;
      try {
        material = loadTlsMaterial(this.config.tls);
        const refused = (this.#tls === null ? null : refusedCertReload(String(material.server.cert), String(this.#tls.server.cert), Date.now())) ??
          this.#refusedByOthers();
        if (refused !== null) {
          material = null;
          this.log.error(`TLS not reloaded (${why}); the previous certificates stay in use on every port: ${refused}`, {
            cert_file: this.config.tls.certFile,
            hint: "put a certificate valid now in cert_file (with its key), issued for this node by the members' CA; it is picked up without a restart",
          });
        }
      } catch (e) {
        this.log.error(`TLS not reloaded (${why}); the previous certificates stay in use: ${errorMessage(e)}`);
      }
      if (material !== null) {
        if (this.#tls === null || !sameTlsMaterial(material, this.#tls)) changed.push("TLS certificates");
        this.#tls = material;
        reloaded = true;
        for (const s of this.#servers) {
          s.setTls(material.server).catch((e: unknown) => this.log.error(`a port kept its previous certificates (${why}): ${errorMessage(e)}`));
        }
      }
    }
    if (this.config.auth != null) {
      try {
        const tokens = TokenSet.read(this.config.auth.tokensFile);
        if (this.#tokens === null || !tokens.sameAs(this.#tokens)) changed.push("tokens");
        this.#tokens = tokens;
        reloaded = true;
      } catch (e) {
        this.log.error(`tokens not reloaded (${why}); the previous tokens stay in use: ${errorMessage(e)}`);
      }
    }
    for (const others of this.#others) others.reload(why);
    // Said only of what was taken: after a refusal the line would read as if all went in. It
    // names what changed (a SIGHUP with nothing new says so); the peer port's certificates and
    // the gossip keys have lines of their own.
    if (reloaded) this.#logState(`reloaded (${why}): ${changed.length === 0 ? "no change" : `${changed.join(" and ")} changed`}`);
  }

  /** The first refusal of the certificate now in cert_file by another port (the peer port). */
  #refusedByOthers(): string | null {
    for (const others of this.#others) {
      const refused = others.certificateRefusal?.() ?? null;
      if (refused !== null) return `the peer port refuses it: ${refused}`;
    }
    return null;
  }

  stop(): void {
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
  }

  #filesStamp(): string {
    const parts: string[] = [];
    if (this.config.tls != null) parts.push(tlsFilesStamp(this.config.tls));
    if (this.config.auth != null) parts.push(filesStamp([this.config.auth.tokensFile]));
    for (const others of this.#others) parts.push(filesStamp(others.files()));
    return parts.join("|");
  }

  #logState(what: string): void {
    if (this.config.tls == null && this.config.auth == null) return;
    const fields: Record<string, unknown> = {};
    if (this.config.tls != null && this.#tls !== null) {
      fields["cert_file"] = this.config.tls.certFile;
      fields["cert_valid_to"] = new Date(this.#tls.certValidToMs).toISOString();
      fields["client_certificates"] = this.config.tls.clientCaFile === "" ? "not asked for" : "required";
    }
    if (this.config.auth != null && this.#tokens !== null) {
      fields["tokens_file"] = this.config.auth.tokensFile;
      fields["tokens"] = this.#tokens.size;
    }
    this.log.info(`security ${what}`, fields);
    if (this.#tls !== null && this.#tls.certValidToMs < Date.now()) {
      this.log.warn(`the certificate in ${this.config.tls?.certFile} expired at ${new Date(this.#tls.certValidToMs).toISOString()}: clients will refuse it; replace it (it is picked up without a restart)`);
    }
  }
}

function sameTlsMaterial(a: TlsMaterial, b: TlsMaterial): boolean {
  const pem = (m: TlsMaterial) => [m.server.cert, m.server.key, m.server.ca, m.outbound.ca].map((v) => String(v ?? ""));
  const [x, y] = [pem(a), pem(b)];
  return x.every((v, i) => v === y[i]);
}
