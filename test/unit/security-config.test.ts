// [tls] and [auth] in the configuration: complete tables with absolute paths to files that
// exist, a tokens file of mode 0600; listeners on loopback unless both protect them; a warning
// for each listener other machines reach unprotected; and the files that hold secrets.

import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseConfig, renderConfigToml, secretPaths, securityWarnings, type Config } from "../../src/config/index.ts";

const dir = mkdtempSync(join(tmpdir(), "svc-secconf-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, mode = 0o600): string => {
  const path = join(dir, name);
  writeFileSync(path, "-----BEGIN X-----\n", { mode });
  return path;
};
const cert = file("node.crt", 0o644);
const key = file("node.key");
const ca = file("ca.crt", 0o644);
const tokens = file("tokens");
const adminToken = file("admin-token");

const tlsTable = `[tls]\ncert_file = "${cert}"\nkey_file = "${key}"\nca_file = "${ca}"\n`;
const authTable = `[auth]\ntokens_file = "${tokens}"\ntoken_file = "${adminToken}"\n`;

function ok(text: string): Config {
  const r = parseConfig(`node_id = "a"\n${text}`, "c.toml");
  if (!r.ok) throw new Error(JSON.stringify(r.problems));
  return r.config;
}

function problems(text: string): string[] {
  const r = parseConfig(`node_id = "a"\n${text}`, "c.toml");
  if (r.ok) throw new Error("expected problems");
  return r.problems.map((p) => `${p.keyPath}: ${p.message}`);
}

describe("config: [tls] and [auth]", () => {
  test("both tables are read; absent ones are null", () => {
    const c = ok(tlsTable + authTable);
    expect(c.tls).toEqual({ certFile: cert, keyFile: key, clientCaFile: "", caFile: ca, peerCaFile: "" });
    expect(c.auth).toEqual({ tokensFile: tokens, tokenFile: adminToken, metricsOpen: false });
    expect(ok("").tls).toBeNull();
  });

  test("a [tls] without key_file, a relative path and a missing file are problems naming the key", () => {
    expect(problems(`[tls]\ncert_file = "${cert}"\n`)).toEqual(["tls.key_file: is required when [tls] is present"]);
    expect(problems(`[tls]\ncert_file = "node.crt"\nkey_file = "${key}"\n`)[0]).toStartWith("tls.cert_file: must be an absolute path");
    expect(problems(`[tls]\ncert_file = "${cert}"\nkey_file = "${join(dir, "nope.key")}"\n`)[0]).toContain("does not exist");
  });

  test("[auth] needs tokens_file, and one readable by group or others is refused", () => {
    expect(problems("[auth]\nmetrics_open = true\n")[0]).toStartWith("auth.tokens_file: is required");
    const open = file("tokens-open", 0o644);
    expect(problems(`[auth]\ntokens_file = "${open}"\n`)[0]).toContain("has mode 0644, but it holds secrets and must be readable by its owner only; run `chmod 600");
  });

  test("listeners default to loopback; with [tls] and [auth] both, to every interface", () => {
    expect(ok("").listen.client.raw).toBe("127.0.0.1:7878");
    expect(ok(tlsTable).listen.admin.raw).toBe("127.0.0.1:9090");
    expect(ok(authTable).listen.peer.raw).toBe("127.0.0.1:7879");
    const both = ok(tlsTable + authTable);
    expect([both.listen.client.raw, both.listen.admin.raw, both.listen.peer.raw]).toEqual(["0.0.0.0:7878", "0.0.0.0:9090", "0.0.0.0:7879"]);
  });

  test("a non-loopback listener without TLS or tokens is warned about; loopback ones are not", () => {
    expect(securityWarnings(ok(""))).toEqual([]);
    const exposed = ok(`[listen]\nclient = "0.0.0.0:7878"\nadmin = "10.0.0.1:9090"\n`);
    const warnings = securityWarnings(exposed);
    expect(warnings[0]).toContain("listen.client = 0.0.0.0:7878 is reachable from other machines with no TLS ([tls]) and no tokens ([auth])");
    expect(warnings[1]).toContain("listen.admin = 10.0.0.1:9090");
    expect(securityWarnings(ok(`${tlsTable}[listen]\nclient = "0.0.0.0:7878"\n`))[0]).toContain("with no tokens ([auth])");
    const protectedOnes = securityWarnings(ok(tlsTable + authTable));
    expect(protectedOnes.filter((w) => w.startsWith("listen.client") || w.startsWith("listen.admin"))).toEqual([]);
    // The peer port is warned about until it has mutual TLS.
    expect(protectedOnes).toEqual([expect.stringContaining("listen.peer = 0.0.0.0:7879 is reachable from other machines without mutual TLS")]);
    expect(securityWarnings(ok(`${tlsTable}peer_ca_file = "${ca}"\n${authTable}`))).toEqual([]);
  });

  test("secretPaths names the key, the tokens file and the admin token file, not certificates", () => {
    expect(secretPaths(ok(tlsTable + authTable)).sort()).toEqual([adminToken, key, tokens].sort());
    expect(secretPaths(ok(""))).toEqual([]);
  });

  test("a rendered config with [tls] and [auth] parses back to the same settings", () => {
    const c = ok(tlsTable + authTable);
    const again = parseConfig(renderConfigToml(c), "again.toml");
    if (!again.ok) throw new Error(JSON.stringify(again.problems));
    expect(again.config.tls).toEqual(c.tls ?? null);
    expect(again.config.auth).toEqual(c.auth ?? null);
  });
});
