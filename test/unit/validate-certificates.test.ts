// `svc --config F --validate` and the validity dates of the [tls] certificates: one expired or
// not yet valid is a problem (exit 2, like the other certificate problems) naming the file, its
// dates and what to do; one that expires within a week is a warning.

import { afterAll, describe, expect, test } from "bun:test";
import { X509Certificate } from "node:crypto";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type CertFiles, makeCa, makeCertBetween, makeLeaf } from "../lib/certs.ts";
import { runSource } from "../lib/source-cli.ts";

const dir = fs.mkdtempSync(join(tmpdir(), "svc-validate-certs-"));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const dayMs = 86_400_000;
const ca = makeCa(dir, "ca");
const node1 = makeLeaf(dir, "node1", ca);

/** --validate of a one-node config whose [tls] has these files. */
function validate(name: string, tls: { cert: CertFiles; caFile?: string; peerCaFile?: string }) {
  const path = join(dir, `${name}.toml`);
  fs.writeFileSync(path, [
    'node_id = "node1"',
    `data_dir = "${join(dir, "data")}"`,
    "[tls]",
    `cert_file = "${tls.cert.cert}"`,
    `key_file = "${tls.cert.key}"`,
    `ca_file = "${tls.caFile ?? ca.cert}"`,
    ...(tls.peerCaFile === undefined ? [] : [`peer_ca_file = "${tls.peerCaFile}"`]),
    "",
  ].join("\n"));
  const r = runSource(["--config", path, "--validate"], dir);
  return { ...r, path };
}

/** When the certificate in `file` stops being valid, as the messages write it. */
const validTo = (file: string): string => new Date(Date.parse(new X509Certificate(fs.readFileSync(file, "utf8")).validTo)).toISOString();

describe("--validate and certificate dates", () => {
  test("a certificate valid now passes, with no certificate warning", () => {
    const r = validate("good", { cert: node1, peerCaFile: ca.cert });
    expect(r.stderr).not.toContain("CERTIFICATE");
    expect(r.code).toBe(0);
  });

  test("an expired cert_file is a problem naming the file, when it expired and what to do: exit 2", () => {
    const expired = makeLeaf(dir, "node1-expired", ca, { days: -1 });
    const r = validate("expired", { cert: expired });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${expired.cert} (tls.cert_file): its certificate expired at ${validTo(expired.cert)}`);
    expect(r.stderr).toContain("valid from ");
    expect(r.stderr).toContain("put a certificate valid now in cert_file");
    expect(r.stderr).toContain("1 problem");
  });

  test("a cert_file not yet valid is a problem saying from when it is: exit 2", () => {
    const from = new Date(Date.now() + 10 * dayMs);
    const future = makeCertBetween(dir, "node1-future", ca, from, new Date(Date.now() + 40 * dayMs), { san: "URI:svc://node1,IP:127.0.0.1" });
    const r = validate("future", { cert: future, peerCaFile: ca.cert });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${future.cert} (tls.cert_file): its certificate is not valid until ${new Date(Math.floor(from.getTime() / 1000) * 1000).toISOString()}`);
  });

  test("a CA file whose every CA has expired is a problem: exit 2", () => {
    const oldCa = makeCertBetween(dir, "old-ca", null, new Date(Date.now() - 60 * dayMs), new Date(Date.now() - dayMs));
    const r = validate("old-ca", { cert: node1, caFile: oldCa.cert });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${oldCa.cert} (tls.ca_file): no CA in it is valid now: "CN=old-ca" expired at`);
  });

  test("an expired CA beside a valid one in a bundle is a warning only: exit 0", () => {
    const oldCa = makeCertBetween(dir, "older-ca", null, new Date(Date.now() - 60 * dayMs), new Date(Date.now() - dayMs));
    const bundle = join(dir, "bundle.crt");
    fs.writeFileSync(bundle, fs.readFileSync(ca.cert, "utf8") + fs.readFileSync(oldCa.cert, "utf8"));
    const r = validate("bundle", { cert: node1, caFile: bundle });
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(`WARNING: CERTIFICATE: ${bundle} (tls.ca_file): "CN=older-ca" expired at`);
  });

  test("a cert_file that expires within a week is a warning: exit 0", () => {
    const soon = makeLeaf(dir, "node1-soon", ca, { days: 3, san: "URI:svc://node1,IP:127.0.0.1" });
    const r = validate("soon", { cert: soon, peerCaFile: ca.cert });
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(`WARNING: CERTIFICATE: ${soon.cert} (tls.cert_file): its certificate expires at ${validTo(soon.cert)}`);
    expect(r.stderr).toContain("renew it before then");
  });
});
