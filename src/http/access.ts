// Who may call which route: the role each route of the client and admin apps needs. A route
// missing from this table needs admin (closed by default), and test/unit/http-access.test.ts
// fails when an app has a route the table does not list, so a new route gets a role on purpose.

import type { Role } from "./tokens.ts";

/**
 * What a route asks of its caller: a role, "health" (open, with the detail only for a valid
 * token, so a probe needs no secret), or "metrics" (read, unless [auth] metrics_open).
 */
export type Access = Role | "health" | "metrics";

export type Port = "client" | "admin";

export const routeAccess: Readonly<Record<Port, Readonly<Record<string, Access>>>> = {
  client: {
    "GET /health": "health",
    "POST /v1/query": "read",
    "POST /v1/execute": "write",
  },
  admin: {
    "GET /health": "health",
    "GET /metrics": "metrics",
    "POST /admin/snapshot": "admin",
    "GET /admin/stats": "admin",
    "POST /admin/query": "admin",
    "GET /admin/verify-checksums": "admin",
    "POST /admin/pause-writes": "admin",
    "POST /admin/resume-writes": "admin",
    "POST /admin/add-node": "admin",
    "POST /admin/set-member": "admin",
    "POST /admin/remove-node": "admin",
    "POST /admin/promote": "admin",
    "POST /admin/transfer-leader": "admin",
    "GET /admin/gossip": "admin",
    "GET /admin/cluster-info": "admin",
  },
};

/**
 * The access a request needs; an unknown route needs admin (it will be answered 404 then).
 * HEAD is served as GET (a load balancer's HEAD /health), and needs what GET needs.
 */
export function accessFor(port: Port, method: string, path: string): Access {
  return routeAccess[port][`${method === "HEAD" ? "GET" : method} ${path}`] ?? "admin";
}
