// The client API on port 7878: health, execute (writes) and query (reads), as JSON over
// HTTP (DESIGN.md §6). Any node takes any request: a follower forwards what only the
// leader can answer.

import { Elysia } from "elysia";
import type { SvcNode } from "../node/index.ts";
import { checkWriteStatement } from "../store/index.ts";
import { parseExecuteBody, parseJsonText, parseQueryBody, readBodyText } from "./body.ts";
import { errorResponse, json } from "./errors.ts";
import { fallbackRoutes } from "./fallback.ts";
import { forwardToLeader, leaderToForwardTo } from "./forward.ts";
import { healthResponse } from "./health.ts";

export function clientApp(node: SvcNode) {
  const nodeId = node.config.nodeId;
  return new Elysia({ name: "svc-client" })
    .use(fallbackRoutes)
    .get("/health", () => healthResponse(node))
    .post("/v1/execute", async ({ request }) => {
      let text = "";
      try {
        text = await readBodyText(request);
        const statements = parseExecuteBody(parseJsonText(text));
        for (const s of statements) checkWriteStatement(s.sql);
        const outcome = await node.execute(statements);
        return json({
          results: outcome.results.map((r) => ({ rows_affected: r.rowsAffected, last_insert_id: r.lastInsertId })),
          index: outcome.index,
        });
      } catch (e) {
        const leader = leaderToForwardTo(e, request);
        if (leader !== null) {
          try {
            return await forwardToLeader(leader, "/v1/execute", text, nodeId);
          } catch (forwardError) {
            return errorResponse(forwardError);
          }
        }
        return errorResponse(e);
      }
    }, { parse: "none" })
    .post("/v1/query", async ({ request }) => {
      let text = "";
      try {
        text = await readBodyText(request);
        const { sql, params, consistency } = parseQueryBody(parseJsonText(text));
        const result = await node.query(sql, params, consistency);
        node.metrics.readsTotal.inc();
        return json(result);
      } catch (e) {
        const leader = leaderToForwardTo(e, request);
        if (leader !== null) {
          try {
            return await forwardToLeader(leader, "/v1/query", text, nodeId);
          } catch (forwardError) {
            return errorResponse(forwardError);
          }
        }
        node.metrics.readErrorsTotal.labels(e instanceof Error && "code" in e ? String(e.code) : "INTERNAL").inc();
        return errorResponse(e);
      }
    }, { parse: "none" });
}
