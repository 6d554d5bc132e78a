// A follower hands a request it cannot serve itself (a write, or a read at "leader"
// consistency) to the leader and relays the answer, so clients may talk to any node.
// When the forward fails, the client is told whether its write may have happened: NOT_LEADER
// (not applied, retry) only when the request provably never reached the leader; once it may
// have been sent, OUTCOME_UNKNOWN (the write may or may not have been applied).

import { SvcError, errorMessage } from "../util/errors.ts";

export const forwardedHeader = "x-svc-forwarded-by";
const forwardTimeoutMs = 35_000;
const writePath = "/v1/execute";

/**
 * Failures of fetch that happen before any byte of the request leaves this node: the
 * connection was refused, or the leader's name did not resolve. Anything else (a reset, a
 * close, a timeout, a body cut short) may come after the leader read the request.
 */
const neverSentCodes: ReadonlySet<string> = new Set(["ECONNREFUSED", "ConnectionRefused", "ENOTFOUND", "EAI_AGAIN", "EAI_NONAME", "EAI_FAIL"]);

/** The leader's client address when `e` says this node is not the leader and one is known. */
export function leaderToForwardTo(e: unknown, request: Request): string | null {
  if (!(e instanceof SvcError) || e.code !== "NOT_LEADER") return null;
  // Forward once only: a request that was already forwarded goes back with the error.
  if (request.headers.get(forwardedHeader) !== null) return null;
  const address = e.details["leaderClient"];
  return typeof address === "string" ? address : null;
}

export async function forwardToLeader(leaderClient: string, path: string, body: string, nodeId: string): Promise<Response> {
  try {
    const r = await fetch(`http://${leaderClient}${path}`, {
      method: "POST",
      body,
      headers: { "content-type": "application/json", [forwardedHeader]: nodeId },
      signal: AbortSignal.timeout(forwardTimeoutMs),
    });
    return new Response(await r.arrayBuffer(), { status: r.status, headers: { "content-type": "application/json", [forwardedHeader]: nodeId } });
  } catch (e) {
    // A read changes nothing: whether or not the leader saw it, it can be sent again.
    if (path !== writePath || neverSent(e)) {
      throw new SvcError("NOT_LEADER", `this node is not the leader and forwarding to the leader at ${leaderClient} failed: ${errorMessage(e)}`, {
        hint: "retry; if it persists, check connectivity to the leader's client port",
        details: { leaderClient },
      });
    }
    throw new SvcError("OUTCOME_UNKNOWN", `the write was forwarded to the leader at ${leaderClient}, and the connection failed before its answer (${errorMessage(e)}): it may or may not have been applied`, {
      hint: "read back whether it was applied before retrying a write that is not idempotent",
      details: { leaderClient },
    });
  }
}

function neverSent(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === "string" && neverSentCodes.has(code);
}
