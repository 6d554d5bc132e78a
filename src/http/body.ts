// Reading and checking request bodies. Every problem names the field, so a client can
// fix its request without reading svc's source.

import { NODE_ID_PATTERN, parseAddress } from "../config/index.ts";
import { SvcError } from "../util/errors.ts";
import { parseJson64Strict, WideIntegerLiteral } from "../util/json64.ts";
import { isRequestId, requestIdLengthMax, type SqlValue, type Statement, type StatementShape } from "../store/index.ts";
import { badRequest } from "./errors.ts";

/** Largest request body svc reads; bigger ones get 413 before being buffered. */
export const requestBodyBytesMax = 16 * 1024 * 1024;
export const statementsPerBatchMax = 10_000;
const paramsPerStatementMax = 32_766;

export async function readJsonBody(request: Request): Promise<unknown> {
  return parseJsonText(await readBodyText(request));
}

/**
 * The body as text, read in pieces and refused with 413 as soon as it passes the limit:
 * by its Content-Length before anything is read, or while reading a chunked body.
 */
export async function readBodyText(request: Request): Promise<string> {
  // A compressed body would be read as JSON and refused for what it is not (or, worse, be
  // JSON by chance): the encoding is refused by name.
  const encoding = request.headers.get("content-encoding");
  if (encoding !== null && encoding.trim().toLowerCase() !== "identity") {
    throw new SvcError("UNSUPPORTED_MEDIA_TYPE", `the request body's Content-Encoding ${JSON.stringify(encoding)} is not read: svc takes bodies as they are`, {
      hint: "send the JSON uncompressed (no Content-Encoding header)",
    });
  }
  const declared = request.headers.get("content-length");
  const length = Number(declared ?? "0");
  if (length > requestBodyBytesMax) throw tooLarge(length);
  // With a Content-Length within the limit, no more than it says is read: the one-piece
  // read is the cheap one. Only a chunked body is read piece by piece against the limit.
  if (declared !== null) return utf8Text(new Uint8Array(await request.arrayBuffer()));
  if (request.body === null) return "";
  const chunks: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of request.body) {
    total += chunk.length;
    if (total > requestBodyBytesMax) throw tooLarge(total);
    chunks.push(chunk);
  }
  return utf8Text(Buffer.concat(chunks, total));
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/** Bytes that are not UTF-8 are refused: decoding them would put U+FFFD in the user's values. */
function utf8Text(bytes: Uint8Array): string {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    throw badRequest("the request body is not valid UTF-8", "send JSON encoded as UTF-8; put binary data in a string (base64 or hex)");
  }
}

/**
 * The body as JSON; integers beyond ±2^53 stay exact (as BigInt, see json64.ts), and integer
 * literals beyond 64 bits come as WideIntegerLiteral, refused where they are used.
 */
export function parseJsonText(text: string): unknown {
  if (text.trim() === "") throw badRequest("the request body is empty", "send a JSON object as the body, with Content-Type: application/json");
  try {
    return parseJson64Strict(text);
  } catch (e) {
    // The parser recurses: a body of arrays or objects nested past the stack is well-formed
    // JSON that cannot be read, and no request svc takes nests more than four levels.
    if (e instanceof RangeError) {
      throw badRequest("the request body has arrays or objects nested too deeply to read",
        "a request nests at most four levels: {\"statements\": [{\"sql\": \"…\", \"params\": [values]}]}; parameter values are strings, numbers, booleans or null");
    }
    throw badRequest(`the request body is not valid JSON: ${e instanceof Error ? e.message : String(e)}`, "send one JSON object, e.g. {\"statements\": [\"…\"]}; check quoting and commas");
  }
}

export function tooLarge(bytes: number): SvcError {
  return new SvcError("BODY_TOO_LARGE", `the request body is ${bytes} bytes; the limit is ${requestBodyBytesMax}`, {
    hint: "split the batch into several requests",
  });
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function checkKeys(v: Record<string, unknown>, allowed: readonly string[], where: string): void {
  for (const key of Object.keys(v)) {
    if (!allowed.includes(key)) throw badRequest(`unknown field "${where}${key}"; expected ${allowed.map((k) => `"${k}"`).join(", ")}`);
  }
}

function parseParams(v: unknown, field: string): SqlValue[] {
  if (v === undefined) return [];
  if (!Array.isArray(v)) throw badRequest(`"${field}" must be an array of values`);
  if (v.length > paramsPerStatementMax) throw badRequest(`"${field}" has ${v.length} values; at most ${paramsPerStatementMax}`);
  return v.map((p, i) => {
    if (p === null || typeof p === "boolean") return p;
    if (typeof p === "string") return wellFormed(p, `${field}[${i}]`);
    if ((typeof p === "number" && Number.isFinite(p)) || typeof p === "bigint") return p;
    if (p instanceof WideIntegerLiteral) {
      throw badRequest(`"${field}[${i}]" is the integer ${p.source}, outside SQLite's 64-bit range (-9223372036854775808 to 9223372036854775807)`,
        "send it as a string, or as a real number with a decimal point or an exponent if a rounded value is meant");
    }
    throw badRequest(`"${field}[${i}]" must be a string, a finite number, a boolean or null`);
  });
}

/**
 * A string with a lone surrogate (a "\ud800" escape without its pair) has no UTF-8 form:
 * SQLite would store U+FFFD in its place.
 */
function wellFormed(s: string, field: string): string {
  if (s.isWellFormed()) return s;
  const at = [...s].findIndex((c) => !c.isWellFormed());
  throw badRequest(`"${field}" holds a lone UTF-16 surrogate at character ${at}, which no UTF-8 text can hold`,
    "pair each surrogate escape (\\ud83d\\ude00) or send the character itself; binary data belongs in base64 or hex");
}

/**
 * A statement must get exactly the values it binds: a missing or short "params" would bind
 * NULL (or fail on every replica), an extra value would be ignored.
 */
export function checkParamCount(shape: StatementShape, params: readonly SqlValue[], where: string, paramsField: string): void {
  if (params.length === shape.parameterCount) return;
  const wants = `${shape.parameterCount} parameter${shape.parameterCount === 1 ? "" : "s"}`;
  const got = params.length === 0 ? "no values" : `${params.length} value${params.length === 1 ? "" : "s"}`;
  throw badRequest(`"${where}" binds ${wants}, but "${paramsField}" has ${got}`, `send exactly ${shape.parameterCount} values in "${paramsField}", in the order of the placeholders`);
}

/** {"statements": ["SQL", {"sql": "...", "params": [...]}, ...], "request_id"?: "..."} */
export function parseExecuteBody(body: unknown): Statement[] {
  if (!isObject(body)) throw badRequest('the body must be a JSON object: {"statements": [...]}');
  checkKeys(body, ["statements", "request_id"], "");
  const statements = body["statements"];
  if (!Array.isArray(statements)) throw badRequest('"statements" is required and must be an array');
  if (statements.length === 0) throw badRequest('"statements" must hold at least one statement');
  if (statements.length > statementsPerBatchMax) throw badRequest(`"statements" has ${statements.length} entries; at most ${statementsPerBatchMax} per batch`);
  return statements.map((s, i) => {
    if (typeof s === "string") return { sql: wellFormed(s, `statements[${i}]`), params: [] };
    if (!isObject(s)) throw badRequest(`"statements[${i}]" must be a string or an object {"sql", "params"}`);
    checkKeys(s, ["sql", "params"], `statements[${i}].`);
    if (typeof s["sql"] !== "string") throw badRequest(`"statements[${i}].sql" is required and must be a string`);
    return { sql: wellFormed(s["sql"], `statements[${i}].sql`), params: parseParams(s["params"], `statements[${i}].params`) };
  });
}

/**
 * The optional "request_id" of an execute body (parseExecuteBody checked the body's shape):
 * the client's id that makes the write safe to retry (README, Safe retries).
 */
export function parseRequestId(body: unknown): string | undefined {
  const id = isObject(body) ? body["request_id"] : undefined;
  if (id === undefined) return undefined;
  if (!isRequestId(id)) throw badRequest(`"request_id" must be a string of 1 to ${requestIdLengthMax} characters`, "use a fresh random id (a UUID) per write, and the same id for each retry of it");
  return wellFormed(id, "request_id");
}

export type Consistency = "linearizable" | "leader" | "stale";
const consistencies: readonly Consistency[] = ["linearizable", "leader", "stale"];

/** {"sql": "...", "params": [...], "consistency": "linearizable" | "leader" | "stale"} */
export function parseQueryBody(body: unknown): { sql: string; params: SqlValue[]; consistency: Consistency } {
  if (!isObject(body)) throw badRequest('the body must be a JSON object: {"sql": "...", "params": [...]}');
  checkKeys(body, ["sql", "params", "consistency"], "");
  if (typeof body["sql"] !== "string") throw badRequest('"sql" is required and must be a string');
  const consistency = body["consistency"] ?? "linearizable";
  if (typeof consistency !== "string" || !consistencies.includes(consistency as Consistency)) {
    throw badRequest(`"consistency" must be one of ${consistencies.map((c) => `"${c}"`).join(", ")}`);
  }
  return { sql: wellFormed(body["sql"], "sql"), params: parseParams(body["params"], "params"), consistency: consistency as Consistency };
}

/** {"id": "node2"}: nothing else, so that a field svc does not read (a dry run) is never ignored by a membership change. */
export function parseIdBody(body: unknown): string {
  if (!isObject(body)) throw badRequest('the body must be {"id": "<node id>"}');
  checkKeys(body, ["id"], "");
  if (typeof body["id"] !== "string" || body["id"] === "") throw badRequest('the body must be {"id": "<node id>"}');
  return body["id"];
}

/** POST /admin/set-member: {"id", "peer"?, "client"?, "admin"?}, at least one address. */
export function parseSetMemberBody(body: unknown): { id: string; change: { peer?: string; client?: string; admin?: string } } {
  if (!isObject(body)) throw badRequest('the body must be {"id", "peer"?, "client"?, "admin"?}');
  checkKeys(body, ["id", "peer", "client", "admin"], "");
  const id = body["id"];
  if (typeof id !== "string" || id === "") throw badRequest('"id" is required and must be a string');
  const change: { peer?: string; client?: string; admin?: string } = {};
  for (const k of ["peer", "client", "admin"] as const) {
    const v = body[k];
    if (v === undefined) continue;
    if (typeof v !== "string") throw badRequest(`"${k}" must be host:port`);
    const parsed = parseAddress(v);
    if (!parsed.ok) throw badRequest(`"${k}" must be host:port: ${parsed.message}`);
    change[k] = v;
  }
  if (Object.keys(change).length === 0) throw badRequest('give at least one of "peer", "client" and "admin"');
  return { id, change };
}

/** {"id", "peer", "client", "admin", "learner"?} */
export function parseMemberBody(body: unknown): { member: { id: string; peer: string; client: string; admin: string }; learner: boolean } {
  if (!isObject(body)) throw badRequest('the body must be {"id", "peer", "client", "admin", "learner"?}');
  checkKeys(body, ["id", "peer", "client", "admin", "learner"], "");
  const field = (k: string): string => {
    const v = body[k];
    if (typeof v !== "string" || v === "") throw badRequest(`"${k}" is required and must be a string`);
    if (k === "id" && !NODE_ID_PATTERN.test(v)) {
      throw badRequest(`"id" must be 1 to 64 characters of A-Z a-z 0-9 _ . -, got ${JSON.stringify(v)}`, "give the node_id the new node's configuration file names");
    }
    if (k !== "id") {
      const parsed = parseAddress(v);
      if (!parsed.ok) throw badRequest(`"${k}" must be host:port: ${parsed.message}`);
    }
    return v;
  };
  const learner = body["learner"] ?? false;
  if (typeof learner !== "boolean") throw badRequest('"learner" must be true or false');
  return { member: { id: field("id"), peer: field("peer"), client: field("client"), admin: field("admin") }, learner };
}
