// The edge where errors become HTTP answers: {"error": {"code", "message", "hint"?, ...}}
// with a status that fits. Modules throw SvcError with their own codes; only this file
// knows statuses.

import { SvcError, errorMessage } from "../util/errors.ts";

const statusByCode: Record<string, number> = {
  BAD_REQUEST: 400,
  SQL_REFUSED: 400,
  SQL_ERROR: 400,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  BODY_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  NOT_LEADER: 503,
  WRITES_PAUSED: 503,
  RECOVERING: 503,
  SHUTTING_DOWN: 503,
  OVERLOADED: 503,
  ENTRY_REPLACED: 503,
  WRITE_TIMEOUT: 504,
  READ_TIMEOUT: 503,
  CHANGE_IN_PROGRESS: 409,
  INVALID_CHANGE: 400,
  INVALID_TRANSFER: 400,
  TRANSFER_TIMEOUT: 504,
  CATCH_UP_TIMEOUT: 504,
};

export function statusFor(code: string): number {
  return statusByCode[code] ?? 500;
}

export function errorBody(e: SvcError): Record<string, unknown> {
  const error: Record<string, unknown> = { code: e.code, message: e.message };
  if (e.hint !== undefined) error["hint"] = e.hint;
  for (const [k, v] of Object.entries(e.details)) {
    if (v !== null && v !== undefined) error[k === "leaderId" ? "leader" : snakeCase(k)] = v;
  }
  return { error };
}

export function errorResponse(e: unknown): Response {
  const error = e instanceof SvcError ? e : new SvcError("INTERNAL", `internal error: ${errorMessage(e)}`, {
    hint: "this is a bug in svc; the node goes on. Report it with the node's log",
  });
  const status = statusFor(error.code);
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (status === 503) headers["retry-after"] = "1";
  return new Response(JSON.stringify(errorBody(error)), { status, headers });
}

export function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

export function badRequest(message: string, hint?: string): SvcError {
  return new SvcError("BAD_REQUEST", message, hint === undefined ? {} : { hint });
}

function snakeCase(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** Run a route's work: its Response as is, any other value as JSON, a thrown error as its answer. */
export async function answer(work: () => unknown): Promise<Response> {
  try {
    const result = await work();
    return result instanceof Response ? result : json(result);
  } catch (e) {
    return errorResponse(e);
  }
}
