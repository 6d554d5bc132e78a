// A follower hands a request it cannot serve itself (a write, or a read at "leader"
// consistency) to the leader and relays the answer, so clients may talk to any node.

import { SvcError, errorMessage } from "../util/errors.ts";

export const forwardedHeader = "x-svc-forwarded-by";
const forwardTimeoutMs = 35_000;

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
    throw new SvcError("NOT_LEADER", `this node is not the leader and forwarding to the leader at ${leaderClient} failed: ${errorMessage(e)}`, {
      hint: "retry; if it persists, check connectivity to the leader's client port",
      details: { leaderClient },
    });
  }
}
