// Which query parameters each route of both ports takes, and the check that refuses any other,
// and any given twice, with 400 naming it before the route runs. URLSearchParams.get answers the
// first of two and knows nothing of a name it is not asked for: `?lease_ms=1000&lease_ms=60000`
// paused writes for a second, and `POST /admin/snapshot?wiat=true` answered 202 as if no wait
// was asked. A route reads its query only through routeQuery, by the names its row lists (another
// does not compile); test/unit/query-params.test.ts holds the table to the apps' routes. A
// follower relays the query as it came, checked already, and the leader checks it again.

import { Elysia } from "elysia";
import { assert } from "../util/assert.ts";
import { SvcError } from "../util/errors.ts";
import type { Port } from "./access.ts";
import { errorResponse } from "./errors.ts";

/** The query parameters each route takes, by "METHOD /path" as the apps register it; [] for none. */
export const routeQueryParameters = {
  client: {
    "GET /health": [],
    "POST /v1/execute": [],
    "POST /v1/query": [],
  },
  admin: {
    "GET /health": [],
    "GET /metrics": [],
    "POST /admin/snapshot": ["wait", "local"],
    "GET /admin/stats": [],
    "POST /admin/query": [],
    "GET /admin/verify-checksums": [],
    "POST /admin/pause-writes": ["lease_ms"],
    "POST /admin/resume-writes": [],
    "POST /admin/add-node": [],
    "POST /admin/set-member": [],
    "POST /admin/remove-node": [],
    "POST /admin/promote": [],
    "POST /admin/transfer-leader": [],
    "GET /admin/gossip": [],
    "GET /admin/cluster-info": [],
  },
} as const satisfies Readonly<Record<Port, Readonly<Record<string, readonly string[]>>>>;

type Table = typeof routeQueryParameters;
export type RouteOf<P extends Port> = keyof Table[P] & string;
type NameOf<P extends Port, R extends RouteOf<P>> = Table[P][R] extends readonly (infer N)[] ? N & string : never;

/** A route's query, read by the names its row of the table lists. */
export interface RouteQuery<N extends string> {
  get(name: N): string | null;
}

/**
 * The query of `request`, which `route` of `port` serves: asked for another route's row, a
 * handler could read a name its own route does not list, and the check would have refused it.
 */
export function routeQuery<P extends Port, R extends RouteOf<P>>(request: Request, _port: P, route: R): RouteQuery<NameOf<P, R>> {
  const url = new URL(request.url);
  const path = url.pathname.length > 1 && url.pathname.endsWith("/") ? url.pathname.slice(0, -1) : url.pathname;
  assert(`${request.method === "HEAD" ? "GET" : request.method} ${path}` === route, () => `routeQuery for ${route} asked by ${request.method} ${url.pathname}`);
  return url.searchParams;
}

/**
 * The parameters `method path` of `port` takes. HEAD is served as GET. A route the table does
 * not list takes none (its test fails then): a new parameter is refused until it is listed.
 */
export function queryParametersOf(port: Port, method: string, path: string): readonly string[] {
  const rows: Readonly<Record<string, readonly string[]>> = routeQueryParameters[port];
  return rows[`${method === "HEAD" ? "GET" : method} ${path}`] ?? [];
}

/** The query of `url` (without its "?"), or null when it has none. */
function queryOf(url: string): string | null {
  const start = url.indexOf("?");
  if (start === -1) return null;
  const hash = url.indexOf("#", start);
  return url.slice(start + 1, hash === -1 ? undefined : hash);
}

/** The first name given twice in `url`'s query (as URLSearchParams decodes names), or null. */
export function repeatedQueryParameter(url: string): string | null {
  const query = queryOf(url);
  // One parameter cannot repeat: the common request (none, or one) costs two searches.
  if (query === null || !query.includes("&")) return null;
  const seen = new Set<string>();
  for (const name of new URLSearchParams(query).keys()) {
    if (seen.has(name)) return name;
    seen.add(name);
  }
  return null;
}

/** The first name in `url`'s query that is not one of `taken`, or null. */
export function unknownQueryParameter(url: string, taken: readonly string[]): string | null {
  const query = queryOf(url);
  if (query === null) return null;
  for (const name of new URLSearchParams(query).keys()) if (!taken.includes(name)) return name;
  return null;
}

/**
 * Refuses a query parameter given twice, on any path, before routing; and, once the route is
 * known (so that a path no route serves is 404 and a wrong method 405, as without a query), a
 * parameter the route does not take.
 */
export function queryParameters(port: Port) {
  return new Elysia({ name: `svc-query-parameters-${port}` })
    .onRequest(({ request }) => {
      const name = repeatedQueryParameter(request.url);
      if (name === null) return;
      return errorResponse(new SvcError("BAD_REQUEST", `the query parameter ${JSON.stringify(name)} is given twice; svc reads each parameter once`, {
        hint: `nothing was done; give ${JSON.stringify(name)} once, with the one value meant`,
        details: { parameter: name },
      }));
    })
    .onBeforeHandle({ as: "global" }, ({ request, route }) => {
      // Most requests have no query: one search, nothing parsed.
      if (!request.url.includes("?")) return;
      const taken = queryParametersOf(port, request.method, route);
      const name = unknownQueryParameter(request.url, taken);
      if (name === null) return;
      const what = `${request.method === "HEAD" ? "GET" : request.method} ${route}`;
      return errorResponse(new SvcError("BAD_REQUEST", `${what} takes no query parameter ${JSON.stringify(name)}: ${taken.length === 0 ? "it takes none" : `it takes ${taken.join(", ")}`}`, {
        hint: taken.length === 0
          ? `nothing was done; send ${what} without a query (see the API in the README)`
          : `nothing was done; check the spelling, or leave ${JSON.stringify(name)} out (see the API in the README)`,
        details: { parameter: name, parameters: taken },
      }));
    });
}
