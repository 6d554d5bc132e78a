// The edge where errors become HTTP answers: {"error": {"code", "message", "hint"?, ...}}
// with a status that fits. Modules throw SvcError with their own codes; only this file
// knows statuses.

import type { BackupErrorCode } from "../backup/index.ts";
import type { NodeErrorCode } from "../node/index.ts";
import type { RaftErrorCode } from "../raft/index.ts";
import type { StorageErrorCode } from "../storage/index.ts";
import type { QueryResult, StoreErrorCode } from "../store/index.ts";
import type { TransportErrorCode } from "../transport/index.ts";
import { SvcError, errorMessage } from "../util/errors.ts";
import type { ListenErrorCode } from "../util/listen-failure.ts";

/** The codes the http module itself gives. */
export type HttpErrorCode =
  | "BAD_REQUEST"
  | "NOT_FOUND"
  /** A path this port serves, with another method: 405 with Allow. */
  | "METHOD_NOT_ALLOWED"
  | "REQUEST_TIMEOUT"
  | "BODY_TOO_LARGE"
  /** Request headers past node:http's limit (16 KiB): answered from the parser's clientError. */
  | "HEADERS_TOO_LARGE"
  | "UNSUPPORTED_MEDIA_TYPE"
  /** An Expect header other than 100-continue: answered from node:http's checkExpectation. */
  | "EXPECTATION_FAILED"
  /** No token, or one this node does not know, for a route that needs one. */
  | "UNAUTHORIZED"
  /** A token whose role is below the route's. */
  | "FORBIDDEN"
  /** The tokens file cannot be used (mode, form); at start and on reload. */
  | "TOKENS_FILE_INVALID"
  /** `svc admin token revoke`: no token by that name or hash prefix (offline; never a client's). */
  | "TOKEN_NOT_FOUND"
  /** `svc admin token revoke --hash`: the prefix names several tokens (offline). */
  | "TOKEN_AMBIGUOUS"
  /** A certificate, key or CA file of [tls] cannot be used; at start and on reload. */
  | "TLS_INVALID"
  /** A client past [limits] client_requests_per_second or client_connections_max. */
  | "TOO_MANY_REQUESTS"
  /** Request bodies in flight past their share of max_memory_mb (in-flight.ts): nothing applied. */
  | "MEMORY_BACKPRESSURE"
  /** A follower could not forward to the leader. */
  | "NOT_LEADER"
  /** A follower forwarded a write and lost the connection before the leader's answer. */
  | "OUTCOME_UNKNOWN"
  | "LISTEN_FAILED"
  /** Anything that is not an SvcError: a bug, the one code answered with 500. */
  | "INTERNAL";

/** Every code a module of svc gives. A new code joins its module's union, and then this map. */
export type KnownErrorCode =
  | HttpErrorCode
  | ListenErrorCode
  | NodeErrorCode
  | RaftErrorCode
  | StorageErrorCode
  | StoreErrorCode
  | TransportErrorCode
  | BackupErrorCode;

/**
 * Total over KnownErrorCode: the compiler refuses a code without a status. Only INTERNAL is
 * 500; every known condition says whose fault it is (4xx: the request; 503: this node, for now,
 * retry or ask another; 504: waited too long; 502: a peer sent what cannot be read).
 * Some codes arise only in offline tools or at start and never reach a client; they are here so
 * that no code can fall through to 500 if that changes.
 */
export const statusByCode: Readonly<Record<KnownErrorCode, number>> = Object.freeze({
  // The request is wrong: fix it, do not retry it as is.
  BAD_REQUEST: 400,
  SQL_REFUSED: 400,
  SQL_ERROR: 400,
  // A statement past its limits: make it cheaper (nobody hears QUERY_CANCELLED: its client left).
  QUERY_TIMEOUT: 400,
  QUERY_CANCELLED: 400,
  RESULT_TOO_LARGE: 400,
  WRITE_TOO_EXPENSIVE: 400,
  INVALID_CHANGE: 400,
  INVALID_TRANSFER: 400,
  TRANSPORT_BAD_ADDRESS: 400,
  TRANSPORT_BAD_OPTION: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  TOO_MANY_REQUESTS: 429,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  CLEANUP_DIR_MISSING: 404,
  REQUEST_TIMEOUT: 408,
  CHANGE_IN_PROGRESS: 409,
  DATA_DIR_LOCKED: 409,
  NO_VALID_SNAPSHOT: 409,
  BODY_TOO_LARGE: 413,
  HEADERS_TOO_LARGE: 431,
  UNSUPPORTED_MEDIA_TYPE: 415,
  EXPECTATION_FAILED: 417,
  // Sent to a node that is no member of the cluster (removed): never here, ask a member.
  NOT_A_MEMBER: 421,
  // This node cannot answer now: retry, here later or at another member.
  NOT_LEADER: 503,
  WRITES_PAUSED: 503,
  REQUEST_ID_REUSED: 422,
  SHUTTING_DOWN: 503,
  OVERLOADED: 503,
  MEMORY_BACKPRESSURE: 503,
  PROPOSALS_FULL: 503,
  READS_FULL: 503,
  ENTRY_REPLACED: 503,
  READ_TIMEOUT: 503,
  RECOVERING: 503,
  SQL_PROCESS_FAILED: 503,
  // This node's disk or data is damaged or unusable: other members can still answer.
  STORAGE_FAILED: 503,
  DISK_FULL: 507,
  APPLY_FAILED: 503,
  SNAPSHOT_FAILED: 503,
  CHECKPOINT_FAILED: 503,
  STORE_DAMAGED: 503,
  STORE_UNRECOVERABLE: 503,
  DATA_DIR_INVALID: 503,
  DATA_GONE: 503,
  HISTORY_DIVERGED: 503,
  WAL_CORRUPT: 503,
  HARDSTATE_CORRUPT: 503,
  RAFT_STATE_INVALID: 503,
  LOG_GAP: 503,
  DATA_DIR_NOT_WRITABLE: 503,
  TOKENS_FILE_INVALID: 503,
  TOKEN_NOT_FOUND: 404,
  TOKEN_AMBIGUOUS: 400,
  TLS_INVALID: 503,
  PEER_TLS_INVALID: 503,
  GOSSIP_KEY_INVALID: 503,
  DATA_DIR_WRONG_OWNER: 503,
  CLEANUP_DIR_UNREADABLE: 503,
  // Backups and object stores (offline tools and `svc admin backup`).
  OBJECT_URL_INVALID: 400,
  OBJECT_STORE_NO_CREDENTIALS: 503,
  OBJECT_STORE_FAILED: 503,
  BACKUP_FAILED: 503,
  BACKUP_DAMAGED: 409,
  RESTORE_REFUSED: 409,
  ARCHIVE_EMPTY: 404,
  ARCHIVE_GAP: 409,
  ARCHIVE_DAMAGED: 409,
  ARCHIVE_CONFLICT: 409,
  ARCHIVE_UNREADABLE: 503,
  WAL_REPLAY_REFUSED: 409,
  REMOVE_FAILED: 503,
  PORT_IN_USE: 503,
  PORT_NOT_PERMITTED: 503,
  ADDRESS_NOT_LOCAL: 503,
  LISTEN_FAILED: 503,
  TRANSPORT_LISTEN_FAILED: 503,
  // A peer sent bytes that cannot be read.
  FRAME_TOO_LARGE: 502,
  FRAME_BAD_CRC: 502,
  TRUNCATED: 502,
  BAD_VERSION: 502,
  UNKNOWN_TYPE: 502,
  BAD_VALUE: 502,
  TRAILING_BYTES: 502,
  // Waited for the cluster and gave up; the outcome may still come.
  WRITE_TIMEOUT: 504,
  TRANSFER_TIMEOUT: 504,
  CATCH_UP_TIMEOUT: 504,
  OUTCOME_UNKNOWN: 504,
  INTERNAL: 500,
});

export function isKnownErrorCode(code: string): code is KnownErrorCode {
  return Object.hasOwn(statusByCode, code);
}

/** The status for a code; 500 only for INTERNAL and for a code no module declares (a bug). */
export function statusFor(code: string): number {
  return isKnownErrorCode(code) ? statusByCode[code] : 500;
}

const reservedKeys: ReadonlySet<string> = new Set(["code", "message", "hint"]);

export function errorBody(e: SvcError): Record<string, unknown> {
  const error: Record<string, unknown> = { code: e.code, message: e.message };
  if (e.hint !== undefined) error["hint"] = e.hint;
  for (const [k, v] of Object.entries(e.details)) {
    const key = k === "leaderId" ? "leader" : snakeCase(k);
    // A detail never replaces the code, the message or the hint.
    if (v !== null && v !== undefined && !reservedKeys.has(key)) error[key] = v;
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
  const retryAfterS = error.details["retryAfterS"];
  if (status === 429 && typeof retryAfterS === "number") headers["retry-after"] = String(retryAfterS);
  return new Response(JSON.stringify(errorBody(error)), { status, headers });
}

export function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

/**
 * A read's answer, `{"columns": […], "rows": […]}`: written from the rows' text when a SQL
 * process read them (QueryResult.rowsJson), never parsed into values and written again.
 */
export function queryResponse(result: QueryResult): Response {
  if (result.rowsJson === undefined) return json({ columns: result.columns, rows: result.rows });
  return new Response(`{"columns":${JSON.stringify(result.columns)},"rows":${result.rowsJson}}`, { status: 200, headers: { "content-type": "application/json" } });
}

/** A request the node cannot take as it is; without a hint of its own it says what holds for every such one. */
export function badRequest(message: string, hint = "nothing was done; correct the request as the message says (the request shapes are in the README's API section) and send it again"): SvcError {
  return new SvcError("BAD_REQUEST", message, { hint });
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
