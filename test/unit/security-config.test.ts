// [tls] and [auth] in the configuration: complete tables with absolute paths to files that
// exist, a tokens file of mode 0600; listeners on loopback unless both protect them; a warning
// for each listener other machines reach unprotected; and the files that hold secrets. [gossip]
// key_file: one or two base64 keys of 32 bytes, mode 0600; anything else is refused, without
// the key in the message; PeerSecrets reloads it, keeping the keys in use when the file is bad.

import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { decodePacket, encodePacket, sharedKey } from "../../src/gossip/index.ts";
import { PeerSecrets } from "../../src/node/index.ts";
import { HttpSecurity, createToken } from "../../src/http/index.ts";
import { silentLogger, type Logger } from "../../src/util/index.ts";
import type { PeerTls, Transport } from "../../src/transport/index.ts";
import { makeCa, makeLeaf } from "../lib/certs.ts";
import { copyFileSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { newGossipKey, parseConfig, renderConfigToml, secretPaths, securityWarnings, type Config } from "../../src/config/index.ts";

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

  test("secretPaths names the key, the tokens file, the admin token file and the gossip key file, not certificates", () => {
    const gossipKey = keyFile("secret-paths.key", `${newGossipKey()}\n`);
    expect(secretPaths(ok(tlsTable + authTable + `[gossip]\nkey_file = "${gossipKey}"\n`)).sort()).toEqual([adminToken, key, tokens, gossipKey].sort());
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

function keyFile(name: string, text: string, mode = 0o600): string {
  const path = join(dir, name);
  writeFileSync(path, text, { mode });
  chmodSync(path, mode);
  return path;
}

const gossipTable = (path: string): string => `[gossip]\nkey_file = "${path}"\n`;

describe("config: [gossip] key_file", () => {
  test("one key, or two during a rotation, is read; without [gossip] there is none", () => {
    const one = keyFile("one.key", `${newGossipKey()}\n`);
    expect(ok(gossipTable(one)).gossip).toEqual({ keyFile: one });
    const two = keyFile("two.key", `# rotating\n${newGossipKey()}\n\n${newGossipKey()}\n`);
    expect(ok(gossipTable(two)).gossip).toEqual({ keyFile: two });
    expect(ok("").gossip).toBeNull();
    const again = parseConfig(renderConfigToml(ok(gossipTable(one))), "again.toml");
    expect(again.ok && again.config.gossip).toEqual({ keyFile: one });
  });

  test("a key file that is missing, open to others, not base64, of the wrong length or with three keys is refused; the message holds no key", () => {
    const short = randomBytes(16).toString("base64");
    const cases: [string, string][] = [
      [join(dir, "missing.key"), "does not exist"],
      [keyFile("open.key", `${newGossipKey()}\n`, 0o644), "has mode 0644"],
      [keyFile("text.key", "this is not a key!\n"), "line 1 is not a base64 key"],
      [keyFile("short.key", `${short}\n`), "holds a key of 16 bytes, but a gossip key is 32 bytes"],
      [keyFile("three.key", `${newGossipKey()}\n${newGossipKey()}\n${newGossipKey()}\n`), "holds 3 keys, but at most 2"],
      [keyFile("empty.key", "\n"), "holds no key"],
      [`relative.key`, "must be an absolute path"],
    ];
    for (const [path, message] of cases) {
      const found = problems(gossipTable(path));
      expect(found.length).toBe(1);
      expect(found[0]).toStartWith("gossip.key_file: ");
      expect(found[0]).toContain(message);
    }
    expect(problems(gossipTable(join(dir, "short.key")))[0]).not.toContain(short);
  });
});

describe("PeerSecrets: the gossip keys reloaded", () => {
  test("a reload takes a rotated key file; a bad one is logged and the keys in use stay", () => {
    const k1 = newGossipKey();
    const k2 = newGossipKey();
    const path = keyFile("reload.key", `${k1}\n`);
    const errors: string[] = [];
    const log: Logger = { ...silentLogger, error: (m) => errors.push(m), child: () => log };
    const secrets = PeerSecrets.load(ok(gossipTable(path)), log);
    const key = secrets.gossipKeyFor()("c1");
    const under = (k: string) => sharedKey(() => [new Uint8Array(Buffer.from(k, "base64"))]);
    const message = { type: "ping" as const, seq: 1, from: "a", updates: [], facts: [] };
    const opens = (sealer: ReturnType<typeof under>): boolean => decodePacket(encodePacket(message, "c1", sealer), "c1", key, 1400).ok;
    expect(opens(under(k1))).toBe(true);
    expect(opens(under(k2))).toBe(false);

    keyFile("reload.key", `${k2}\n${k1}\n`);
    secrets.reload("test");
    expect(opens(under(k1))).toBe(true);
    expect(opens(under(k2))).toBe(true);
    expect(decodePacket(encodePacket(message, "c1", key), "c1", under(k2), 1400).ok).toBe(true);

    keyFile("reload.key", "garbage\n");
    secrets.reload("test");
    expect(errors.join("\n")).toContain("gossip keys not reloaded (test); the previous keys stay in use");
    expect(errors.join("\n")).not.toContain(k2);
    expect(opens(under(k2))).toBe(true);

    // A key file others may read is refused at a reload as at start (a restart would refuse it).
    const k3 = newGossipKey();
    keyFile("reload.key", `${k3}\n`, 0o644);
    errors.length = 0;
    secrets.reload("test");
    expect(errors.join("\n")).toContain("gossip keys not reloaded (test)");
    expect(opens(under(k3))).toBe(false);
    expect(opens(under(k2))).toBe(true);
  });
});

describe("a reload says what it reloaded", () => {
  test("a reload in which only the tokens file changed says the tokens changed, and nothing of the gossip keys or certificates", () => {
    const reloadDir = mkdtempSync(join(dir, "reload-"));
    const clusterCa = makeCa(reloadDir, "ca");
    const leaf = makeLeaf(reloadDir, "a", clusterCa);
    const tokensFile = join(reloadDir, "tokens");
    createToken(tokensFile, "admin", "operator");
    const gossipKey = keyFile("reload-tokens.key", `${newGossipKey()}\n`);
    const config = ok(`[tls]\ncert_file = "${leaf.cert}"\nkey_file = "${leaf.key}"\npeer_ca_file = "${clusterCa.cert}"\n` +
      `[auth]\ntokens_file = "${tokensFile}"\n${gossipTable(gossipKey)}`);
    const logs: string[] = [];
    const log: Logger = { ...silentLogger, info: (m) => logs.push(m), warn: (m) => logs.push(m), error: (m) => logs.push(m), child: () => log };
    const security = HttpSecurity.load(config, log);
    const secrets = PeerSecrets.load(config, log);
    security.watch(secrets);
    try {
      createToken(tokensFile, "read", "reader");
      logs.length = 0;
      security.reload("a file changed");
      expect(logs).toEqual(["security reloaded (a file changed): tokens changed"]);

      // Nothing changed: said so, and no other line claims a reload.
      logs.length = 0;
      security.reload("SIGHUP");
      expect(logs).toEqual(["security reloaded (SIGHUP): no change"]);

      // The gossip keys, when they do change, have their line.
      keyFile("reload-tokens.key", `${newGossipKey()}\n`);
      logs.length = 0;
      security.reload("SIGHUP");
      expect(logs).toEqual(["gossip keys reloaded (SIGHUP)", "security reloaded (SIGHUP): no change"]);
    } finally {
      security.stop();
    }
  });
});

describe("PeerSecrets: the peer port's certificates reloaded", () => {
  test("a reload hands new files to the transport; files that do not go together are logged and not taken", () => {
    const tlsDir = mkdtempSync(join(dir, "peer-"));
    const clusterCa = makeCa(tlsDir, "ca");
    const leaf = makeLeaf(tlsDir, "a", clusterCa);
    const config = ok(`[tls]\ncert_file = "${leaf.cert}"\nkey_file = "${leaf.key}"\npeer_ca_file = "${clusterCa.cert}"\n`);
    const logs: string[] = [];
    const log: Logger = { ...silentLogger, info: (m) => logs.push(m), error: (m) => logs.push(m), child: () => log };
    const secrets = PeerSecrets.load(config, log);
    const given: PeerTls[] = [];
    secrets.attach({ setTls: (t: PeerTls) => given.push(t) } as unknown as Transport);
    expect(secrets.files()).toEqual([leaf.cert, leaf.key, clusterCa.cert]);

    secrets.reload("unchanged");
    expect(given).toEqual([]);
    const next = makeLeaf(tlsDir, "a-next", clusterCa, { san: "URI:svc://a" });
    copyFileSync(next.cert, leaf.cert);
    copyFileSync(next.key, leaf.key);
    secrets.reload("SIGHUP");
    expect(given.length).toBe(1);
    expect(given[0]?.cert).toBe(readFileSync(next.cert, "utf8"));
    expect(secrets.tls?.cert).toBe(readFileSync(next.cert, "utf8"));

    copyFileSync(clusterCa.key, leaf.key);
    secrets.reload("SIGHUP");
    expect(given.length).toBe(1);
    expect(logs.join("\n")).toContain("peer TLS not reloaded (SIGHUP); the previous certificates stay in use");
    expect(secrets.tls?.key).toBe(readFileSync(next.key, "utf8"));
  });

  test("a certificate the peer port refuses on reload is taken by no port: the client and admin ports keep theirs too", () => {
    // cert_file is one file for every port: the peer port refused one from another CA while the
    // client and admin ports served it, and every relay to this node failed on it.
    const tlsDir = mkdtempSync(join(dir, "peer-"));
    const clusterCa = makeCa(tlsDir, "ca");
    const leaf = makeLeaf(tlsDir, "a", clusterCa);
    const config = ok(`[tls]\ncert_file = "${leaf.cert}"\nkey_file = "${leaf.key}"\nca_file = "${clusterCa.cert}"\npeer_ca_file = "${clusterCa.cert}"\n`);
    const logs: string[] = [];
    const log: Logger = { ...silentLogger, info: (m) => logs.push(m), error: (m) => logs.push(m), child: () => log };
    const security = HttpSecurity.load(config, log);
    const secrets = PeerSecrets.load(config, log);
    security.watch(secrets);
    const before = String(security.serverTls?.cert);
    const otherCa = makeCa(tlsDir, "other-ca");
    const stranger = makeLeaf(tlsDir, "a-other", otherCa, { san: "URI:svc://a" });
    copyFileSync(stranger.cert, leaf.cert);
    copyFileSync(stranger.key, leaf.key);
    logs.length = 0;
    security.reload("SIGHUP");
    expect(String(security.serverTls?.cert)).toBe(before);
    expect(logs.join("\n")).toContain("TLS not reloaded (SIGHUP); the previous certificates stay in use on every port: the peer port refuses it");
    // Nothing was taken: no line says the security was reloaded.
    expect(logs.join("\n")).not.toContain("security reloaded");
    security.stop();
  });

  test("a certificate the members would refuse stops the node at start: one naming another node, one from a CA not in peer_ca_file", () => {
    const tlsDir = mkdtempSync(join(dir, "peer-"));
    const clusterCa = makeCa(tlsDir, "ca");
    const load = (cert: { cert: string; key: string }, ca = clusterCa.cert) =>
      () => PeerSecrets.load(ok(`[tls]\ncert_file = "${cert.cert}"\nkey_file = "${cert.key}"\npeer_ca_file = "${ca}"\n`), silentLogger);
    expect(load(makeLeaf(tlsDir, "a", clusterCa))).not.toThrow();
    const named = makeLeaf(tlsDir, "b", clusterCa);
    expect(load(named)).toThrow(/names localhost, b, not this node \(a\): every member would refuse it/);
    const foreign = makeLeaf(tlsDir, "a-foreign", makeCa(tlsDir, "other-ca"), { san: "URI:svc://a" });
    expect(load(foreign)).toThrow(/was not issued by a CA in .*peer_ca_file/);
    // A peer_ca_file holding both CAs (a rotation) takes it.
    const both = join(tlsDir, "both.crt");
    writeFileSync(both, readFileSync(clusterCa.cert, "utf8") + readFileSync(join(tlsDir, "other-ca.crt"), "utf8"));
    expect(load(foreign, both)).not.toThrow();
  });
});
