// Real certificates for TLS tests, made with openssl (Debian has it): CAs, and leaf
// certificates they sign for servers and clients, valid, already expired or valid only
// between given dates. Keys are P-256.
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

/** openssl ca's form of a time: YYYYMMDDHHMMSSZ. */
function asn1Time(d: Date): string {
  return `${d.toISOString().replace(/[-:T]/g, "").slice(0, 14)}Z`;
}

/**
 * A certificate valid only from `from` to `to` (in the past, or the future): a CA signed by
 * itself when `ca` is null, else a leaf `ca` signed as makeLeaf does. openssl ca is the tool
 * that sets both dates.
 */
export function makeCertBetween(dir: string, name: string, ca: CertFiles | null, from: Date, to: Date, options: { san?: string } = {}): CertFiles {
  const conf = join(dir, `${name}.ca.cnf`);
  const db = join(dir, `${name}.index`);
  writeFileSync(db, "");
  writeFileSync(join(dir, `${name}.serial`), `${Date.now().toString(16).padStart(16, "0")}\n`);
  writeFileSync(conf, `[d]\ndatabase=${db}\nnew_certs_dir=${dir}\nserial=${join(dir, `${name}.serial`)}\n` +
    `default_md=sha256\npolicy=p\nunique_subject=no\ncopy_extensions=none\n[p]\ncommonName=supplied\n` +
    extensions(options.san ?? `DNS:localhost,IP:127.0.0.1,URI:svc://${name}`));
  const files = { cert: join(dir, `${name}.crt`), key: join(dir, `${name}.key`) };
  const csr = join(dir, `${name}.csr`);
  openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", files.key, "-out", csr, "-subj", `/CN=${name}`], dir);
  const signer = ca === null ? ["-selfsign", "-keyfile", files.key, "-extensions", "ca"] : ["-cert", ca.cert, "-keyfile", ca.key, "-extensions", "leaf"];
  openssl(["ca", "-batch", "-notext", "-config", conf, "-name", "d", "-in", csr, "-out", files.cert, "-startdate", asn1Time(from), "-enddate", asn1Time(to), ...signer], dir);
  chmodSync(files.key, 0o600);
  return files;
}
