// Real certificates for TLS tests, made with openssl (Debian has it): CAs, and leaf
// certificates they sign for servers and clients, valid or already expired. Keys are P-256.
// Files are written 0600 in the given directory.

import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export interface CertFiles {
  readonly cert: string;
  readonly key: string;
}

function openssl(args: readonly string[], cwd: string): void {
  const r = Bun.spawnSync(["openssl", ...args], { cwd, stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`openssl ${args.join(" ")} failed: ${r.stderr.toString()}`);
}

const extensions = (san: string): string => `[ca]
basicConstraints=critical,CA:true
keyUsage=critical,keyCertSign,cRLSign
[leaf]
basicConstraints=CA:false
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=${san}
`;

/** A self-signed CA: <dir>/<name>.crt and .key. */
export function makeCa(dir: string, name: string): CertFiles {
  const ext = join(dir, `${name}.ext`);
  writeFileSync(ext, extensions("DNS:unused"));
  const files = { cert: join(dir, `${name}.crt`), key: join(dir, `${name}.key`) };
  openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", files.key, "-out", files.cert,
    "-days", "30", "-subj", `/CN=${name}`, "-extensions", "ca", "-config", ext], dir);
  chmodSync(files.key, 0o600);
  return files;
}

/**
 * A certificate `ca` signed for localhost, 127.0.0.1 and svc://<name>, usable by a server and
 * a client; `days` < 0 makes one that has already expired.
 */
export function makeLeaf(dir: string, name: string, ca: CertFiles, options: { days?: number; san?: string } = {}): CertFiles {
  const ext = join(dir, `${name}.ext`);
  writeFileSync(ext, extensions(options.san ?? `DNS:localhost,IP:127.0.0.1,URI:svc://${name}`));
  const files = { cert: join(dir, `${name}.crt`), key: join(dir, `${name}.key`) };
  const csr = join(dir, `${name}.csr`);
  openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", files.key, "-out", csr, "-subj", `/CN=${name}`], dir);
  openssl(["x509", "-req", "-in", csr, "-CA", ca.cert, "-CAkey", ca.key, "-CAcreateserial", "-out", files.cert,
    "-days", String(options.days ?? 30), "-extfile", ext, "-extensions", "leaf"], dir);
  chmodSync(files.key, 0o600);
  return files;
}
