// Tokens with roles on the client and admin ports: every route of both apps has a role in
// routeAccess (a new route without one fails here), and every route × every caller (no token,
// an unknown token, read, write, admin) gets 401, 403 or through as the table says, with the
// role needed named in the answer. The tokens file holds hashes only and must be mode 0600.

import { afterAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { adminApp } from "../../src/http/admin-app.ts";
import { accessFor, routeAccess, type Access, type Port } from "../../src/http/access.ts";
import { clientApp } from "../../src/http/client-app.ts";
import { guardApp } from "../../src/http/guard.ts";
import { relayTarget } from "../../src/http/relay-context.ts";
import { createToken, listTokens, revokeTokens, roleGrants, TokenSet, type Role } from "../../src/http/tokens.ts";
import type { SvcNode } from "../../src/node/index.ts";

const dir = mkdtempSync(join(tmpdir(), "svc-access-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// The apps read only these at construction; their routes are what is enumerated.
const stubNode = { config: { nodeId: "n1", raft: { electionTimeoutMs: 1000 } } } as unknown as SvcNode;
const apps: Record<Port, { routes: { method: string; path: string }[] }> = { client: clientApp(stubNode), admin: adminApp(stubNode) };

const tokensFile = join(dir, "tokens");
const tokens: Record<Role, string> = {
  read: createToken(tokensFile, "read", "reader"),
  write: createToken(tokensFile, "write", "writer"),
  admin: createToken(tokensFile, "admin", "operator"),
};
const tokenSet = TokenSet.read(tokensFile);

/** Stands for the real app: says it was reached, and /health answers with detail. */
const inner = {
  fetch: (r: Request) => {
    const path = new URL(r.url).pathname;
    return path === "/health"
      ? Response.json({ status: "ok", node_id: "n1", leader: "n1", commit_index: 7 })
      : Response.json({ reached: path, authorization: relayTarget(r).headers["authorization"] ?? null });
  },
};

function guarded(port: Port, metricsOpen = false) {
  return guardApp(inner, port, { nodeId: "n1", tokens: () => tokenSet, metricsOpen, outboundTls: () => null });
}

function call(port: Port, method: string, path: string, token?: string, metricsOpen = false): Promise<Response> {
  const headers: Record<string, string> = token === undefined ? {} : { authorization: `Bearer ${token}` };
  return Promise.resolve(guarded(port, metricsOpen).fetch(new Request(`http://127.0.0.1${path}`, { method, headers, ...(method === "POST" ? { body: "{}" } : {}) })));
}

describe("route access table", () => {
  for (const port of ["client", "admin"] as const) {
    test(`every route of the ${port} app has a role, and the table lists no route the app lacks`, () => {
      const routes = apps[port].routes.map((r) => `${r.method} ${r.path}`).sort();
      const listed = Object.keys(routeAccess[port]).sort();
      expect(routes.filter((r) => !listed.includes(r))).toEqual([]);
      expect(listed.filter((r) => !routes.includes(r))).toEqual([]);
    });
  }

  test("every /admin/* route needs admin; a route no app has needs admin too", () => {
    for (const [route, access] of Object.entries(routeAccess.admin)) if (route.includes(" /admin/")) expect(access).toBe("admin");
    expect(accessFor("client", "POST", "/v1/nothing")).toBe("admin");
  });
});

describe("every route × every caller", () => {
  const callers: { name: string; token?: string; role: Role | null }[] = [
    { name: "no token", role: null },
    { name: "an unknown token", token: "svc_not-a-token-this-node-knows", role: null },
    { name: "read", token: tokens.read, role: "read" },
    { name: "write", token: tokens.write, role: "write" },
    { name: "admin", token: tokens.admin, role: "admin" },
  ];
  for (const port of ["client", "admin"] as const) {
    for (const route of apps[port].routes) {
      const access: Access = accessFor(port, route.method, route.path);
      for (const caller of callers) {
        test(`${port} ${route.method} ${route.path} (${access}) with ${caller.name}`, async () => {
          const answer = await call(port, route.method, route.path, caller.token);
          const body = (await answer.json()) as Record<string, unknown> & { error?: { code: string; message: string; needed_role?: string } };
          if (access === "health") {
            expect(answer.status).toBe(200);
            // A probe needs no token; the detail does.
            if (caller.role === null) expect(body).toEqual({ status: "ok", hint: expect.any(String) });
            else expect(body["node_id"]).toBe("n1");
            return;
          }
          const needed: Role = access === "metrics" ? "read" : access;
          if (caller.role === null) {
            expect(answer.status).toBe(401);
            expect(answer.headers.get("www-authenticate")).toContain("Bearer");
            expect(body.error?.code).toBe("UNAUTHORIZED");
            expect(body.error?.message).toContain(`role ${needed}`);
            expect(body.error?.needed_role).toBe(needed);
            // The node is named: a refusal relayed from the leader must not read as this node's.
            if (caller.token !== undefined) expect(body.error?.message).toContain("not in n1's tokens file");
          } else if (!roleGrants(caller.role, needed)) {
            expect(answer.status).toBe(403);
            expect(body.error?.code).toBe("FORBIDDEN");
            expect(body.error?.message).toContain(`needs role ${needed}`);
            expect(body.error?.message).toContain(`on n1`);
            expect(body.error?.needed_role).toBe(needed);
          } else {
            expect(answer.status).toBe(200);
            expect(body["reached"]).toBe(route.path);
          }
        });
      }
    }
  }
});

describe("tokens", () => {
  test("/metrics needs read unless metrics_open", async () => {
    expect((await call("admin", "GET", "/metrics")).status).toBe(401);
    expect((await call("admin", "GET", "/metrics", undefined, true)).status).toBe(200);
  });

  test("HEAD of a GET route needs what GET needs: a probe's HEAD /health needs no token", async () => {
    for (const port of ["client", "admin"] as const) expect((await call(port, "HEAD", "/health")).status).toBe(200);
    expect((await call("admin", "HEAD", "/metrics", undefined, true)).status).toBe(200);
    expect((await call("admin", "HEAD", "/metrics", tokens.read)).status).toBe(200);
    expect((await call("admin", "HEAD", "/admin/stats", tokens.write)).status).toBe(403);
  });

  test("a probe's /health with a query parameter it does not take gets the refusal itself, without a token", async () => {
    for (const [port, app] of [["client", clientApp(stubNode)], ["admin", adminApp(stubNode)]] as const) {
      const answer = await guardApp(app, port, { nodeId: "n1", tokens: () => tokenSet, metricsOpen: false, outboundTls: () => null }).fetch(new Request("http://127.0.0.1/health?probe"));
      expect(answer.status).toBe(400);
      expect(((await answer.json()) as { error: Record<string, unknown> }).error).toMatchObject({ code: "BAD_REQUEST", parameter: "probe" });
    }
  });

  test("a relayed request carries the caller's Authorization header to the leader", async () => {
    const body = (await (await call("client", "POST", "/v1/execute", tokens.write)).json()) as { authorization: string };
    expect(body.authorization).toBe(`Bearer ${tokens.write}`);
  });

  test("a token that is not a Bearer token is not accepted", async () => {
    const answer = await guarded("client").fetch(new Request("http://127.0.0.1/v1/query", { method: "POST", headers: { authorization: tokens.admin }, body: "{}" }));
    expect(answer.status).toBe(401);
  });

  test("the tokens file holds hashes and roles, never a token, and is created 0600", () => {
    const text = readFileSync(tokensFile, "utf8");
    for (const token of Object.values(tokens)) expect(text).not.toContain(token);
    expect(text).toMatch(/^sha256:[0-9a-f]{64} admin operator$/m);
    expect(statSync(tokensFile).mode & 0o777).toBe(0o600);
  });

  test("a tokens file readable by group or others is refused, naming the mode and the fix", () => {
    const path = join(dir, "tokens-open");
    writeFileSync(path, readFileSync(tokensFile));
    for (const mode of [0o644, 0o640, 0o604, 0o660]) {
      chmodSync(path, mode);
      expect(() => TokenSet.read(path)).toThrow(`has mode 0${mode.toString(8)}`);
      expect(() => TokenSet.read(path)).toThrow("chmod 600");
      expect(() => createToken(path, "read", "x")).toThrow("chmod 600");
    }
    chmodSync(path, 0o400);
    expect(TokenSet.read(path).size).toBe(3);
  });

  test("token list shows name, role and the start of each hash; revoke removes by name or hash prefix, keeps every other line and the mode", () => {
    const path = join(dir, "tokens-revoke");
    const a = createToken(path, "admin", "ops");
    const b = createToken(path, "read", "dash");
    const c = createToken(path, "read", "dash");
    const d = createToken(path, "write", "ingest");
    writeFileSync(path, `${readFileSync(path, "utf8")}# kept: a note of the operator's\n`);
    const listed = listTokens(path);
    expect(listed.map((t) => [t.name, t.role])).toEqual([["ops", "admin"], ["dash", "read"], ["dash", "read"], ["ingest", "write"]]);
    for (const t of listed) expect(t.hashPrefix).toMatch(/^[0-9a-f]{12}$/);
    expect(JSON.stringify(listed)).not.toContain(a.slice(4));

    // By name: every token of that name.
    expect(revokeTokens(path, { name: "dash" }).map((t) => t.name)).toEqual(["dash", "dash"]);
    const after = TokenSet.read(path);
    expect([after.roleOf(a), after.roleOf(b), after.roleOf(c), after.roleOf(d)]).toEqual(["admin", null, null, "write"]);
    expect(readFileSync(path, "utf8")).toContain("# kept: a note of the operator's");
    expect(statSync(path).mode & 0o777).toBe(0o600);

    // By hash prefix, with or without "sha256:", in any case.
    const ingest = listTokens(path).find((t) => t.name === "ingest")!;
    expect(revokeTokens(path, { hash: `SHA256:${ingest.hashPrefix.slice(0, 8).toUpperCase()}` }).map((t) => t.name)).toEqual(["ingest"]);
    expect(TokenSet.read(path).roleOf(d)).toBeNull();
    expect(TokenSet.read(path).roleOf(a)).toBe("admin");
  });

  test("revoke refuses, changing nothing: no such name, a short or non-hex hash, a prefix several hashes share", () => {
    const path = join(dir, "tokens-revoke-refused");
    for (let i = 0; i < 40; i++) createToken(path, "read", `t${i}`);
    const before = readFileSync(path, "utf8");
    expect(() => revokeTokens(path, { name: "nobody" })).toThrow('no token named "nobody"');
    expect(() => revokeTokens(path, { hash: "abc" })).toThrow("8 to 64 hex digits");
    expect(() => revokeTokens(path, { hash: "zzzzzzzzzz" })).toThrow("8 to 64 hex digits");
    expect(() => revokeTokens(path, { hash: "00000000" })).toThrow("no token with that hash");
    // A token pasted in place of its hash is not repeated in the message.
    const pasted = createToken(join(dir, "tokens-other"), "read", "x");
    let message = "";
    try {
      revokeTokens(path, { hash: pasted });
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toContain("8 to 64 hex digits");
    expect(message).not.toContain(pasted);
    // Two hashes sharing a prefix: forged lines (the hashes of real tokens share 8 digits too rarely to test).
    const shared = "ab12cd34";
    writeFileSync(path, `${before}sha256:${shared}${"0".repeat(56)} read x\nsha256:${shared}${"1".repeat(56)} read y\n`);
    const withShared = readFileSync(path, "utf8");
    expect(() => revokeTokens(path, { hash: shared })).toThrow("2 tokens");
    expect(readFileSync(path, "utf8")).toBe(withShared);
    expect(revokeTokens(path, { hash: `${shared}1` }).map((t) => t.name)).toEqual(["y"]);
    expect(readFileSync(path, "utf8")).toBe(withShared.replace(`sha256:${shared}${"1".repeat(56)} read y\n`, ""));
  });

  test("revoke takes a name as create stored it, removes a hash written twice whole, and keeps a stricter mode", () => {
    const path = join(dir, "tokens-revoke-more");
    const spaced = createToken(path, "read", "my reader");
    const kept = createToken(path, "admin", "ops");
    expect(listTokens(path).map((t) => t.name)).toEqual(["my-reader", "ops"]);
    expect(revokeTokens(path, { name: "my reader" }).map((t) => t.name)).toEqual(["my-reader"]);
    expect(TokenSet.read(path).roleOf(spaced)).toBeNull();
    // The same hash on two lines (files merged by hand): one token, both lines go.
    const line = readFileSync(path, "utf8").split("\n").find((l) => l.startsWith("sha256:"))!;
    writeFileSync(path, `${readFileSync(path, "utf8")}${line.replace(" ops", " ops-again")}\n`);
    chmodSync(path, 0o400);
    const full = line.slice("sha256:".length, "sha256:".length + 64);
    expect(revokeTokens(path, { hash: full }).map((t) => t.name)).toEqual(["ops", "ops-again"]);
    expect(TokenSet.read(path).roleOf(kept)).toBeNull();
    expect(statSync(path).mode & 0o777).toBe(0o400);
  });

  test("a damaged line is refused with its line number and without quoting it", () => {
    const path = join(dir, "tokens-bad");
    writeFileSync(path, `# comment\nsvc_secretvalue admin\n`, { mode: 0o600 });
    let message = "";
    try {
      TokenSet.read(path);
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toContain(`${path}:2`);
    expect(message).not.toContain("svc_secretvalue");
  });

  test("a line is the SHA-256 of the token as UTF-8: files written before keep working", () => {
    const path = join(dir, "tokens-by-hand");
    const token = "svc_é-made-by-hand";
    writeFileSync(path, `sha256:${createHash("sha256").update(token, "utf8").digest("hex")} write by-hand\n`, { mode: 0o600 });
    expect(TokenSet.read(path).roleOf(token)).toBe("write");
    expect(TokenSet.read(path).roleOf(`${token}x`)).toBeNull();
  });

  test("a token removed from the file is refused once the file is read again", async () => {
    const path = join(dir, "tokens-reloaded");
    writeFileSync(path, readFileSync(tokensFile), { mode: 0o600 });
    let current = TokenSet.read(path);
    const app = guardApp(inner, "client", { nodeId: "n1", tokens: () => current, metricsOpen: false, outboundTls: () => null });
    const query = () => Promise.resolve(app.fetch(new Request("http://127.0.0.1/v1/query", { method: "POST", headers: { authorization: `Bearer ${tokens.read}` }, body: "{}" })));
    expect((await query()).status).toBe(200);
    writeFileSync(path, readFileSync(path, "utf8").split("\n").filter((l) => !l.endsWith(" reader")).join("\n"));
    current = TokenSet.read(path);
    expect((await query()).status).toBe(401);
  });

  test("a missing tokens file says how to make one", () => {
    expect(() => TokenSet.read(join(dir, "absent"))).toThrow("cannot read the tokens file");
  });
});
