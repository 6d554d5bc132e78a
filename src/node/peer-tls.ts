// The peer port's mutual TLS as [tls] configures it: with peer_ca_file set, this node presents
// cert_file (its SAN names its node id) and accepts only members whose certificates that CA
// signed (src/transport/_peer-tls.ts). Read once at start; a file that cannot be read stops
// the node there with the path and what to do.

import { readFileSync } from "node:fs";
import type { Config } from "../config/index.ts";
import type { PeerTls } from "../transport/index.ts";
import { SvcError, errorMessage } from "../util/errors.ts";

export function peerTlsOf(config: Config): PeerTls | undefined {
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
  return { cert: read(tls.certFile, "cert_file"), key: read(tls.keyFile, "key_file"), ca: read(tls.peerCaFile, "peer_ca_file") };
}
