// The table of query parameters each route takes (src/http/query-params.ts) stays the one
// truth: every route of both apps has a row and no row names a route the apps lack, and no file
// under src/http or src/node reads a query but through routeQuery, whose names the compiler
// holds to the route's row. A name is compared as URLSearchParams decodes it.

import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { adminApp } from "../../src/http/admin-app.ts";
import type { Port } from "../../src/http/access.ts";
import { clientApp } from "../../src/http/client-app.ts";
import { queryParametersOf, repeatedQueryParameter, routeQuery, routeQueryParameters, unknownQueryParameter } from "../../src/http/query-params.ts";
import type { SvcNode } from "../../src/node/index.ts";
import { AssertionError } from "../../src/util/assert.ts";

const srcRoot = resolve(import.meta.dir, "../../src");

// The apps read only these at construction; their routes are what is enumerated.
const stubNode = { config: { nodeId: "n1", raft: { electionTimeoutMs: 1000 } } } as unknown as SvcNode;
const apps: Record<Port, { routes: { method: string; path: string }[] }> = { client: clientApp(stubNode), admin: adminApp(stubNode) };

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).sort().flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return name.endsWith(".ts") ? [path] : [];
  });
}

describe("query parameter table", () => {
  for (const port of ["client", "admin"] as const) {
    test(`every route of the ${port} app has a row, and the table lists no route the app lacks`, () => {
      const routes = apps[port].routes.map((r) => `${r.method} ${r.path}`).sort();
      const listed = Object.keys(routeQueryParameters[port]).sort();
      expect(routes.filter((r) => !listed.includes(r))).toEqual([]);
      expect(listed.filter((r) => !routes.includes(r))).toEqual([]);
    });
  }

  test("the routes that take parameters take the ones the README documents", () => {
    const taking = Object.entries(routeQueryParameters).flatMap(([port, rows]) =>
      Object.entries(rows).filter(([, names]) => names.length > 0).map(([route, names]) => `${port} ${route}: ${names.join(", ")}`));
    expect(taking).toEqual(["admin POST /admin/snapshot: wait, local", "admin POST /admin/pause-writes: lease_ms"]);
  });

  test("no file under src/http or src/node reads a request's query but through routeQuery", () => {
    // What reads parameters: URLSearchParams (url.searchParams included) and Elysia's `query`
    // from a handler's context. Passing url.search on, as a relay does, reads none.
    const reads = /\bsearchParams\b|\bURLSearchParams\b|[{,]\s*query\s*[,}:]/g;
    const found: string[] = [];
    for (const dir of ["http", "node"]) {
      for (const path of sourceFiles(join(srcRoot, dir))) {
        const at = relative(srcRoot, path);
        if (at === join("http", "query-params.ts")) continue;
        const lines = readFileSync(path, "utf8").split("\n");
        lines.forEach((line, i) => {
          if (!/^\s*(\/\/|\*|\/\*)/.test(line) && line.match(reads) !== null) found.push(`${at}:${i + 1}: ${line.trim()}`);
        });
      }
    }
    expect(found).toEqual([]);
  });

  test("routeQuery reads a request only by the row of the route that serves it", () => {
    const post = (path: string): Request => new Request(`http://h${path}`, { method: "POST" });
    expect(routeQuery(post("/admin/snapshot?wait=true"), "admin", "POST /admin/snapshot").get("wait")).toBe("true");
    expect(routeQuery(post("/admin/snapshot/?local"), "admin", "POST /admin/snapshot").get("local")).toBe("");
    // The pause-writes handler asking for the snapshot's row could read ?wait, which its own row does not list.
    expect(() => routeQuery(post("/admin/pause-writes?wait=true"), "admin", "POST /admin/snapshot")).toThrow(AssertionError);
    expect(() => routeQuery(new Request("http://h/admin/snapshot"), "admin", "POST /admin/snapshot")).toThrow(AssertionError);
  });

  test("HEAD is looked up as GET; a route no app serves takes nothing", () => {
    expect(queryParametersOf("admin", "HEAD", "/metrics")).toEqual([]);
    expect(queryParametersOf("admin", "POST", "/admin/snapshot")).toEqual(["wait", "local"]);
    expect(queryParametersOf("client", "POST", "/v1/nothing")).toEqual([]);
  });
});

describe("reading a query", () => {
  test("an unknown name is the first one the route does not take, as URLSearchParams decodes it", () => {
    const taken = ["wait", "local"];
    expect(unknownQueryParameter("http://h/admin/snapshot", taken)).toBeNull();
    expect(unknownQueryParameter("http://h/admin/snapshot?", taken)).toBeNull();
    expect(unknownQueryParameter("http://h/admin/snapshot?wait=true&local", taken)).toBeNull();
    expect(unknownQueryParameter("http://h/admin/snapshot?w%61it=true", taken)).toBeNull();
    expect(unknownQueryParameter("http://h/admin/snapshot?wait=1#wiat", taken)).toBeNull();
    expect(unknownQueryParameter("http://h/admin/snapshot?wait=1&wiat=1&x", taken)).toBe("wiat");
    expect(unknownQueryParameter("http://h/admin/snapshot?WAIT=true", taken)).toBe("WAIT");
    expect(unknownQueryParameter("http://h/admin/snapshot?=true", taken)).toBe("");
    expect(unknownQueryParameter("http://h/health?x", [])).toBe("x");
  });

  test("a repeated name is found however it is written", () => {
    expect(repeatedQueryParameter("http://h/admin/snapshot?wait=true")).toBeNull();
    expect(repeatedQueryParameter("http://h/admin/snapshot?wait=true&local=true")).toBeNull();
    expect(repeatedQueryParameter("http://h/admin/snapshot?wait=true&w%61it=false")).toBe("wait");
  });
});
