// What in a configuration is secret, and whether its listeners are exposed. secretPaths names
// the files that hold keys and tokens, for whatever copies /etc/svc/ (backups, the support
// bundle) to leave out; securityWarnings says which listeners anyone on the network can reach
// without TLS or without a token.

import { isIP } from "node:net";
import type { Address, Config } from "./types.ts";

/**
 * The files the configuration names that hold secrets: the TLS private key, the tokens file
 * (hashes, but a list of who may do what), the admin token file and the gossip key file.
 * Certificates and CA files are public and are not listed.
 */
export function secretPaths(config: Config): string[] {
  const paths = [config.tls?.keyFile ?? "", config.auth?.tokensFile ?? "", config.auth?.tokenFile ?? "", config.gossip?.keyFile ?? ""];
  return [...new Set(paths.filter((p) => p !== ""))];
}

/**
 * Why a file holding secrets has the wrong mode, or null: only its owner may read or write it
 * (0600 or 0400). Group or other bits would let any local user read the hashes or the key.
 */
export function secretFileModeProblem(path: string, mode: number): string | null {
  const perms = mode & 0o777;
  if ((perms & 0o077) === 0) return null;
  return `${path} has mode ${perms.toString(8).padStart(4, "0")}, but it holds secrets and must be readable by its owner only; run \`chmod 600 ${path}\``;
}

/** 127.0.0.0/8, ::1 and localhost: reachable from this machine only. */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase();
  if (h === "localhost" || h === "::1" || h === "[::1]") return true;
  return isIP(h) === 4 && h.startsWith("127.");
}

/**
 * One line per listener that other machines can reach with no protection: client and admin
 * ports without TLS or without tokens, the peer port without mutual TLS ([tls] peer_ca_file).
 */
export function securityWarnings(config: Config): string[] {
  const out: string[] = [];
  const exposed = (a: Address): boolean => !isLoopbackHost(a.host);
  for (const port of ["client", "admin"] as const) {
    const address = config.listen[port];
    if (!exposed(address)) continue;
    const missing = [config.tls == null ? "no TLS ([tls])" : "", config.auth == null ? "no tokens ([auth])" : ""].filter((m) => m !== "");
    if (missing.length > 0) {
      out.push(`listen.${port} = ${address.raw} is reachable from other machines with ${missing.join(" and ")}: anyone who reaches it can ${port === "client" ? "read and change every table" : "pause writes, change membership and read the store"}; bind it to 127.0.0.1 or configure ${missing.length === 2 ? "[tls] and [auth]" : missing[0]?.includes("TLS") ? "[tls]" : "[auth]"}`);
    }
  }
  if (exposed(config.listen.peer) && (config.tls == null || config.tls.peerCaFile === "")) {
    out.push(`listen.peer = ${config.listen.peer.raw} is reachable from other machines without mutual TLS: Raft traffic and snapshots cross the network in clear text and any host can connect; set [tls] peer_ca_file, or let only the other members reach it (a firewall, a private network)`);
  }
  return out;
}
