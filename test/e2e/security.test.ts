// TLS and tokens on a real node (the compiled binary) with certificates openssl makes: https
// only, TLS 1.2+; mutual TLS refuses a client certificate from another CA, an expired one or
// none; a rotated certificate is served without a restart; tokens with roles on both ports,
// taken by `svc admin` from --token-file, SVC_TOKEN or the config; a tokens file of the wrong
// mode stops the node at start; planted secrets appear in no output.

import * as fs from "node:fs";
import * as tls from "node:tls";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { describe, expect } from "bun:test";
import type { ConfigDraft } from "../../src/config/index.ts";
import { createToken, type Role } from "../../src/http/index.ts";
import { makeCa, makeLeaf, type CertFiles } from "../lib/certs.ts";
import { clusterConfigs, procTest, runBinary, singleNodeConfig, useCompiledBinary, useProcessCleanup, waitFor, type ProcEnv } from "../lib/proc.ts";

useProcessCleanup();
useCompiledBinary();

interface Secured {
  readonly ca: CertFiles;
  readonly node: CertFiles;
  readonly tokens: Record<Role, string>;
  readonly tokensFile: string;
  readonly adminTokenFile: string;
  readonly config: ConfigDraft;
}

/** A single node's config with [tls] (its own CA) and [auth] (a token of each role). */
async function securedConfig(env: ProcEnv, options: { mutual?: boolean; peer?: boolean } = {}): Promise<Secured> {
  const ca = makeCa(env.dir, "ca");
  const node = makeLeaf(env.dir, "node1", ca);
  const tokensFile = join(env.dir, "tokens");
  const tokens = {
    read: createToken(tokensFile, "read", "reader"),
    write: createToken(tokensFile, "write", "writer"),
    admin: createToken(tokensFile, "admin", "operator"),
  };
  const adminTokenFile = join(env.dir, "admin-token");
  fs.writeFileSync(adminTokenFile, `${tokens.admin}\n`, { mode: 0o600 });
  const config = await singleNodeConfig(env.dir, {
    tls: { certFile: node.cert, keyFile: node.key, clientCaFile: options.mutual === true ? ca.cert : "", caFile: ca.cert, peerCaFile: options.peer === true ? ca.cert : "" },
    auth: { tokensFile, tokenFile: adminTokenFile, metricsOpen: false },
  });
  return { ca, node, tokens, tokensFile, adminTokenFile, config };
}

function url(config: ConfigDraft, port: "client" | "admin"): string {
  const a = config.listen?.[port];
  return `https://${typeof a === "string" ? a : a?.raw}`;
}

interface CallOptions {
  ca?: string;
  client?: CertFiles;
  token?: string;
  method?: string;
  body?: unknown;
}

async function call(base: string, path: string, o: CallOptions = {}): Promise<{ status: number; body: Record<string, unknown> }> {
  const r = await fetch(`${base}${path}`, {
    method: o.method ?? (o.body === undefined ? "GET" : "POST"),
    headers: { ...(o.token === undefined ? {} : { authorization: `Bearer ${o.token}` }), ...(o.body === undefined ? {} : { "content-type": "application/json" }) },
    ...(o.body === undefined ? {} : { body: JSON.stringify(o.body) }),
    tls: {
      ...(o.ca === undefined ? {} : { ca: fs.readFileSync(o.ca, "utf8") }),
      ...(o.client === undefined ? {} : { cert: fs.readFileSync(o.client.cert, "utf8"), key: fs.readFileSync(o.client.key, "utf8") }),
    },
    keepalive: false,
  });
  const text = await r.text();
  return { status: r.status, body: text.startsWith("{") ? (JSON.parse(text) as Record<string, unknown>) : { text } };
}

/** The subject CN of the certificate a new connection to `base` is served. */
function servedCertificate(base: string, ca: string, client?: CertFiles): Promise<string> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = tls.connect({
      host: u.hostname, port: Number(u.port), servername: "localhost", ca: fs.readFileSync(ca, "utf8"),
      ...(client === undefined ? {} : { cert: fs.readFileSync(client.cert, "utf8"), key: fs.readFileSync(client.key, "utf8") }),
    }, () => {
      const cn = socket.getPeerCertificate().subject?.CN ?? "";
      socket.end();
      resolve(String(cn));
    });
    socket.on("error", reject);
  });
}

async function startSecured(env: ProcEnv, s: Secured, client?: CertFiles): Promise<ReturnType<ProcEnv["node"]>> {
  const node = env.node(s.config);
  node.spawn();
  await waitFor("the node to answer /health over https", async () => {
    if (!node.running) throw new Error(`the node exited:\n${node.log()}`);
    return (await call(url(s.config, "client"), "/health", { ca: s.ca.cert, ...(client === undefined ? {} : { client }) })).status === 200;
  }, { deadlineMs: 30_000 });
  return node;
}

/** Send `bytes` over TLS to `base` and return all that comes back until the server closes. */
function tlsExchange(base: string, ca: string, bytes: string): Promise<string> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = tls.connect({ host: u.hostname, port: Number(u.port), servername: "localhost", ca: fs.readFileSync(ca, "utf8") }, () => socket.write(bytes));
    socket.on("data", (c: Buffer) => chunks.push(c));
    socket.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    socket.on("error", reject);
    socket.setTimeout(10_000, () => {
      socket.destroy();
      reject(new Error(`no close from ${base} within 10 s; got: ${Buffer.concat(chunks).toString("utf8").slice(0, 200)}`));
    });
  });
}

async function refused(p: Promise<unknown>): Promise<boolean> {
  try {
    await p;
    return false;
  } catch {
    return true;
  }
}

describe("TLS and tokens on the client and admin ports", () => {
  procTest("https only; each route needs its role, 401 and 403 name it; /health answers a probe with its status only", async (env) => {
    const s = await securedConfig(env);
    await startSecured(env, s);
    const client = url(s.config, "client");
    const admin = url(s.config, "admin");
    // Plain HTTP on a TLS port gets nowhere.
    expect(await refused(fetch(client.replace("https:", "http:") + "/health"))).toBe(true);
    // An untrusted server certificate is refused by a client that checks it.
    expect(await refused(call(client, "/health"))).toBe(true);

    expect((await call(client, "/health", { ca: s.ca.cert })).body).toEqual({ status: "ok", hint: expect.any(String) });
    expect((await call(client, "/health", { ca: s.ca.cert, token: s.tokens.read })).body["node_id"]).toBe("node1");

    const create = { statements: ["CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT)"] };
    const none = await call(client, "/v1/execute", { ca: s.ca.cert, body: create });
    expect(none.status).toBe(401);
    expect(JSON.stringify(none.body)).toContain("needs a token with role write");
    const reader = await call(client, "/v1/execute", { ca: s.ca.cert, body: create, token: s.tokens.read });
    expect(reader.status).toBe(403);
    expect(JSON.stringify(reader.body)).toContain("needs role write; this token has role read");
    expect((await call(client, "/v1/execute", { ca: s.ca.cert, body: create, token: s.tokens.write })).status).toBe(200);
    expect((await call(client, "/v1/query", { ca: s.ca.cert, body: { sql: "SELECT count(*) FROM kv" }, token: s.tokens.read })).status).toBe(200);
    // The scheme is case-insensitive (RFC 7235); another scheme is named as such, not as an unknown token.
    const raw = async (authorization: string): Promise<{ status: number; text: string }> => {
      const r = await fetch(`${client}/v1/query`, {
        method: "POST", headers: { authorization, "content-type": "application/json" }, body: JSON.stringify({ sql: "SELECT 1" }),
        tls: { ca: fs.readFileSync(s.ca.cert, "utf8") }, keepalive: false,
      });
      return { status: r.status, text: await r.text() };
    };
    expect((await raw(`bearer ${s.tokens.read}`)).status).toBe(200);
    expect((await raw(`BEARER  ${s.tokens.read}`)).status).toBe(200);
    const basic = await raw(`Basic ${Buffer.from("u:p").toString("base64")}`);
    expect(basic.status).toBe(401);
    expect(basic.text).toContain("is not \\\"Bearer <token>\\\"");

    expect((await call(admin, "/metrics", { ca: s.ca.cert })).status).toBe(401);
    expect((await call(admin, "/metrics", { ca: s.ca.cert, token: s.tokens.read })).status).toBe(200);
    expect((await call(admin, "/admin/stats", { ca: s.ca.cert, token: s.tokens.write })).status).toBe(403);
    expect((await call(admin, "/admin/stats", { ca: s.ca.cert, token: s.tokens.admin })).status).toBe(200);

    // A protocol older than TLS 1.2 is refused at the handshake.
    const u = new URL(client);
    const old = await refused(new Promise((resolve, reject) => {
      const socket = tls.connect({ host: u.hostname, port: Number(u.port), maxVersion: "TLSv1.1", minVersion: "TLSv1", rejectUnauthorized: false }, () => {
        socket.end();
        resolve(undefined);
      });
      socket.on("error", reject);
    }));
    expect(old).toBe(true);

    // A request the HTTP parser refuses gets the JSON error over TLS too, then the connection closes.
    for (const base of [client, admin]) {
      for (const [bytes, status, code] of [
        ["GARBAGE\r\n\r\n", 400, "BAD_REQUEST"],
        [`GET /health HTTP/1.1\r\nHost: svc\r\nX-Padding: ${"a".repeat(20_000)}\r\n\r\n`, 431, "HEADERS_TOO_LARGE"],
      ] as const) {
        const answer = await tlsExchange(base, s.ca.cert, bytes);
        expect(answer.split("\r\n")[0]).toBe(`HTTP/1.1 ${status} ${status === 400 ? "Bad Request" : "Request Header Fields Too Large"}`);
        expect((JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)) as { error: { code: string } }).error.code).toBe(code);
      }
    }
  }, 120_000);

  procTest("svc admin takes its token from --token-file, SVC_TOKEN or the config, and its CA from --cacert or the config", async (env) => {
    const s = await securedConfig(env);
    const node = await startSecured(env, s);
    const adminUrl = url(s.config, "admin");
    const tokenFile = join(env.dir, "operator-token");
    fs.writeFileSync(tokenFile, s.tokens.admin, { mode: 0o600 });

    const viaFile = await runBinary(["admin", "cluster-info", "--node", adminUrl, "--cacert", s.ca.cert, "--token-file", tokenFile]);
    expect(viaFile.exitCode).toBe(0);
    expect(JSON.parse(viaFile.stdout).node_id).toBe("node1");
    const viaEnv = await runBinary(["admin", "stats", "--node", adminUrl, "--cacert", s.ca.cert], { env: { SVC_TOKEN: s.tokens.admin } });
    expect(viaEnv.exitCode).toBe(0);
    const viaConfig = await runBinary(["admin", "stats", "--config", node.configPath]);
    expect(viaConfig.exitCode).toBe(0);
    // The backup tools reach the node the same way: https, with the config's token and CA.
    const backupDir = join(env.dir, "backups");
    const backup = await runBinary(["admin", "backup", "snapshot", "--config", node.configPath, "--to", backupDir]);
    expect({ exit: backup.exitCode, stderr: backup.stderr }).toEqual({ exit: 0, stderr: "" });
    expect(fs.existsSync(join(backupDir, "latest", "metadata.json"))).toBe(true);

    const noToken = await runBinary(["admin", "stats", "--node", adminUrl, "--cacert", s.ca.cert], { env: { SVC_TOKEN: "" } });
    expect(noToken.exitCode).not.toBe(0);
    expect(noToken.stderr).toContain("needs a token with role admin");
    const wrongRole = await runBinary(["admin", "stats", "--node", adminUrl, "--cacert", s.ca.cert], { env: { SVC_TOKEN: s.tokens.read } });
    expect(wrongRole.stderr).toContain("needs role admin; this token has role read");
    const noCa = await runBinary(["admin", "stats", "--node", adminUrl], { env: { SVC_TOKEN: s.tokens.admin } });
    expect(noCa.exitCode).not.toBe(0);
    // Named as a certificate not trusted, with the flag that fixes it, not as a node not running.
    expect(noCa.stderr).toContain("pass --cacert FILE");
    expect(noCa.stderr).not.toContain("is it running");

    // A token made while the node runs is accepted without a restart.
    const made = await runBinary(["admin", "token", "create", "--role", "admin", "--config", node.configPath]);
    expect(made.exitCode).toBe(0);
    const fresh = made.stdout.trim();
    expect(fresh).toStartWith("svc_");
    expect(fs.readFileSync(s.tokensFile, "utf8")).not.toContain(fresh);
    await waitFor("the new token to be accepted", async () => (await call(adminUrl, "/admin/stats", { ca: s.ca.cert, token: fresh })).status === 200);

    // token list names each token with its role and the start of its hash, never the token itself.
    const listed = await runBinary(["admin", "token", "list", "--config", node.configPath, "--json"]);
    expect(listed.exitCode).toBe(0);
    const tokens = JSON.parse(listed.stdout) as { name: string; role: string; hash_prefix: string }[];
    expect(tokens.map((t) => [t.name, t.role])).toEqual([["reader", "read"], ["writer", "write"], ["operator", "admin"], [expect.stringMatching(/^admin-/), "admin"]]);
    for (const token of Object.values(s.tokens)) expect(listed.stdout).not.toContain(token);
    // Revoked, the writer's token is refused within the node's reload, and the others still work.
    expect((await call(url(s.config, "client"), "/v1/execute", { ca: s.ca.cert, token: s.tokens.write, body: { statements: ["CREATE TABLE t (x)"] } })).status).toBe(200);
    const revoked = await runBinary(["admin", "token", "revoke", "--name", "writer", "--config", node.configPath]);
    expect(revoked.exitCode).toBe(0);
    expect(revoked.stdout).toContain("revoked writer (write, sha256:");
    expect(revoked.stderr).toContain("revoke on each node of the cluster");
    await waitFor("the revoked token to be refused", async () =>
      (await call(url(s.config, "client"), "/v1/execute", { ca: s.ca.cert, token: s.tokens.write, body: { statements: ["INSERT INTO t VALUES (1)"] } })).status === 401);
    expect((await call(adminUrl, "/admin/stats", { ca: s.ca.cert, token: fresh })).status).toBe(200);
    const again = await runBinary(["admin", "token", "revoke", "--name", "writer", "--config", node.configPath]);
    expect(again.exitCode).toBe(1);
    expect(again.stderr).toContain('no token named "writer"');

    // SIGHUP reloads too.
    if (node.pid !== null) process.kill(node.pid, "SIGHUP");
    await waitFor("the reload on SIGHUP to be logged", () => node.log().includes("security reloaded (SIGHUP)"));
  }, 120_000);

  procTest("a rotated certificate is served to new connections without a restart; a broken one is not taken", async (env) => {
    const s = await securedConfig(env);
    const node = await startSecured(env, s);
    const client = url(s.config, "client");
    const pid = node.pid;
    expect(await servedCertificate(client, s.ca.cert)).toBe("node1");

    const next = makeLeaf(env.dir, "node1-rotated", s.ca);
    fs.copyFileSync(next.key, `${s.node.key}.new`);
    fs.copyFileSync(next.cert, `${s.node.cert}.new`);
    fs.renameSync(`${s.node.key}.new`, s.node.key);
    fs.renameSync(`${s.node.cert}.new`, s.node.cert);
    await waitFor("the rotated certificate to be served", async () => (await servedCertificate(client, s.ca.cert)) === "node1-rotated");
    expect(node.pid).toBe(pid);
    expect(node.running).toBe(true);

    // A key that does not match the certificate is refused; the rotated pair stays in use.
    fs.copyFileSync(s.ca.key, s.node.key);
    if (node.pid !== null) process.kill(node.pid, "SIGHUP");
    await waitFor("the refused reload to be logged", () => node.log().includes("TLS not reloaded"));
    expect(await servedCertificate(client, s.ca.cert)).toBe("node1-rotated");
  }, 120_000);
});

describe("mutual TLS on the peer port: certificates rotated without a restart", () => {
  procTest("a new CA and a certificate it signed are used by new peer handshakes after a file change; refusals show in /metrics; a broken key on SIGHUP is not taken", async (env) => {
    const s = await securedConfig(env, { peer: true });
    const node = await startSecured(env, s);
    const peer = `https://${typeof s.config.listen?.peer === "string" ? s.config.listen.peer : s.config.listen?.peer?.raw}`;
    // The probe names node1 itself, which is no peer of node1: served a certificate, then refused.
    const probe = makeLeaf(env.dir, "probe", s.ca, { san: "URI:svc://node1" });
    expect(await servedCertificate(peer, s.ca.cert, probe)).toBe("node1");
    await waitFor("the refusal in /metrics", async () => {
      const text = (await call(url(s.config, "admin"), "/metrics", { ca: s.ca.cert, token: s.tokens.read })).body["text"];
      return typeof text === "string" && /tensor_chain_peer_tls_refusals_total\{reason="not_a_member"\} [1-9]/.test(text);
    });

    const pid = node.pid;
    const newCa = makeCa(env.dir, "new-ca");
    const rotated = makeLeaf(env.dir, "node1-rotated", newCa, { san: "DNS:localhost,IP:127.0.0.1,URI:svc://node1" });
    const bundle = fs.readFileSync(s.ca.cert, "utf8") + fs.readFileSync(newCa.cert, "utf8");
    const bundleFile = join(env.dir, "bundle.crt");
    fs.writeFileSync(bundleFile, bundle);
    fs.writeFileSync(`${s.ca.cert}.new`, bundle);
    fs.copyFileSync(rotated.key, `${s.node.key}.new`);
    fs.copyFileSync(rotated.cert, `${s.node.cert}.new`);
    fs.renameSync(`${s.ca.cert}.new`, s.ca.cert);
    fs.renameSync(`${s.node.key}.new`, s.node.key);
    fs.renameSync(`${s.node.cert}.new`, s.node.cert);
    const newProbe = makeLeaf(env.dir, "probe-new", newCa, { san: "URI:svc://node1" });
    await waitFor("the rotated certificate served on the peer port", async () => (await servedCertificate(peer, bundleFile, newProbe).catch(() => "")) === "node1-rotated");
    await waitFor("the reload logged", () => node.log().includes("peer TLS reloaded (a file changed)"));
    expect(node.pid).toBe(pid);
    expect(node.running).toBe(true);

    fs.copyFileSync(s.ca.key, s.node.key);
    if (node.pid !== null) process.kill(node.pid, "SIGHUP");
    await waitFor("the refused reload logged", () => node.log().includes("peer TLS not reloaded (SIGHUP)"));
    expect(await servedCertificate(peer, bundleFile, newProbe)).toBe("node1-rotated");

    // An expired certificate (with its own key) is refused as well, on every port: peers and
    // clients would refuse it, and a leader serving it stops the cluster's writes.
    const expired = makeLeaf(env.dir, "node1-expired", newCa, { days: -1, san: "DNS:localhost,IP:127.0.0.1,URI:svc://node1" });
    fs.copyFileSync(expired.key, s.node.key);
    fs.copyFileSync(expired.cert, s.node.cert);
    const logged = node.log().length;
    if (node.pid !== null) process.kill(node.pid, "SIGHUP");
    await waitFor("both refusals logged", () => {
      const since = node.log().slice(logged);
      return since.includes("peer TLS not reloaded (SIGHUP)") && since.includes("TLS not reloaded (SIGHUP)") && since.includes("expired at");
    });
    expect(await servedCertificate(peer, bundleFile, newProbe)).toBe("node1-rotated");
    expect(await servedCertificate(url(s.config, "client"), bundleFile)).toBe("node1-rotated");
  }, 120_000);
});

describe("mutual TLS on the client and admin ports", () => {
  procTest("a client certificate from another CA, an expired one or none is refused; the node's CA's is accepted", async (env) => {
    const s = await securedConfig(env, { mutual: true });
    const good = makeLeaf(env.dir, "client", s.ca);
    const other = makeLeaf(env.dir, "intruder", makeCa(env.dir, "other-ca"));
    const expired = makeLeaf(env.dir, "expired", s.ca, { days: -1 });
    const node = await startSecured(env, s, good);
    const client = url(s.config, "client");
    const q = { sql: "SELECT 1" };
    expect((await call(client, "/v1/query", { ca: s.ca.cert, client: good, token: s.tokens.read, body: q })).status).toBe(200);
    expect(await refused(call(client, "/v1/query", { ca: s.ca.cert, token: s.tokens.read, body: q }))).toBe(true);
    expect(await refused(call(client, "/v1/query", { ca: s.ca.cert, client: other, token: s.tokens.read, body: q }))).toBe(true);
    expect(await refused(call(client, "/v1/query", { ca: s.ca.cert, client: expired, token: s.tokens.read, body: q }))).toBe(true);
    // svc admin with the node's config presents the node's own certificate.
    expect((await runBinary(["admin", "stats", "--config", node.configPath])).exitCode).toBe(0);
  }, 120_000);

  procTest("an expired server certificate is refused by svc admin", async (env) => {
    const s = await securedConfig(env);
    const expired = makeLeaf(env.dir, "node1-expired", s.ca, { days: -1 });
    const config = { ...s.config, tls: { certFile: expired.cert, keyFile: expired.key, clientCaFile: "", caFile: s.ca.cert, peerCaFile: "" } };
    const node = env.node(config);
    node.spawn();
    await waitFor("the node to listen", () => node.log().includes("serving") || !node.running);
    const r = await runBinary(["admin", "stats", "--config", node.configPath]);
    expect(r.exitCode).not.toBe(0);
    expect(r.stderr).toContain("cannot reach the node");
    expect(node.log()).toContain("expired");
  }, 120_000);
});

describe("the tokens file", () => {
  for (const mode of [0o644, 0o640]) {
    procTest(`a tokens file of mode 0${mode.toString(8)} stops the node at start, saying why and what to do`, async (env) => {
      const s = await securedConfig(env);
      const node = env.node(s.config);
      node.spawn();
      // Made unsafe after the config was written: the node itself must refuse it.
      fs.chmodSync(s.tokensFile, mode);
      expect(await node.waitExit()).not.toBe(0);
      expect(node.log()).toContain(`has mode 0${mode.toString(8)}`);
      expect(node.log()).toContain("chmod 600");
    }, 60_000);
  }
});

/**
 * A cluster of `count` nodes with TLS on every port (the peer port's mutual TLS included):
 * each node its own certificate naming it (URI svc://nodeN) and 127.0.0.1; one tokens file;
 * gossip encrypted with one shared key.
 * `certificateOf` may hand a node another certificate (one from another CA, say).
 */
async function securedCluster(env: ProcEnv, count: number, extraEnv: Record<string, string> = {}, certificateOf?: (nodeId: string, ca: CertFiles) => (CertFiles & { peerCa?: string }) | undefined) {
  const ca = makeCa(env.dir, "ca");
  const tokensFile = join(env.dir, "tokens");
  const tokens = {
    read: createToken(tokensFile, "read", "reader"),
    write: createToken(tokensFile, "write", "writer"),
    admin: createToken(tokensFile, "admin", "operator"),
  };
  const adminTokenFile = join(env.dir, "admin-token");
  fs.writeFileSync(adminTokenFile, `${tokens.admin}\n`, { mode: 0o600 });
  const gossipKey = randomBytes(32).toString("base64");
  const gossipKeyFile = join(env.dir, "gossip.key");
  fs.writeFileSync(gossipKeyFile, `${gossipKey}\n`, { mode: 0o600 });
  const certs = new Map<string, CertFiles>();
  const odd = new Set<string>();
  const overrides = { auth: { tokensFile, tokenFile: adminTokenFile, metricsOpen: false }, gossip: { keyFile: gossipKeyFile } };
  const nodes = (await clusterConfigs(env.dir, count, overrides)).map((config) => {
    const given = certificateOf?.(config.nodeId, ca);
    if (given !== undefined) odd.add(config.nodeId);
    const cert = given ?? makeLeaf(env.dir, config.nodeId, ca);
    certs.set(config.nodeId, cert);
    return env.node({ ...config, tls: { certFile: cert.cert, keyFile: cert.key, clientCaFile: "", caFile: ca.cert, peerCaFile: given?.peerCa ?? ca.cert } }, { env: extraEnv });
  });
  for (const n of nodes) n.spawn();
  const leader = await waitFor("a leader every node with a good certificate names", async () => {
    const answers = await Promise.all(nodes.filter((n) => !odd.has(n.nodeId)).map((n) => call(url(n.config, "client"), "/health", { ca: ca.cert, token: tokens.read }).catch(() => null)));
    const leaders = new Set(answers.map((a) => a?.body["leader"] ?? null));
    const [id] = [...leaders];
    return leaders.size === 1 && typeof id === "string" && answers.every((a) => a?.status === 200) ? id : undefined;
  }, { deadlineMs: 60_000 });
  return { ca, certs, tokens, tokensFile, adminTokenFile, gossipKey, nodes, leader };
}

describe("a three-node cluster with TLS on every port (mutual TLS between peers) and tokens", () => {
  procTest("the members elect a leader and replicate over mutual TLS; a node with a certificate from another CA is refused at the handshake", async (env) => {
    // node3's certificate comes from another CA, which its own peer_ca_file trusts beside the
    // cluster's (a node whose certificate its own peer_ca_file does not vouch for refuses to start).
    const c = await securedCluster(env, 3, {}, (id, ca) => {
      if (id !== "node3") return undefined;
      const otherCa = makeCa(env.dir, "other-ca");
      const peerCa = join(env.dir, "node3-peer-ca.crt");
      fs.writeFileSync(peerCa, fs.readFileSync(ca.cert, "utf8") + fs.readFileSync(otherCa.cert, "utf8"));
      return { ...makeLeaf(env.dir, "node3", otherCa), peerCa };
    });
    const [node1, node2, node3] = c.nodes as [ReturnType<ProcEnv["node"]>, ReturnType<ProcEnv["node"]>, ReturnType<ProcEnv["node"]>];
    const leaderNode = c.leader === "node1" ? node1 : node2;
    const other = c.leader === "node1" ? node2 : node1;
    const written = await call(url(leaderNode.config, "client"), "/v1/execute", { ca: c.ca.cert, token: c.tokens.write, body: { statements: ["CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT)", "INSERT INTO kv VALUES ('a', 'b')"] } });
    expect(written.status).toBe(200);
    const index = written.body["index"] as number;
    await waitFor("the other good member to apply the write", async () =>
      ((await call(url(other.config, "client"), "/health", { ca: c.ca.cert, token: c.tokens.read })).body["applied_index"] as number) >= index);
    // node3 trusts the cluster CA, but its own certificate comes from another: the members refuse it.
    await waitFor("a member to log node3's refusal at the TLS handshake", () => node1.log().includes("at the TLS handshake") || node2.log().includes("at the TLS handshake"));
    const h3 = await call(url(node3.config, "client"), "/health", { ca: c.ca.cert, token: c.tokens.read }).catch(() => null);
    expect(h3?.body["applied_index"] ?? 0).toBeLessThan(index);
  }, 180_000);

  procTest("a follower relays a write with the caller's token to the leader over TLS; a token too weak is refused at the follower", async (env) => {
    const c = await securedCluster(env, 3);
    const follower = c.nodes.find((n) => n.nodeId !== c.leader);
    if (follower === undefined) throw new Error("no follower");
    const base = url(follower.config, "client");
    const create = { statements: ["CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT)"] };
    expect((await call(base, "/v1/execute", { ca: c.ca.cert, token: c.tokens.read, body: create })).status).toBe(403);
    const written = await call(base, "/v1/execute", { ca: c.ca.cert, token: c.tokens.write, body: create });
    expect(written.status).toBe(200);
    expect(written.body["index"]).toBeGreaterThan(0);
    // An admin action from a follower is relayed too.
    const paused = await runBinary(["admin", "pause-writes", "--config", follower.configPath]);
    expect(paused.exitCode).toBe(0);
    expect((await runBinary(["admin", "resume-writes", "--config", follower.configPath])).exitCode).toBe(0);
  }, 180_000);

  procTest("planted secrets (tokens, the key, the tokens file, the gossip key) appear in no log at any level, no /metrics, no cluster-info and no support bundle", async (env) => {
    const c = await securedCluster(env, 3, { RUST_LOG: "trace" });
    // Gossip under the shared key converges: every member alive, nothing failed to decrypt.
    const node1 = c.nodes[0];
    if (node1 === undefined) throw new Error("no node");
    await waitFor("every member alive in gossip at node1", async () => {
      const text = (await call(url(node1.config, "admin"), "/metrics", { ca: c.ca.cert, token: c.tokens.read })).body["text"];
      return typeof text === "string" && text.includes('tensor_chain_gossip_members{state="alive"} 3') && text.includes('tensor_chain_gossip_packets_dropped_total{reason="decrypt_failed"} 0');
    }, { deadlineMs: 30_000 });
    const key = [...c.certs.values()].map((f) => fs.readFileSync(f.key, "utf8")).join("\n");
    const keyBody = key.split("\n").filter((l) => l !== "" && !l.startsWith("-----"));
    const hashes = fs.readFileSync(c.tokensFile, "utf8").split("\n").filter((l) => l.startsWith("sha256:")).map((l) => l.split(" ")[0] ?? "");
    const planted = [...Object.values(c.tokens), ...keyBody, ...hashes.map((h) => h.slice("sha256:".length)), c.gossipKey];
    // Traffic that carries the tokens: reads, writes through a follower, refusals, admin calls.
    for (const n of c.nodes) {
      await call(url(n.config, "client"), "/v1/execute", { ca: c.ca.cert, token: c.tokens.write, body: { statements: ["CREATE TABLE IF NOT EXISTS t (x)"] } });
      await call(url(n.config, "client"), "/v1/query", { ca: c.ca.cert, token: c.tokens.read, body: { sql: "SELECT 1" } });
      await call(url(n.config, "client"), "/v1/execute", { ca: c.ca.cert, token: c.tokens.read, body: { statements: ["INSERT INTO t VALUES (1)"] } });
      await call(url(n.config, "admin"), "/admin/stats", { ca: c.ca.cert, token: "svc_wrong" });
    }
    const outputs: Record<string, string> = {};
    const first = c.nodes[0];
    if (first === undefined) throw new Error("no node");
    outputs["metrics"] = JSON.stringify(await call(url(first.config, "admin"), "/metrics", { ca: c.ca.cert, token: c.tokens.read }));
    const info = await runBinary(["admin", "cluster-info", "--config", first.configPath]);
    expect(info.exitCode).toBe(0);
    outputs["cluster-info (metadata.json)"] = info.stdout + info.stderr;
    const status = await runBinary(["admin", "cluster-status", "--config", first.configPath]);
    outputs["cluster-status"] = status.stdout + status.stderr;
    // From every node, over TLS, cluster-status reaches the leader for what only it knows (its WAL archiving).
    // (Asked again while gossip briefly suspects the leader, as it may on a loaded machine.)
    for (const n of c.nodes) {
      await waitFor(`cluster-status from ${n.nodeId} to reach the leader ${c.leader}`, async () =>
        (await runBinary(["admin", "cluster-status", "--config", n.configPath])).stdout.includes(`wal archive (${c.leader}):`), { deadlineMs: 30_000, intervalMs: 500 });
    }
    const bundlePath = join(env.dir, "bundle.tar.gz");
    const bundle = await runBinary(["admin", "support-bundle", "--config", first.configPath, "--log-file", first.logPath, "--out", bundlePath]);
    expect(bundle.exitCode).toBe(0);
    const unpacked = join(env.dir, "bundle");
    fs.mkdirSync(unpacked);
    expect(Bun.spawnSync(["tar", "-xzf", bundlePath, "-C", unpacked]).exitCode).toBe(0);
    const walk = (dir: string): void => {
      for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
        const p = join(dir, e.name);
        if (e.isDirectory()) walk(p);
        else outputs[`bundle ${e.name}`] = fs.readFileSync(p, "utf8");
      }
    };
    walk(unpacked);
    expect(Object.keys(outputs).some((k) => k.endsWith("metrics.txt"))).toBe(true);
    expect(outputs["bundle stats.json"] ?? "").toContain("total_entries");
    for (const n of c.nodes) outputs[`log of ${n.nodeId}`] = n.log();
    expect(outputs["log of node1"] ?? "").toContain("TRACE");
    for (const [where, text] of Object.entries(outputs)) {
      for (const secret of planted) if (text.includes(secret)) throw new Error(`a planted secret (${secret.slice(0, 8)}…) appears in ${where}`);
    }
  }, 180_000);
});

describe("[limits] per-client caps", () => {
  procTest("client_requests_per_second from the config refuses a burst with 429 and Retry-After on both ports", async (env) => {
    const config = await singleNodeConfig(env.dir, { limits: { clientRequestsPerSecond: 3 } });
    const node = await env.startNode({ config });
    for (const base of [node.clientUrl, node.adminUrl]) {
      const statuses: number[] = [];
      let retryAfter: string | null = null;
      for (let i = 0; i < 10; i++) {
        const r = await fetch(`${base}/health`, { headers: { connection: "close" } });
        statuses.push(r.status);
        if (r.status === 429) retryAfter = r.headers.get("retry-after");
      }
      expect(statuses).toContain(429);
      expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
    }
  }, 60_000);
});
