// The client API on port 7878: health, execute (writes) and query (reads), as JSON over
// HTTP (DESIGN.md §6).

import { Elysia } from "elysia";
import type { SvcNode } from "../node/index.ts";
import { checkWriteStatement } from "../store/index.ts";
import { parseExecuteBody, parseQueryBody, readJsonBody } from "./body.ts";
import { errorResponse, json } from "./errors.ts";
import { healthResponse } from "./health.ts";
import { fallbackRoutes } from "./fallback.ts";

export function clientApp(node: SvcNode) {
  return new Elysia({ name: "svc-client" })
    .use(fallbackRoutes)
    .get("/health", () => healthResponse(node))
    .post("/v1/execute", async ({ request }) => {
      try {
        const statements = parseExecuteBody(await readJsonBody(request));
        for (const s of statements) checkWriteStatement(s.sql);
        const outcome = await node.execute(statements);
        return json({
          results: outcome.results.map((r) => ({ rows_affected: r.rowsAffected, last_insert_id: r.lastInsertId })),
          index: outcome.index,
        });
      } catch (e) {
        return errorResponse(e);
      }
    }, { parse: "none" })
    .post("/v1/query", async ({ request }) => {
      try {
        const { sql, params, consistency } = parseQueryBody(await readJsonBody(request));
        const result = await node.query(sql, params, consistency);
        node.metrics.readsTotal.inc();
        return json(result);
      } catch (e) {
        node.metrics.readErrorsTotal.labels(e instanceof Error && "code" in e ? String(e.code) : "INTERNAL").inc();
        return errorResponse(e);
      }
    }, { parse: "none" });
}
