// Answers for requests that match no route, for Elysia's own errors (a body it could not
// parse, a schema it refused) and for errors nothing else caught: always the JSON error body
// {"error": {"code", "message", ...}}, never an HTML page, a bare text or a stack trace.

import { Elysia } from "elysia";
import { localDialAddress } from "../config/index.ts";
import type { SvcNode } from "../node/index.ts";
import { SvcError } from "../util/errors.ts";
import { errorResponse, type HttpErrorCode } from "./errors.ts";

/** Statuses an Elysia `status(…)` response may carry, as svc's codes; any other is a bug. */
const codeByStatus: ReadonlyMap<number, HttpErrorCode> = new Map([
  [400, "BAD_REQUEST"],
  [404, "NOT_FOUND"],
  [408, "REQUEST_TIMEOUT"],
  [413, "BODY_TOO_LARGE"],
  [415, "UNSUPPORTED_MEDIA_TYPE"],
]);

/** A route of the app, as Elysia lists them. */
export interface RouteEntry {
  readonly method: string;
  readonly path: string;
}

/** Which port an app serves, and the address of the other one (read when a request needs it). */
export interface PortSide {
  readonly port: "client" | "admin";
  readonly otherAddress: () => string;
}

/**
 * This node's address for `port` as the cluster knows it (its member entry, replicated or in its
 * [cluster] members), else the address it listens on, a wildcard host as loopback (a listener on
 * 0.0.0.0 is reached at no address of that name).
 */
export function ownPortAddress(node: SvcNode, port: PortSide["port"]): string {
  return node.memberAddresses().get(node.config.nodeId)?.[port] ?? localDialAddress(node.config.listen[port]);
}

/** Whether a path is one the other port serves: a request sent to the wrong port. */
function otherPortServes(port: PortSide["port"], path: string): boolean {
  return port === "client" ? path === "/metrics" || path.startsWith("/admin/") : path === "/v1/execute" || path === "/v1/query";
}

/**
 * The fallback for an app whose routes `routes()` lists (read when a request matches none):
 * a path the app serves with other methods is answered 405 with Allow, any other 404 (naming
 * the other port's address when that port serves the path).
 */
export function fallbackRoutes(routes: () => readonly RouteEntry[] = () => [], side?: PortSide) {
  return new Elysia().onError({ as: "global" }, ({ code, request, error }) => {
  switch (code) {
    case "NOT_FOUND": {
      const url = new URL(request.url);
      // A route is served with a trailing slash as well (/v1/execute/), so it is known by that path too.
      const path = url.pathname.length > 1 && url.pathname.endsWith("/") ? url.pathname.slice(0, -1) : url.pathname;
      const allowed = [...new Set(routes().filter((r) => r.path === path).map((r) => r.method.toUpperCase()))];
      if (allowed.length > 0) {
        if (allowed.includes("GET") && !allowed.includes("HEAD")) allowed.push("HEAD");
        const response = errorResponse(new SvcError("METHOD_NOT_ALLOWED", `${url.pathname} does not take ${request.method}: it takes ${allowed.join(", ")}`, {
          hint: `send ${allowed[0]} ${path} (see the API in the README)`,
        }));
        response.headers.set("allow", allowed.join(", "));
        return response;
      }
      if (side !== undefined && otherPortServes(side.port, path)) {
        const other = side.port === "client" ? "admin" : "client";
        return errorResponse(new SvcError("NOT_FOUND", `${path} is served on the ${other} port, not on this ${side.port} port`, {
          hint: `send ${request.method} ${path} to this node's ${other} port, ${side.otherAddress()} (its ${other} address in [cluster] members, else listen.${other})`,
        }));
      }
      return errorResponse(new SvcError("NOT_FOUND", `no route for ${request.method} ${url.pathname}`, {
        hint: "see the API in the README: /health, /v1/execute, /v1/query on the client port; /health, /metrics, /admin/* on the admin port",
      }));
    }
    case "PARSE":
      return errorResponse(new SvcError("BAD_REQUEST", "the request body could not be parsed", { hint: "send a JSON object" }));
    case "VALIDATION": {
      const at = error.valueError === undefined ? "" : ` at "${error.valueError.path || "/"}": ${error.valueError.message}`;
      return errorResponse(new SvcError("BAD_REQUEST", `the request does not have the expected form${at}`, { hint: "see the API in the README" }));
    }
    case "INVALID_COOKIE_SIGNATURE":
      return errorResponse(new SvcError("BAD_REQUEST", "a cookie's signature does not match", { hint: "svc uses no cookies; send the request without them" }));
    case "INVALID_FILE_TYPE":
      return errorResponse(new SvcError("UNSUPPORTED_MEDIA_TYPE", error.message, { hint: "send JSON with content-type: application/json" }));
    default: {
      if (typeof code === "number") {
        const svcCode = codeByStatus.get(code);
        if (svcCode !== undefined) return errorResponse(new SvcError(svcCode, `the request was refused with status ${code}`));
      }
      // A route's own SvcError keeps its code; anything else becomes INTERNAL.
      return errorResponse(error);
    }
  }
});
}
