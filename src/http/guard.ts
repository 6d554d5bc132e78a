// Tokens on the client and admin ports: every request is checked against the route's access
// (access.ts) before the app sees it. 401 without a valid token, 403 with a token whose role
// is too low, each naming the role needed. /health answers without a token, with only its
// status; the detail (leader, indexes, errors) needs a valid token.

import { SvcError } from "../util/errors.ts";
import { accessFor, type Port } from "./access.ts";
import { errorResponse, json } from "./errors.ts";
import { setRelayContext, type OutboundTls } from "./relay-context.ts";
import { roleGrants, type Role, type TokenSet } from "./tokens.ts";

export interface FetchApp {
  fetch: (request: Request) => Response | Promise<Response>;
}

export interface GuardSettings {
  /**
   * This node's id, named in a refusal: a request a follower relays is checked again by the
   * leader, whose refusal reaches the client as it is, so "this node" would name the wrong one.
   */
  readonly nodeId: string;
  /** The tokens accepted now (replaced on reload); null: no tokens asked for. */
  tokens(): TokenSet | null;
  readonly metricsOpen: boolean;
  /** How this node reaches the leader when it relays a request; null for plain HTTP. */
  outboundTls(): OutboundTls | null;
}

export function guardApp(app: FetchApp, port: Port, settings: GuardSettings): FetchApp {
  return {
    fetch: (request) => {
      const authorization = request.headers.get("authorization");
      // The app relays with this: the caller's token and TLS to the leader.
      const withContext = (): Response | Promise<Response> => {
        setRelayContext(request, { authorization, tls: settings.outboundTls() });
        return app.fetch(request);
      };
      const tokens = settings.tokens();
      if (tokens === null) return withContext();
      const url = new URL(request.url);
      const access = accessFor(port, request.method, url.pathname);
      const role = authorization === null ? null : tokens.roleOf(bearer(authorization));
      if (access === "health") {
        if (role !== null) return withContext();
        return statusOnly(app.fetch(request));
      }
      const needed: Role = access === "metrics" ? "read" : access;
      if (access === "metrics" && settings.metricsOpen) return app.fetch(request);
      if (role === null) return refusal(unauthorized(settings.nodeId, needed, request.method, url.pathname, authorization === null ? "none" : bearer(authorization) === "" ? "not_bearer" : "unknown"));
      if (!roleGrants(role, needed)) return refusal(forbidden(settings.nodeId, needed, role, request.method, url.pathname));
      return withContext();
    },
  };
}

/** The token of "Bearer <token>" (the scheme in any case, RFC 7235); anything else is not a token svc gave out. */
function bearer(header: string): string {
  const m = /^bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
  return m === null ? "" : (m[1] ?? "");
}

async function statusOnly(answer: Response | Promise<Response>): Promise<Response> {
  const response = await answer;
  // The request itself was refused (a query parameter /health does not take): the error says
  // what to fix, and nothing of the node.
  if (response.status === 400) return response;
  let status = "unavailable";
  try {
    const body = (await response.json()) as { status?: unknown };
    if (typeof body.status === "string") status = body.status;
  } catch {
    // Not JSON: the status code alone says enough.
  }
  return json({ status, hint: "send a token (Authorization: Bearer …) for the detail" }, response.status);
}

function unauthorized(nodeId: string, needed: Role, method: string, path: string, sent: "none" | "not_bearer" | "unknown"): SvcError {
  const what = sent === "none" ? ", and none was sent" : sent === "not_bearer" ? "; the Authorization header sent is not \"Bearer <token>\"" : `; the token sent is not in ${nodeId}'s tokens file (auth.tokens_file)`;
  return new SvcError("UNAUTHORIZED", `${method} ${path} needs a token with role ${needed}${what}`, {
    hint: `send "Authorization: Bearer <token>" with a token of role ${needed} or higher (svc admin token create --role ${needed} makes one); ` +
      "every node needs the same tokens file: a follower passes writes and admin requests on to the leader, which checks the token again",
    details: { neededRole: needed, nodeId },
  });
}

function forbidden(nodeId: string, needed: Role, held: Role, method: string, path: string): SvcError {
  return new SvcError("FORBIDDEN", `${method} ${path} needs role ${needed}; this token has role ${held} on ${nodeId}`, {
    hint: `use a token of role ${needed} or higher (every node needs the same tokens file)`,
    details: { neededRole: needed, tokenRole: held, nodeId },
  });
}

function refusal(e: SvcError): Response {
  const response = errorResponse(e);
  if (e.code === "UNAUTHORIZED") response.headers.set("www-authenticate", 'Bearer realm="svc"');
  return response;
}
