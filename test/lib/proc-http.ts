// JSON calls to a running node's client and admin ports, metrics parsing, and polling a
// condition with a deadline (tests wait for behaviour, never for a fixed time).

export type SqlValue = string | number | boolean | null;
export type StatementInput = string | { sql: string; params?: SqlValue[] };

export interface HttpAnswer<T = unknown> {
  status: number;
  headers: Headers;
  /** The parsed JSON body; undefined when the body was not JSON. */
  body: T | undefined;
  text: string;
}

export interface ErrorBody {
  error: { code: string; message: string; hint?: string; [k: string]: unknown };
}

export interface ExecuteBody {
  results: { rows_affected: number; last_insert_id: number }[];
  index: number;
}

export interface QueryBody {
  columns: string[];
  rows: SqlValue[][];
}

const defaultTimeoutMs = 30_000;

export async function request<T = unknown>(
  url: string,
  init: { method?: string; body?: string | Uint8Array; headers?: Record<string, string>; timeoutMs?: number } = {},
): Promise<HttpAnswer<T>> {
  const response = await fetch(url, {
    method: init.method ?? "GET",
    headers: init.headers ?? (init.body === undefined ? {} : { "content-type": "application/json" }),
    ...(init.body === undefined ? {} : { body: init.body }),
    signal: AbortSignal.timeout(init.timeoutMs ?? defaultTimeoutMs),
  });
  const text = await response.text();
  let body: T | undefined;
  try {
    body = JSON.parse(text) as T;
  } catch {
    body = undefined;
  }
  return { status: response.status, headers: response.headers, body, text };
}

export function postJson<T = unknown>(url: string, payload: unknown, timeoutMs?: number): Promise<HttpAnswer<T>> {
  return request<T>(url, { method: "POST", body: JSON.stringify(payload), ...(timeoutMs === undefined ? {} : { timeoutMs }) });
}

/** POST /v1/execute; the answer as it came. */
export function executeRaw(clientUrl: string, statements: readonly StatementInput[], timeoutMs?: number): Promise<HttpAnswer<ExecuteBody & ErrorBody>> {
  return postJson(`${clientUrl}/v1/execute`, { statements }, timeoutMs);
}

/** POST /v1/execute that must succeed. */
export async function execute(clientUrl: string, statements: readonly StatementInput[]): Promise<ExecuteBody> {
  const r = await executeRaw(clientUrl, statements);
  if (r.status !== 200 || r.body === undefined) throw new Error(`execute answered ${r.status}: ${r.text}`);
  return r.body;
}

export function queryRaw(
  clientUrl: string,
  sql: string,
  params: SqlValue[] = [],
  consistency?: "linearizable" | "leader" | "stale",
): Promise<HttpAnswer<QueryBody & ErrorBody>> {
  return postJson(`${clientUrl}/v1/query`, { sql, params, ...(consistency === undefined ? {} : { consistency }) });
}

/** POST /v1/query that must succeed; the rows. */
export async function query(clientUrl: string, sql: string, params: SqlValue[] = []): Promise<SqlValue[][]> {
  const r = await queryRaw(clientUrl, sql, params);
  if (r.status !== 200 || r.body === undefined) throw new Error(`query answered ${r.status}: ${r.text}`);
  return r.body.rows;
}

/** GET a JSON document that must come back 200. */
export async function getJson<T = Record<string, unknown>>(url: string): Promise<T> {
  const r = await request<T>(url);
  if (r.status !== 200 || r.body === undefined) throw new Error(`GET ${url} answered ${r.status}: ${r.text}`);
  return r.body;
}

/** The `name value` lines of a Prometheus text exposition (labels stay part of the name). */
export function parseMetrics(text: string): Map<string, number> {
  const metrics = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const cut = line.lastIndexOf(" ");
    if (cut <= 0) continue;
    metrics.set(line.slice(0, cut).trim(), Number(line.slice(cut + 1)));
  }
  return metrics;
}

export async function fetchMetrics(adminUrl: string): Promise<Map<string, number>> {
  const r = await request(`${adminUrl}/metrics`);
  if (r.status !== 200) throw new Error(`GET /metrics answered ${r.status}: ${r.text}`);
  return parseMetrics(r.text);
}

export async function metric(adminUrl: string, name: string): Promise<number> {
  const value = (await fetchMetrics(adminUrl)).get(name);
  if (value === undefined) throw new Error(`metric ${name} is not exposed`);
  return value;
}

/** Thrown from a waitFor condition to stop waiting at once (the awaited thing can no longer happen). */
export class GiveUp extends Error {}

/** `promise`'s value, or "expired" when it has not settled within `deadlineMs`. */
export async function withinDeadline<T>(promise: Promise<T>, deadlineMs: number): Promise<T | "expired"> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<"expired">((r) => {
    timer = setTimeout(() => r("expired"), deadlineMs);
  });
  try {
    return await Promise.race([promise, expired]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Poll `condition` until it returns a value other than false/undefined, or throw when the
 * deadline passes. The deadline only bounds a hang; no test asserts how long anything took.
 */
export async function waitFor<T>(
  what: string,
  condition: () => T | false | undefined | Promise<T | false | undefined>,
  options: { deadlineMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + (options.deadlineMs ?? 20_000);
  let lastError: unknown;
  for (;;) {
    try {
      const value = await condition();
      if (value !== false && value !== undefined) return value;
      lastError = undefined;
    } catch (e) {
      if (e instanceof GiveUp) throw e;
      lastError = e;
    }
    if (Date.now() > deadline) {
      const why = lastError instanceof Error ? `; last error: ${lastError.message}` : "";
      throw new Error(`gave up waiting for ${what} after ${options.deadlineMs ?? 20_000} ms${why}`);
    }
    await Bun.sleep(options.intervalMs ?? 25);
  }
}
