// The client API on port 7878: health, execute (writes) and query (reads), as JSON over
// HTTP (DESIGN.md §6). Any node takes any request: a follower forwards what only the
// leader can answer.

import { Elysia } from "elysia";
import type { SvcNode } from "../node/index.ts";
import { checkReadStatement, checkWriteStatement } from "../store/index.ts";
import { isSvcError, SvcError } from "../util/errors.ts";
import { jsonInt } from "../util/json64.ts";
import { checkParamCount, parseExecuteBody, parseJsonText, parseQueryBody, parseRequestId, readBodyText } from "./body.ts";
import { errorResponse, json, queryResponse } from "./errors.ts";
import { fallbackRoutes, ownPortAddress, type RouteEntry } from "./fallback.ts";
import { queryParameters } from "./query-params.ts";
import { forwardedHeader, forwardToLeader, leaderToForwardTo } from "./forward.ts";
import { watchLeaderMoved } from "./leader-watch.ts";
import { healthResponse } from "./health.ts";

/**
 * A removed node asked by a member that still took it for the leader answers that member
 * NOT_LEADER (nothing was done), which it relays: its client should retry, not stop sending
 * to the member it asked, as NOT_A_MEMBER would tell it.
 */
function forForwarder(e: unknown, request: Request, nodeId: string): unknown {
  const by = request.headers.get(forwardedHeader);
  if (by === null || !isSvcError(e, "NOT_A_MEMBER")) return e;
  return new SvcError("NOT_LEADER", `${by} forwarded the request to ${nodeId}, which was removed from the cluster: it is not the leader, and did nothing with it`, {
    hint: "retry shortly: the members elect a leader among themselves",
  });
}

/** Whether a relayed answer is NOT_LEADER naming `nodeId` as the leader. */
async function namesAsLeader(answer: { json(): Promise<unknown> }, nodeId: string): Promise<boolean> {
  try {
    const body = (await answer.json()) as { error?: { code?: unknown; leader?: unknown } };
    return body.error?.code === "NOT_LEADER" && body.error.leader === nodeId;
  } catch {
    return false;
  }
}

export function clientApp(node: SvcNode) {
  const nodeId = node.config.nodeId;

  /** A route's work: its Response as is, any other value as JSON. */
  const asResponse = (result: unknown): Response => (result instanceof Response ? result : json(result));

  /** Answer a request here, or, when this node is not the leader and one is known, there. */
  async function hereOrAtLeader(request: Request, path: string, work: (body: unknown) => Promise<unknown>, onError?: (e: unknown) => void): Promise<Response> {
    let text = "";
    try {
      text = await readBodyText(request);
      return asResponse(await work(parseJsonText(text)));
    } catch (e) {
      const leader = leaderToForwardTo(e, request);
      if (leader === null) {
        onError?.(e);
        return errorResponse(forForwarder(e, request, nodeId));
      }
      let answer: Response;
      const watch = watchLeaderMoved(node, leader, 2 * node.config.raft.electionTimeoutMs);
      try {
        answer = await forwardToLeader(leader, path, text, { nodeId, clusterId: node.clusterId }, request, watch.signal);
      } catch (forwardError) {
        return errorResponse(forwardError);
      } finally {
        watch.stop();
      }
      // The node forwarded to had lost its leadership, to this node (an election ran while the
      // request was on its way): it answered NOT_LEADER, so it did nothing with the request, and
      // this node, leading now, serves it (rather than tell the client to go where it went).
      if (answer.status !== 503 || !(await namesAsLeader(answer.clone(), nodeId)) || node.status().role !== "leader") return answer;
      try {
        return asResponse(await work(parseJsonText(text)));
      } catch (again) {
        onError?.(again);
        return errorResponse(again);
      }
    }
  }

  let routes: () => readonly RouteEntry[] = () => [];
  const app = new Elysia({ name: "svc-client" })
    .use(fallbackRoutes(() => routes(), { port: "client", otherAddress: () => ownPortAddress(node, "admin") }))
    .use(queryParameters("client"))
    .get("/health", () => healthResponse(node))
    .post("/v1/execute", ({ request }) => hereOrAtLeader(request, "/v1/execute", async (body) => {
      const statements = parseExecuteBody(body);
      const requestId = parseRequestId(body);
      statements.forEach((s, i) => checkParamCount(checkWriteStatement(s.sql), s.params, `statements[${i}]`, `statements[${i}].params`));
      const outcome = await node.execute(statements, requestId === undefined ? {} : { requestId });
      return {
        results: outcome.results.map((r) => ({ rows_affected: r.rowsAffected, last_insert_id: jsonInt(r.lastInsertId) })),
        index: outcome.index,
      };
    }), { parse: "none" })
    .post("/v1/query", ({ request }) => hereOrAtLeader(request, "/v1/query", async (body) => {
      const { sql, params, consistency } = parseQueryBody(body);
      checkParamCount(checkReadStatement(sql), params, "sql", "params");
      // The request's signal fires when the client goes away: the read is stopped then.
      const result = await node.query(sql, params, consistency, { signal: request.signal });
      node.metrics.readsTotal.inc();
      return queryResponse(result);
    }, (e) => node.metrics.readErrorsTotal.labels(e instanceof Error && "code" in e ? String(e.code) : "INTERNAL").inc()), { parse: "none" });
  routes = () => app.routes;
  return app;
}
