// Answers for requests that match no route, and for errors nothing else caught: JSON,
// never an HTML page or a stack trace.

import { Elysia } from "elysia";
import { SvcError } from "../util/errors.ts";
import { errorResponse } from "./errors.ts";

export const fallbackRoutes = new Elysia({ name: "svc-fallback" }).onError({ as: "global" }, ({ code, request, error }) => {
  if (code === "NOT_FOUND") {
    const url = new URL(request.url);
    return errorResponse(new SvcError("NOT_FOUND", `no route for ${request.method} ${url.pathname}`, {
      hint: "see the API in the README: /health, /v1/execute, /v1/query on the client port; /health, /metrics, /admin/* on the admin port",
    }));
  }
  if (code === "PARSE") return errorResponse(new SvcError("BAD_REQUEST", "the request body could not be parsed"));
  return errorResponse(error);
});
