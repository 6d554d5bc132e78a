// Every error code svc gives has an HTTP status, and only a bug answers 500. The compiler
// proves the status map total over each module's code union (http/errors.ts); this test
// proves the unions cover what the code actually throws, by scanning src/ for codes, and
// that every error body, ours or Elysia's, is {"error": {"code", "message", ...}}.

import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { Elysia, t } from "elysia";
import { adminApp, clientApp } from "../../src/http/index.ts";
import { errorBody, errorResponse, isKnownErrorCode, statusByCode, statusFor } from "../../src/http/errors.ts";
import { fallbackRoutes } from "../../src/http/fallback.ts";
import { parseAddress } from "../../src/config/index.ts";
import type { SvcNode } from "../../src/node/index.ts";
import type { MemberAddress } from "../../src/store/index.ts";
import { SvcError } from "../../src/util/errors.ts";

const srcRoot = resolve(import.meta.dir, "../../src");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).sort().flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return name.endsWith(".ts") ? [path] : [];
  });
}

interface CodeUse {
  readonly code: string;
  /** file:line under src/ */
  readonly at: string;
}

// Where codes are given: the first argument of `SvcError(` (string literals in it, so both
// arms of `cond ? "A" : "B"` count), a `code: "A" | "B"` field in a result or its type, and
// the code an `isSvcError(e, "A")` checks for.
const codeSites = [/\bSvcError\(\s*([^,()]*)/g, /\bcode:\s*((?:"[A-Z][A-Z0-9_]*"\s*\|?\s*)+)/g, /\bisSvcError\(\s*\w+\s*,\s*("[A-Z][A-Z0-9_]*")/g];

function codesGiven(): CodeUse[] {
  const uses: CodeUse[] = [];
  for (const path of sourceFiles(srcRoot)) {
    const text = readFileSync(path, "utf8");
    for (const site of codeSites) {
      for (const m of text.matchAll(site)) {
        const line = text.slice(0, m.index).split("\n").length;
        for (const literal of (m[1] as string).matchAll(/"([A-Z][A-Z0-9_]*)"/g)) {
          uses.push({ code: literal[1] as string, at: `${relative(srcRoot, path)}:${line}` });
        }
      }
    }
  }
  return uses;
}

/** The one code that answers 500: anything thrown that is not an SvcError, i.e. a bug. */
const bugCode = "INTERNAL";

describe("error codes", () => {
  const uses = codesGiven();

  test("the scan finds the codes the modules give", () => {
    // Guards the patterns: a scan that finds nothing would pass every rule below.
    const codes = new Set(uses.map((u) => u.code));
    for (const code of ["WAL_CORRUPT", "NOT_LEADER", "SQL_REFUSED", "BODY_TOO_LARGE", "FRAME_BAD_CRC", "REMOVE_FAILED", "LISTEN_FAILED"]) {
      expect(codes).toContain(code);
    }
  });

  test("every code thrown or returned under src/ has an HTTP status", () => {
    const missing = uses.filter((u) => !isKnownErrorCode(u.code)).map((u) => `${u.at}: ${u.code} (add it to its module's error-code union and to statusByCode in src/http/errors.ts)`);
    expect(missing).toEqual([]);
  });

  test("no known condition answers 500", () => {
    const fiveHundred = Object.entries(statusByCode).filter(([code, status]) => status === 500 && code !== bugCode).map(([code]) => code);
    expect(fiveHundred).toEqual([]);
    expect(statusFor(bugCode)).toBe(500);
  });

  test("every status is a client or server error status", () => {
    for (const [code, status] of Object.entries(statusByCode)) {
      expect({ code, ok: Number.isInteger(status) && status >= 400 && status <= 599 }).toEqual({ code, ok: true });
    }
  });

  test("a code no module declares, or a name on Object's prototype, is not known", () => {
    expect(statusFor("NO_SUCH_CODE")).toBe(500);
    expect(statusFor("toString")).toBe(500);
    expect(isKnownErrorCode("constructor")).toBe(false);
  });
});

describe("error bodies", () => {
  test("an SvcError answers with its status, code, message, hint and details", async () => {
    const r = errorResponse(new SvcError("STORAGE_FAILED", "storage failure: EIO", { hint: "check the disk", details: { statementIndex: 2 } }));
    expect(r.status).toBe(503);
    expect(r.headers.get("retry-after")).toBe("1");
    expect(await r.json()).toEqual({ error: { code: "STORAGE_FAILED", message: "storage failure: EIO", hint: "check the disk", statement_index: 2 } });
  });

  test("anything else answers 500 with code INTERNAL", async () => {
    const r = errorResponse(new TypeError("x is undefined"));
    expect(r.status).toBe(500);
    const body = (await r.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("INTERNAL");
    expect(body.error.message).toContain("x is undefined");
  });

  test("a detail cannot replace the code, the message or the hint", () => {
    const body = errorBody(new SvcError("NOT_LEADER", "not the leader", { details: { code: "X", message: "y", hint: "z", leaderId: "n2" } }));
    expect(body).toEqual({ error: { code: "NOT_LEADER", message: "not the leader", leader: "n2" } });
  });
});

describe("error bodies through the apps", () => {
  // Only these requests' error paths run, and none of them reaches the node: the routes fail
  // on the request before asking it. A stand-in with the one field the apps read at setup.
  const node = { config: { nodeId: "n1" } } as unknown as SvcNode;
  const client = clientApp(node);
  const admin = adminApp(node);

  /** A stand-in listening on the given addresses, with the given members' addresses (none: not in its [cluster] members). */
  function listening(client: string, admin: string, members: Map<string, MemberAddress> = new Map()): SvcNode {
    const address = (raw: string) => {
      const parsed = parseAddress(raw);
      if (!parsed.ok) throw new Error(parsed.message);
      return parsed.address;
    };
    return { config: { nodeId: "n1", listen: { client: address(client), admin: address(admin) } }, memberAddresses: () => members } as unknown as SvcNode;
  }

  async function errorOf(app: { handle: (r: Request) => Promise<Response> }, request: Request): Promise<{ status: number; error: Record<string, unknown> }> {
    const r = await app.handle(request);
    expect(r.headers.get("content-type")).toContain("application/json");
    const body = (await r.json()) as { error: Record<string, unknown> };
    expect(typeof body.error.code).toBe("string");
    expect(typeof body.error.message).toBe("string");
    return { status: r.status, error: body.error };
  }

  test("a path no route serves answers 404 NOT_FOUND on both ports", async () => {
    expect(await errorOf(client, new Request("http://localhost/v2/nothing"))).toMatchObject({ status: 404, error: { code: "NOT_FOUND" } });
    expect(await errorOf(admin, new Request("http://localhost/admin/nothing", { method: "POST" }))).toMatchObject({ status: 404, error: { code: "NOT_FOUND" } });
  });

  test("a route of the other port names that port and its address, so that a request sent to the wrong port says where to send it", async () => {
    const addressed = listening("10.0.0.1:7878", "10.0.0.1:9090");
    const snapshot = await errorOf(clientApp(addressed), new Request("http://localhost/admin/snapshot", { method: "POST" }));
    expect(snapshot).toMatchObject({ status: 404, error: { code: "NOT_FOUND" } });
    expect(snapshot.error.message).toContain("admin port");
    expect(snapshot.error.hint).toContain("10.0.0.1:9090");
    const metrics = await errorOf(clientApp(addressed), new Request("http://localhost/metrics"));
    expect(metrics.error.hint).toContain("10.0.0.1:9090");
    const execute = await errorOf(adminApp(addressed), new Request("http://localhost/v1/execute", { method: "POST", body: "{}" }));
    expect(execute).toMatchObject({ status: 404, error: { code: "NOT_FOUND" } });
    expect(execute.error.message).toContain("client port");
    expect(execute.error.hint).toContain("10.0.0.1:7878");
    // A path neither port serves keeps the general answer.
    expect((await errorOf(clientApp(addressed), new Request("http://localhost/v2/nothing"))).error.hint).toContain("see the API");
  });

  test("the wrong port's hint names this node's address for the other port as the cluster knows it, not the wildcard it listens on", async () => {
    const advertised = new Map([["n1", { id: "n1", peer: "db1.example:7879", client: "db1.example:7878", admin: "db1.example:9090" }]]);
    const node = listening("0.0.0.0:7878", "[::]:9090", advertised);
    const toAdmin = (await errorOf(clientApp(node), new Request("http://localhost/metrics"))).error.hint;
    expect(toAdmin).toContain("db1.example:9090");
    expect(toAdmin).not.toContain("[::]");
    const toClient = (await errorOf(adminApp(node), new Request("http://localhost/v1/query", { method: "POST", body: "{}" }))).error.hint;
    expect(toClient).toContain("db1.example:7878");
    expect(toClient).not.toContain("0.0.0.0");
  });

  test("without an entry for this node, the wrong port's hint names its listen address with a wildcard host as loopback", async () => {
    const node = listening("0.0.0.0:7878", "[::]:9090");
    expect((await errorOf(clientApp(node), new Request("http://localhost/metrics"))).error.hint).toContain("[::1]:9090");
    expect((await errorOf(adminApp(node), new Request("http://localhost/v1/query", { method: "POST", body: "{}" }))).error.hint).toContain("127.0.0.1:7878");
  });

  test("a route asked with the wrong method answers 405 METHOD_NOT_ALLOWED with Allow, on both ports", async () => {
    expect(await errorOf(client, new Request("http://localhost/v1/execute"))).toMatchObject({ status: 405, error: { code: "METHOD_NOT_ALLOWED" } });
    expect((await client.handle(new Request("http://localhost/v1/execute"))).headers.get("allow")).toBe("POST");
    const snapshot = await errorOf(admin, new Request("http://localhost/admin/snapshot"));
    expect(snapshot).toMatchObject({ status: 405, error: { code: "METHOD_NOT_ALLOWED" } });
    expect(snapshot.error.message).toContain("POST");
    expect((await admin.handle(new Request("http://localhost/metrics", { method: "POST" }))).headers.get("allow")).toBe("GET, HEAD");
  });

  test("a route's path with a trailing slash, which its method is served at, answers another method 405 too", async () => {
    const execute = await client.handle(new Request("http://localhost/v1/execute/"));
    expect(execute.status).toBe(405);
    expect(execute.headers.get("allow")).toBe("POST");
    expect((await admin.handle(new Request("http://localhost/admin/stats/", { method: "POST" }))).headers.get("allow")).toBe("GET, HEAD");
  });

  test("a body that is not JSON answers 400 BAD_REQUEST", async () => {
    const request = new Request("http://localhost/v1/execute", { method: "POST", body: "{not json", headers: { "content-type": "application/json" } });
    expect(await errorOf(client, request)).toMatchObject({ status: 400, error: { code: "BAD_REQUEST" } });
    const adminRequest = new Request("http://localhost/admin/query", { method: "POST", body: "", headers: { "content-type": "application/json" } });
    expect(await errorOf(admin, adminRequest)).toMatchObject({ status: 400, error: { code: "BAD_REQUEST" } });
  });

  test("a query parameter given twice answers 400 BAD_REQUEST naming it, on any route of either port, before the node is asked", async () => {
    const post = (url: string, body?: string): Request => new Request(url, body === undefined ? { method: "POST" } : { method: "POST", body });
    const cases: [{ handle: (r: Request) => Promise<Response> }, Request, string][] = [
      [admin, post("http://localhost/admin/pause-writes?lease_ms=1000&lease_ms=60000"), "lease_ms"],
      [admin, post("http://localhost/admin/snapshot?wait=true&local=true&wait=false"), "wait"],
      // Written otherwise, the same name: names are compared as URLSearchParams reads them.
      [admin, post("http://localhost/admin/snapshot?loc%61l=true&local"), "local"],
      [admin, new Request("http://localhost/admin/stats?x=1&level=a&level=b"), "level"],
      [client, post("http://localhost/v1/query?level=linearizable&level=none", '{"sql": "SELECT 1"}'), "level"],
      [client, new Request("http://localhost/health?probe&probe"), "probe"],
    ];
    for (const [app, request, name] of cases) {
      const { status, error } = await errorOf(app, request);
      expect({ url: request.url, status, code: error.code, parameter: error.parameter }).toEqual({ url: request.url, status: 400, code: "BAD_REQUEST", parameter: name });
      expect(error.message).toContain(`"${name}"`);
    }
  });

  test("a query parameter the route does not take answers 400 BAD_REQUEST naming it and the ones the route takes, before the node is asked", async () => {
    const post = (url: string, body?: string): Request => new Request(url, body === undefined ? { method: "POST" } : { method: "POST", body });
    const cases: [{ handle: (r: Request) => Promise<Response> }, Request, string, string][] = [
      // A typo of wait: the snapshot was started and answered 202 as if no wait was asked.
      [admin, post("http://localhost/admin/snapshot?wiat=true"), "wiat", "it takes wait, local"],
      [admin, post("http://localhost/admin/snapshot/?local=true&Wait=true"), "Wait", "it takes wait, local"],
      [admin, post("http://localhost/admin/pause-writes?lease=60s"), "lease", "it takes lease_ms"],
      [admin, post("http://localhost/admin/resume-writes?lease_ms=60000"), "lease_ms", "it takes none"],
      [admin, new Request("http://localhost/admin/stats?verbose"), "verbose", "it takes none"],
      [admin, new Request("http://localhost/metrics?format=json"), "format", "it takes none"],
      [client, post("http://localhost/v1/query?consitency=stale", '{"sql": "SELECT 1"}'), "consitency", "it takes none"],
      [client, post("http://localhost/v1/execute?request_id=a", '{"statements": ["SELECT 1"]}'), "request_id", "it takes none"],
      [client, new Request("http://localhost/health?probe"), "probe", "it takes none"],
    ];
    for (const [app, request, name, takes] of cases) {
      const { status, error } = await errorOf(app, request);
      expect({ url: request.url, status, code: error.code, parameter: error.parameter }).toEqual({ url: request.url, status: 400, code: "BAD_REQUEST", parameter: name });
      expect(error.message).toContain(`"${name}"`);
      expect(error.message).toContain(takes);
      expect(typeof error.hint).toBe("string");
    }
    // HEAD is served as GET, and refused as GET is (an answer to HEAD has no body).
    expect((await admin.handle(new Request("http://localhost/metrics?format=json", { method: "HEAD" }))).status).toBe(400);
  });

  test("every route of either port refuses a query parameter it does not take", async () => {
    // The stand-in node has no methods: a route that ran would answer 500, not 400.
    for (const app of [client, admin]) {
      for (const route of app.routes) {
        const request = new Request(`http://localhost${route.path}?no_such_parameter=1`, { method: route.method, ...(route.method === "POST" ? { body: "{}" } : {}) });
        const { status, error } = await errorOf(app, request);
        expect({ route: `${route.method} ${route.path}`, status, code: error.code, parameter: error.parameter }).toEqual({ route: `${route.method} ${route.path}`, status: 400, code: "BAD_REQUEST", parameter: "no_such_parameter" });
      }
    }
  });

  test("a query parameter on a path no route serves, or with a method the route does not take, answers 404 or 405 as without it", async () => {
    expect(await errorOf(admin, new Request("http://localhost/admin/nothing?wiat=true", { method: "POST" }))).toMatchObject({ status: 404, error: { code: "NOT_FOUND" } });
    expect(await errorOf(admin, new Request("http://localhost/admin/snapshot?wiat=true"))).toMatchObject({ status: 405, error: { code: "METHOD_NOT_ALLOWED" } });
  });

  test("Elysia's own parse and validation errors answer 400 BAD_REQUEST", async () => {
    const app = new Elysia().use(fallbackRoutes()).post("/typed", ({ body }) => body, { body: t.Object({ sql: t.String() }) });
    const unparsable = new Request("http://localhost/typed", { method: "POST", body: "{not json", headers: { "content-type": "application/json" } });
    expect(await errorOf(app, unparsable)).toMatchObject({ status: 400, error: { code: "BAD_REQUEST" } });
    const invalid = new Request("http://localhost/typed", { method: "POST", body: JSON.stringify({ sql: 1 }), headers: { "content-type": "application/json" } });
    expect(await errorOf(app, invalid)).toMatchObject({ status: 400, error: { code: "BAD_REQUEST" } });
  });

  test("an SvcError a route throws keeps its code; anything else is INTERNAL", async () => {
    const app = new Elysia()
      .use(fallbackRoutes())
      .get("/known", () => {
        throw new SvcError("WAL_CORRUPT", "WAL is corrupt");
      })
      .get("/bug", () => {
        throw new RangeError("index out of range");
      });
    expect(await errorOf(app, new Request("http://localhost/known"))).toMatchObject({ status: 503, error: { code: "WAL_CORRUPT" } });
    expect(await errorOf(app, new Request("http://localhost/bug"))).toMatchObject({ status: 500, error: { code: "INTERNAL" } });
  });
});
