// Fuzz: request bodies through the real client and admin apps (app.handle, no sockets) of a
// node running in this process on a temp dir. Every answer is JSON; a failure is a 4xx with an
// error code and a message (never a 500, never a throw); a body that was refused applied
// nothing (the rows and the schema are as before, and the log did not grow unless the entry
// failed as a statement). Each case starts from the same rows and schema, so one replays alone.

import { afterAll, beforeAll, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseConfig, renderConfigToml } from "../../src/config/index.ts";
import { adminApp, clientApp } from "../../src/http/index.ts";
import { SvcNode } from "../../src/node/index.ts";
import { silentLogger } from "../../src/util/logger.ts";
import { freePort } from "../lib/proc-ports.ts";
import { concat, fuzzPlan, mutateJson, runCases, type Gen } from "./_gen.ts";

const plan = fuzzPlan("http-body", 150);
const te = new TextEncoder();
const root = fs.mkdtempSync(join(tmpdir(), "svc-fuzz-http-"));
let node: SvcNode;
let client: ReturnType<typeof clientApp>;
let admin: ReturnType<typeof adminApp>;

const baseStatements = [
  "CREATE TABLE kv (k TEXT PRIMARY KEY, v)",
  "CREATE TABLE n (id INTEGER PRIMARY KEY, x REAL, b BLOB)",
  "INSERT INTO kv VALUES ('a', 1), ('b', 'two'), ('c', NULL)",
  "INSERT INTO n VALUES (1, 1.5, x'00ff'), (2, -0.0, NULL)",
];

beforeAll(async () => {
  const peer = `127.0.0.1:${await freePort()}`;
  const text = renderConfigToml({
    nodeId: "n1", dataDir: join(root, "data"), maxMemoryBytes: 128 * 1024 * 1024,
    listen: { client: "127.0.0.1:1", admin: "127.0.0.1:2", peer },
    cluster: { bootstrap: true, members: [{ id: "n1", peer, client: "127.0.0.1:1", admin: "127.0.0.1:2" }] },
    limits: { queryTimeoutMs: 300, adminQueryTimeoutMs: 500, writeCheckTimeoutMs: 300 },
  });
  const parsed = parseConfig(text, "fuzz.toml");
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
  node = await SvcNode.start(parsed.config, silentLogger);
  const deadline = Date.now() + 30_000;
  while (node.recoveryState !== "healthy" || node.status().role !== "leader") {
    if (Date.now() > deadline) throw new Error(`node stuck in ${node.recoveryState}`);
    await Bun.sleep(5);
  }
  client = clientApp(node);
  admin = adminApp(node);
  await node.execute(baseStatements.map((sql) => ({ sql, params: [] })));
  baseState = await state();
}, 60_000);

afterAll(async () => {
  await node?.stop();
  fs.rmSync(root, { recursive: true, force: true });
});

let baseState = "";

/** The user's schema and rows, as one string. */
async function state(): Promise<string> {
  const read = async (sql: string): Promise<unknown> => (await node.query(sql, [], "stale", { admin: true })).rows;
  const schema = await read("SELECT type, name, tbl_name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' AND name NOT LIKE '_svc_%' ORDER BY name");
  const kv = await read("SELECT k, quote(v) FROM kv ORDER BY k").catch((e) => String(e));
  const n = await read("SELECT id, quote(x), quote(b) FROM n ORDER BY id").catch((e) => String(e));
  return JSON.stringify([schema, kv, n], (_, v) => (typeof v === "bigint" ? v.toString() : v));
}

/** Put the rows and schema back as the base, after a case that changed them (an accepted write). */
async function resetState(): Promise<void> {
  const objects = (await node.query("SELECT type, name FROM sqlite_schema WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_svc_%'", [], "stale", { admin: true })).rows as [string, string][];
  const quote = (name: string): string => `"${name.replaceAll('"', '""')}"`;
  const drops = [...objects.filter(([t]) => t === "view"), ...objects.filter(([t]) => t === "table")].map(([t, name]) => `DROP ${t.toUpperCase()} IF EXISTS ${quote(name)}`);
  await node.execute([...drops, ...baseStatements].map((sql) => ({ sql, params: [] })));
  const now = await state();
  if (now !== baseState) throw new Error(`could not restore the base state: ${now}`);
}

const executeBodies = [
  { statements: ["INSERT INTO kv VALUES ('d', 4)"] },
  { statements: [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: ["e", 5] }, "UPDATE kv SET v = v + 1 WHERE k = 'a'"] },
  { statements: [{ sql: "INSERT INTO n (x, b) VALUES (:x, :b)", params: [2.5, "blob"] }], request_id: "0f1e2d3c-req" },
  { statements: [{ sql: "DELETE FROM kv WHERE k = ?", params: ["b"] }] },
  { statements: ["CREATE TABLE t9 (a)", "INSERT INTO t9 SELECT k FROM kv", "CREATE INDEX i9 ON t9 (a)"] },
  { statements: [{ sql: "UPDATE n SET x = ?1 WHERE id = ?2", params: [9007199254740993, 1] }] },
  { statements: ["INSERT INTO kv VALUES ('f', json('[1,2]'))", { sql: "INSERT INTO kv VALUES (?, ?)", params: ["g", null] }] },
];
const queryBodies = [
  { sql: "SELECT * FROM kv WHERE k = ?", params: ["a"] },
  { sql: "SELECT count(*), sum(x) FROM n", consistency: "stale" },
  { sql: "SELECT k, v FROM kv ORDER BY k LIMIT ? OFFSET ?", params: [2, 1], consistency: "leader" },
  { sql: "WITH x AS (SELECT 1 AS a) SELECT a FROM x", consistency: "linearizable" },
  { sql: "PRAGMA table_info(kv)" },
];
const memberBodies = [{ id: "node9" }, { id: "n2" }];
const words = [
  "statements", "sql", "params", "request_id", "consistency", "id", "null", "true", "false", "[]", "{}", "\"\"", "1e999", "-0",
  "9223372036854775808", "SELECT", "INSERT", "DELETE", "DROP", "PRAGMA", "ATTACH", "BEGIN", "ROLLBACK", "WITH", "RECURSIVE", "VALUES",
  "TEMP", "total_changes", "randomblob", "zeroblob", "kv", "n", "_svc_meta", ";", "?", "?1", ":x", "'", "\\\"", "\\u0000", "\\ud800", "\\ufeff", "\ufeff",
];

type Route = { app: "client" | "admin"; path: string; corpus: readonly unknown[]; writes: boolean };
const routes: readonly Route[] = [
  { app: "client", path: "/v1/execute", corpus: executeBodies, writes: true },
  { app: "client", path: "/v1/execute", corpus: executeBodies, writes: true },
  { app: "client", path: "/v1/query", corpus: queryBodies, writes: false },
  { app: "admin", path: "/admin/query", corpus: queryBodies, writes: false },
  { app: "admin", path: "/admin/remove-node", corpus: memberBodies, writes: true },
  { app: "admin", path: "/admin/promote", corpus: memberBodies, writes: true },
  { app: "admin", path: "/admin/transfer-leader", corpus: memberBodies, writes: true },
];

const sqlTexts = [...executeBodies.flatMap((b) => b.statements.map((s) => (typeof s === "string" ? s : s.sql))), ...queryBodies.map((b) => b.sql)];

function bodyFor(gen: Gen, route: Route): Uint8Array {
  const texts = route.corpus.map((b) => JSON.stringify(b));
  const r = gen.int(20);
  if (r === 0) return gen.randomBytes(400);
  if (r < 4) return te.encode(gen.mutateText(gen.pick(texts), texts, words));
  if (r < 7) return gen.mutateBytes(te.encode(gen.pick(texts)), texts.map((t) => te.encode(t)));
  // Valid JSON with one part changed: most such bodies reach the SQL checks and the node.
  return te.encode(mutateJson(gen, gen.pick(route.corpus), sqlTexts, words));
}

function requestFor(gen: Gen, route: Route, body: Uint8Array): Request {
  const headers: Record<string, string> = {};
  const type = gen.pick(["application/json", "application/json", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""]);
  if (type !== "") headers["content-type"] = type;
  const url = `http://127.0.0.1${route.path}`;
  if (gen.chance(0.2)) {
    // Chunked: no Content-Length, the body read piece by piece.
    const pieces: Uint8Array[] = [];
    for (let at = 0; at < body.length;) {
      const n = 1 + gen.size(body.length);
      pieces.push(body.subarray(at, at + n));
      at += n;
    }
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        const next = pieces.shift();
        if (next === undefined) controller.close();
        else controller.enqueue(next);
      },
    });
    return new Request(url, { method: "POST", headers, body: stream });
  }
  return new Request(url, { method: "POST", headers, body });
}

interface Answer {
  status: number;
  code: string | null;
}

async function answerOf(response: Response): Promise<Answer> {
  const text = await response.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new Error(`answered ${response.status} with a body that is not JSON: ${text.slice(0, 200)}`);
  }
  if (response.status >= 200 && response.status < 300) return { status: response.status, code: null };
  if (response.status < 400 || response.status > 499) throw new Error(`answered ${response.status}: ${text.slice(0, 300)}`);
  const error = (body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  if (typeof error?.code !== "string" || typeof error.message !== "string" || error.message === "") {
    throw new Error(`answered ${response.status} without an error code and message: ${text.slice(0, 300)}`);
  }
  return { status: response.status, code: error.code };
}

/** Refusals that must leave the log as it was: nothing was proposed. */
const refusedBeforeTheLog = new Set(["BAD_REQUEST", "SQL_REFUSED", "BODY_TOO_LARGE", "WRITE_TOO_EXPENSIVE", "UNSUPPORTED_MEDIA_TYPE", "NOT_FOUND"]);

test("bodies through the client and admin apps: JSON, 4xx with a code when refused, and a refused body applies nothing", async () => {
  const tally: Record<string, number> = {};
  let resets = 0;
  const cases = await runCases(plan, async (gen) => {
    const route = gen.pick(routes);
    const body = gen.chance(0.02) ? concat(te.encode('{"statements":["'), new Uint8Array(17 * 1024 * 1024).fill(0x61), te.encode('"]}')) : bodyFor(gen, route);
    gen.note(concat(te.encode(`${route.path} `), body));
    const commitBefore = node.status().commitIndex;
    let response: Response;
    try {
      response = await (route.app === "client" ? client : admin).handle(requestFor(gen, route, body));
    } catch (e) {
      throw new Error(`${route.path} threw ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`);
    }
    const answer = await answerOf(response);
    const key = `${route.path} ${answer.code ?? answer.status}`;
    tally[key] = (tally[key] ?? 0) + 1;
    if (answer.code === null && route.writes) {
      // Accepted: whatever it changed is undone before the next case.
      resets++;
      await resetState();
      return;
    }
    const after = await state();
    if (after !== baseState) throw new Error(`${route.path} answered ${answer.code ?? answer.status} and changed the data: ${after.slice(0, 400)}`);
    const commitAfter = node.status().commitIndex;
    if ((answer.code === null || refusedBeforeTheLog.has(answer.code)) && commitAfter !== commitBefore) {
      throw new Error(`${route.path} answered ${answer.code ?? answer.status}, yet the log grew from ${commitBefore} to ${commitAfter}`);
    }
  }, { caseTimeMsMax: 10_000 });
  console.log(`fuzz http-body: ${cases} cases, ${resets} accepted writes undone; answers ${JSON.stringify(tally)}`);
  expect(cases).toBe(plan.seeds.length);
}, 600_000);
