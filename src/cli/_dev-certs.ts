// Certificates and a token for `svc dev-cluster --secure`, made with openssl (as an operator
// would): a CA, one certificate for every node (127.0.0.1 and localhost, usable as server and
// client), and an admin token in a tokens file. Keys and token files are 0600.

import { chmodSync, existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { AuthSettings, TlsSettings } from "../config/index.ts";
import { createToken } from "../http/index.ts";
import { CliExit, ExitCode } from "./_exit.ts";

const extensions = `[ca]
basicConstraints=critical,CA:true
keyUsage=critical,keyCertSign,cRLSign
[node]
basicConstraints=CA:false
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=DNS:localhost,IP:127.0.0.1,${[1, 2, 3, 4, 5].map((i) => `URI:svc://node${i}`).join(",")}
`;

function openssl(args: readonly string[]): void {
  const r = Bun.spawnSync(["openssl", ...args], { stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) {
    throw new CliExit(ExitCode.failure, `openssl ${args[0]} failed: ${r.stderr.toString().trim()}\n  → --secure needs openssl on PATH (apt-get install openssl)`);
  }
}

/** TLS and token settings for every node, made once in `dir` and kept for later runs. */
export function devSecurity(dir: string): { tls: TlsSettings; auth: AuthSettings; adminTokenFile: string } {
  const ext = join(dir, "openssl.ext");
  const ca = { cert: join(dir, "ca.crt"), key: join(dir, "ca.key") };
  const node = { cert: join(dir, "node.crt"), key: join(dir, "node.key"), csr: join(dir, "node.csr") };
  const tokensFile = join(dir, "tokens");
  const adminTokenFile = join(dir, "admin-token");
  if (!existsSync(node.cert)) {
    writeFileSync(ext, extensions);
    const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
    openssl(["req", "-x509", ...ec, "-keyout", ca.key, "-out", ca.cert, "-days", "825", "-subj", "/CN=svc dev-cluster CA", "-extensions", "ca", "-config", ext]);
    openssl(["req", ...ec, "-keyout", node.key, "-out", node.csr, "-subj", "/CN=svc dev-cluster node"]);
    openssl(["x509", "-req", "-in", node.csr, "-CA", ca.cert, "-CAkey", ca.key, "-CAcreateserial", "-out", node.cert, "-days", "825", "-extfile", ext, "-extensions", "node"]);
    chmodSync(ca.key, 0o600);
    chmodSync(node.key, 0o600);
  }
  if (!existsSync(adminTokenFile)) writeFileSync(adminTokenFile, `${createToken(tokensFile, "admin", "dev-cluster")}\n`, { mode: 0o600 });
  return {
    tls: { certFile: node.cert, keyFile: node.key, clientCaFile: "", caFile: ca.cert, peerCaFile: ca.cert },
    auth: { tokensFile, tokenFile: adminTokenFile, metricsOpen: false },
    adminTokenFile,
  };
}
