// The client and admin HTTP APIs of a running compiled node: every bad input gets a JSON
// answer that names the problem and changes nothing; pause/resume, metrics, snapshots and
// verify-checksums behave as an operator reads them in SPEC §2.3 and §4.

import * as fs from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect } from "bun:test";
import {
  ProcEnv, buildDeadlineMs, ensureBinary, execute, executeRaw, fetchMetrics, getJson, kvSchema, postJson, procTest, query, queryRaw, request, runBinary,
  useProcessCleanup, waitFor, type ErrorBody, type HttpAnswer, type NodeProcess,
} from "../lib/proc.ts";

useProcessCleanup();

const MIB = 1024 * 1024;

/** The answer is a JSON error with this status and code; returns its message. */
function expectError(answer: HttpAnswer<unknown>, status: number, code: string): string {
  if (answer.status !== status) throw new Error(`expected ${status} ${code}, got ${answer.status}: ${answer.text.slice(0, 300)}`);
  expect(answer.headers.get("content-type") ?? "").toContain("application/json");
  const body = answer.body as ErrorBody | undefined;
  expect(body?.error.code).toBe(code);
  expect(typeof body?.error.message).toBe("string");
  // A request refused for its form always says what to do about it.
  if (code === "BAD_REQUEST") expect((body?.error as { hint?: unknown } | undefined)?.hint).toEqual(expect.any(String));
  return body?.error.message ?? "";
}

async function countRows(node: NodeProcess, where = "1 = 1"): Promise<number> {
  const rows = await query(node.clientUrl, `SELECT count(*) FROM kv WHERE ${where}`);
  return Number(rows[0]?.[0]);
}

const env = new ProcEnv("http");
let node: NodeProcess;
const it = (name: string, fn: () => Promise<void>, timeoutMs?: number): void => env.test(name, fn, timeoutMs);

beforeAll(async () => {
  ensureBinary();
  node = await env.startSingleNode();
  await execute(node.clientUrl, [kvSchema]);
}, buildDeadlineMs);
afterAll(() => env.dispose());

describe("POST /v1/execute refuses bad input with 400 and a message naming the problem", () => {
  it("malformed JSON is refused, naming JSON", async () => {
    const r = await request(`${node.clientUrl}/v1/execute`, { method: "POST", body: '{"statements": [' });
    expect(expectError(r, 400, "BAD_REQUEST")).toContain("not valid JSON");
  });

  it("an empty body is refused", async () => {
    const r = await request(`${node.clientUrl}/v1/execute`, { method: "POST", body: "" });
    expect(expectError(r, 400, "BAD_REQUEST")).toContain("empty");
  });

  const shapes: [string, unknown, string][] = [
    ["a body without statements", {}, '"statements"'],
    ["statements that are not an array", { statements: "INSERT INTO kv VALUES ('a', 'b')" }, '"statements"'],
    ["a statement object without sql", { statements: [{ params: ["a"] }] }, '"statements[0].sql"'],
    ["params that are not an array", { statements: [{ sql: "INSERT INTO kv VALUES (?, ?)", params: "a,b" }] }, '"statements[0].params"'],
    ["an unknown top-level field", { statements: ["SELECT 1"], consistency: "stale" }, '"consistency"'],
    ["an unknown field in a statement", { statements: [{ sql: "INSERT INTO kv VALUES (?, ?)", parms: ["a", "b"] }] }, '"statements[0].parms"'],
    ["a parameter that is an object", { statements: [{ sql: "INSERT INTO kv VALUES (?, ?)", params: ["a", { v: 1 }] }] }, '"statements[0].params[1]"'],
    ["a JSON array instead of an object", [{ sql: "SELECT 1" }], '"statements"'],
  ];
  for (const [what, body, field] of shapes) {
    it(`${what} is refused, naming ${field}`, async () => {
      const r = await postJson(`${node.clientUrl}/v1/execute`, body);
      expect(expectError(r, 400, "BAD_REQUEST")).toContain(field);
    });
  }
});

describe("SQL errors are 400 with SQLite's message, and a failing batch leaves no trace", () => {
  it("a syntax error returns SQLite's message", async () => {
    const r = await executeRaw(node.clientUrl, ["INSERT INTO kv VALUES ("]);
    expect(expectError(r, 400, "SQL_ERROR")).toMatch(/incomplete input|syntax error/);
  });

  it("a missing table returns SQLite's no such table message", async () => {
    const r = await executeRaw(node.clientUrl, ["INSERT INTO nowhere VALUES (1)"]);
    expect(expectError(r, 400, "SQL_ERROR")).toContain("no such table: nowhere");
  });

  it("a constraint violation returns SQLite's constraint message", async () => {
    await execute(node.clientUrl, [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: ["unique-1", "x"] }]);
    const r = await executeRaw(node.clientUrl, [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: ["unique-1", "y"] }]);
    expect(expectError(r, 400, "SQL_ERROR")).toContain("UNIQUE constraint failed: kv.k");
    expect(await query(node.clientUrl, "SELECT v FROM kv WHERE k = 'unique-1'")).toEqual([["x"]]);
  });

  it("a checked batch that fails, sent with a request_id, is remembered: a retry answers the same failure even once it would succeed", async () => {
    await execute(node.clientUrl, [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: ["rid-taken", "x"] }]);
    // Not plain (an expression): tried before the log.
    const body = { request_id: "rid-checked-fails", statements: [{ sql: "INSERT INTO kv (k, v) VALUES ('rid-taken', 'y' || 1)", params: [] }] };
    const first = await postJson(`${node.clientUrl}/v1/execute`, body);
    expect(expectError(first, 400, "SQL_ERROR")).toContain("UNIQUE constraint failed: kv.k");
    await execute(node.clientUrl, [{ sql: "DELETE FROM kv WHERE k = ?", params: ["rid-taken"] }]);
    const retry = await postJson(`${node.clientUrl}/v1/execute`, body);
    expect(expectError(retry, 400, "SQL_ERROR")).toContain("UNIQUE constraint failed: kv.k");
    expect(await countRows(node, "k = 'rid-taken'")).toBe(0);
  });

  it("a request_id used again for other statements is answered 422 REQUEST_ID_REUSED and applies nothing", async () => {
    const first = { request_id: "rid-reused", statements: [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: ["rid-reused", "x"] }] };
    expect((await postJson(`${node.clientUrl}/v1/execute`, first)).status).toBe(200);
    const other = await postJson(`${node.clientUrl}/v1/execute`, { request_id: "rid-reused", statements: ["DELETE FROM kv"] });
    expect(expectError(other, 422, "REQUEST_ID_REUSED")).toContain("used by another write");
    expect(await countRows(node, "k = 'rid-reused'")).toBe(1);
    expect((await postJson(`${node.clientUrl}/v1/execute`, first)).status).toBe(200);
  });

  it("a good statement before a failing one in the same batch is not applied", async () => {
    const r = await executeRaw(node.clientUrl, [
      { sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: ["batch-good", "1"] },
      "CREATE TABLE batch_side_effect (x)",
      { sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: ["batch-bad", null] },
    ]);
    const message = expectError(r, 400, "SQL_ERROR");
    expect(message).toContain("NOT NULL constraint failed: kv.v");
    expect(message).toContain("statement 2");
    expect(await countRows(node, "k LIKE 'batch-%'")).toBe(0);
    expect(await query(node.clientUrl, "SELECT name FROM sqlite_schema WHERE name = 'batch_side_effect'")).toEqual([]);
    // The node goes on: the same good statement alone succeeds.
    await execute(node.clientUrl, [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: ["batch-good", "1"] }]);
    expect(await countRows(node, "k LIKE 'batch-%'")).toBe(1);
  });
});

describe("statements that would make nodes differ are refused before they enter the log", () => {
  const refused: [string, string][] = [
    ["PRAGMA", "PRAGMA journal_mode = DELETE"],
    ["ATTACH", "ATTACH DATABASE '/tmp/other.db' AS other"],
    ["BEGIN", "BEGIN"],
    ["two statements in one string", "INSERT INTO kv VALUES ('multi-1', 'a'); INSERT INTO kv VALUES ('multi-2', 'b')"],
  ];
  for (const [what, sql] of refused) {
    it(`${what} is refused with 400 and nothing is applied`, async () => {
      const before = (await getJson<{ commit_index: number }>(`${node.clientUrl}/health`)).commit_index;
      const r = await executeRaw(node.clientUrl, [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: [`refused-${what}`, "x"] }, sql]);
      expectError(r, 400, "SQL_REFUSED");
      expect(await countRows(node, "k LIKE 'refused-%' OR k LIKE 'multi-%'")).toBe(0);
      // Refused before proposing: the log did not grow.
      expect((await getJson<{ commit_index: number }>(`${node.clientUrl}/health`)).commit_index).toBe(before);
    });
  }

  it("POST /v1/query with a write statement is refused with 400 and writes nothing", async () => {
    const r = await queryRaw(node.clientUrl, "INSERT INTO kv (k, v) VALUES ('via-query', 'x')");
    expect(expectError(r, 400, "SQL_REFUSED")).toContain("/v1/execute");
    expect(await countRows(node, "k = 'via-query'")).toBe(0);
  });

  it("POST /v1/execute with a read is refused with 400 naming /v1/query, and nothing of the batch is applied; FTS4's SELECT optimize() is a write", async () => {
    const before = (await getJson<{ commit_index: number }>(`${node.clientUrl}/health`)).commit_index;
    const r = await executeRaw(node.clientUrl, [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: ["read-in-write", "x"] }, "SELECT * FROM kv"]);
    expect(expectError(r, 400, "SQL_REFUSED")).toContain("SELECT is not a write: POST /v1/execute answers no rows");
    expect(await countRows(node, "k = 'read-in-write'")).toBe(0);
    expect((await getJson<{ commit_index: number }>(`${node.clientUrl}/health`)).commit_index).toBe(before);
    await execute(node.clientUrl, ["CREATE VIRTUAL TABLE f4 USING fts4 (body)", "INSERT INTO f4 (body) VALUES ('one')", "INSERT INTO f4 (body) VALUES ('two')"]);
    await execute(node.clientUrl, ["SELECT optimize(f4) FROM f4 LIMIT 1"]);
    // A virtual table makes every later write checked before the log, which changes how the
    // tests after this one pipeline: gone again.
    await execute(node.clientUrl, ["DROP TABLE f4"]);
  });

  it("POST /v1/query with a bad shape is refused, naming the field", async () => {
    expect(expectError(await postJson(`${node.clientUrl}/v1/query`, {}), 400, "BAD_REQUEST")).toContain('"sql"');
    expect(expectError(await postJson(`${node.clientUrl}/v1/query`, { sql: "SELECT 1", consistency: "eventual" }), 400, "BAD_REQUEST")).toContain('"consistency"');
    expect(expectError(await postJson(`${node.clientUrl}/v1/query`, { sql: "SELECT 1", limit: 1 }), 400, "BAD_REQUEST")).toContain('"limit"');
  });
});

describe("limits and routes", () => {
  it("a body just over the 16 MiB limit gets 413 as JSON, naming the limit", async () => {
    const filler = "x".repeat(16 * MIB);
    const body = JSON.stringify({ statements: [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: ["too-big", filler] }] });
    const r = await request(`${node.clientUrl}/v1/execute`, { method: "POST", body });
    expect(expectError(r, 413, "BODY_TOO_LARGE")).toContain(String(16 * MIB));
    expect(await countRows(node, "k = 'too-big'")).toBe(0);
  }, 30_000);

  it("a 17 MiB body gets 413 as JSON", async () => {
    const filler = "x".repeat(17 * MIB);
    const body = JSON.stringify({ statements: [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: ["too-big", filler] }] });
    expect(body.length).toBeGreaterThan(17 * MIB);
    const r = await request(`${node.clientUrl}/v1/execute`, { method: "POST", body });
    expect(expectError(r, 413, "BODY_TOO_LARGE")).toContain(String(16 * MIB));
    expect(await countRows(node, "k = 'too-big'")).toBe(0);
  }, 30_000);

  it("a compressed body gets 415 as JSON naming the encoding, and nothing is applied", async () => {
    // It was read as JSON: refused for what it is not, or taken if it happened to be JSON.
    const body = JSON.stringify({ statements: [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: ["gzipped", "x"] }] });
    const r = await request(`${node.clientUrl}/v1/execute`, { method: "POST", body, headers: { "content-encoding": "gzip" } });
    expect(expectError(r, 415, "UNSUPPORTED_MEDIA_TYPE")).toContain('Content-Encoding "gzip"');
    expect(await countRows(node, "k = 'gzipped'")).toBe(0);
  });

  it("an unknown route gets 404 as JSON on both ports", async () => {
    for (const base of [node.clientUrl, node.adminUrl]) {
      const r = await request(`${base}/v2/nothing-here`);
      expect(expectError(r, 404, "NOT_FOUND")).toContain("/v2/nothing-here");
    }
  });
});

/** One HTTP/1.1 response parsed off a raw connection. */
interface RawResponse {
  status: number;
  body: string;
}

/**
 * Writes `bytes` in one write on a fresh TCP connection to `baseUrl` and collects the
 * responses until `count` have arrived (or with `untilClose`, until the server closes), the
 * server closes, or `deadlineMs` passes.
 */
async function rawExchange(baseUrl: string, bytes: string, count: number, deadlineMs: number, untilClose = false): Promise<{ responses: RawResponse[]; closed: boolean }> {
  const url = new URL(baseUrl);
  let received = Buffer.alloc(0);
  let closed = false;
  const socket = await Bun.connect({
    hostname: url.hostname,
    port: Number(url.port),
    socket: {
      data: (_s, chunk) => {
        received = Buffer.concat([received, chunk]);
      },
      close: () => {
        closed = true;
      },
    },
  });
  socket.write(bytes);
  const parse = (): RawResponse[] => {
    const out: RawResponse[] = [];
    let offset = 0;
    for (;;) {
      const headEnd = received.indexOf("\r\n\r\n", offset);
      if (headEnd < 0) return out;
      const head = received.subarray(offset, headEnd).toString("latin1");
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? "0");
      if (received.length < headEnd + 4 + length) return out;
      out.push({ status: Number(head.split(" ")[1]), body: received.subarray(headEnd + 4, headEnd + 4 + length).toString("utf8") });
      offset = headEnd + 4 + length;
    }
  };
  const enough = (): boolean => (untilClose ? closed : parse().length >= count || closed);
  await waitFor(untilClose ? "the server to close" : `${count} responses or a close`, enough, { deadlineMs }).catch(() => undefined);
  socket.end();
  return { responses: parse(), closed };
}

function rawPost(path: string, body: string): string {
  return `POST ${path} HTTP/1.1\r\nHost: svc\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

describe("HTTP/1.1 on the client port", () => {
  it("two POST /v1/execute pipelined in one TCP write both get their answers, in order", async () => {
    const first = JSON.stringify({ statements: [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: ["pipelined-1", "a"] }] });
    const second = JSON.stringify({ statements: [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: ["pipelined-2", "b"] }] });
    const { responses } = await rawExchange(node.clientUrl, rawPost("/v1/execute", first) + rawPost("/v1/execute", second), 2, 10_000);
    expect(responses.map((r) => r.status)).toEqual([200, 200]);
    const indexes = responses.map((r) => (JSON.parse(r.body) as { index: number }).index);
    expect(indexes[1]).toBeGreaterThan(indexes[0] ?? Infinity);
    expect(await countRows(node, "k IN ('pipelined-1', 'pipelined-2')")).toBe(2);
  });

  it("a pipelined read behind a write is answered after it, seeing it", async () => {
    const write = JSON.stringify({ statements: [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: ["pipelined-3", "c"] }] });
    const read = JSON.stringify({ sql: "SELECT v FROM kv WHERE k = ?", params: ["pipelined-3"] });
    const { responses } = await rawExchange(node.clientUrl, rawPost("/v1/execute", write) + rawPost("/v1/query", read), 2, 10_000);
    expect(responses.map((r) => r.status)).toEqual([200, 200]);
    expect(responses[1]?.body).toContain('"rows":[["c"]]');
  });

  it("a body that stops short of its Content-Length is answered 408 and closed, and nothing is written", async () => {
    const head = "POST /v1/execute HTTP/1.1\r\nHost: svc\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n";
    const partial = '{"statements": ["INSERT INTO kv (k, v) VALUES (\'short-body\', \'x\')"]}';
    const { responses, closed } = await rawExchange(node.clientUrl, head + partial, 1, 15_000, true);
    expect(responses.map((r) => r.status)).toEqual([408]);
    expect(JSON.parse(responses[0]?.body ?? "{}").error.code).toBe("REQUEST_TIMEOUT");
    expect(closed).toBe(true);
    expect(await countRows(node, "k = 'short-body'")).toBe(0);
  }, 30_000);
});

describe("a request the HTTP parser refuses", () => {
  it("gets a JSON body with a code on both ports (not a bare status line), its connection closed, and nothing written", async () => {
    const write = JSON.stringify({ statements: ["INSERT INTO kv (k, v) VALUES ('unparsed', 'x')"] });
    const cases: [string, string, number, string][] = [
      ["Content-Length and Transfer-Encoding together",
        `POST /v1/execute HTTP/1.1\r\nHost: svc\r\nContent-Type: application/json\r\nContent-Length: ${write.length}\r\nTransfer-Encoding: chunked\r\n\r\n${write}`, 400, "BAD_REQUEST"],
      ["a Content-Length that is no number", `POST /v1/execute HTTP/1.1\r\nHost: svc\r\nContent-Length: abc\r\n\r\n${write}`, 400, "BAD_REQUEST"],
      ["no HTTP at all", "GARBAGE\r\n\r\n", 400, "BAD_REQUEST"],
      ["headers past the limit", `GET /health HTTP/1.1\r\nHost: svc\r\nX-Padding: ${"a".repeat(20_000)}\r\n\r\n`, 431, "HEADERS_TOO_LARGE"],
    ];
    for (const base of [node.clientUrl, node.adminUrl]) {
      for (const [what, bytes, status, code] of cases) {
        const { responses, closed } = await rawExchange(base, bytes, 1, 10_000, true);
        expect({ what, statuses: responses.map((r) => r.status), closed }).toEqual({ what, statuses: [status], closed: true });
        const body = JSON.parse(responses[0]?.body ?? "{}") as { error?: { code?: string; message?: string; hint?: string } };
        expect({ what, code: body.error?.code }).toEqual({ what, code });
        expect(body.error?.message).toBeTruthy();
        expect(body.error?.hint).toBeTruthy();
      }
    }
    expect(await countRows(node, "k = 'unparsed'")).toBe(0);
  }, 60_000);
});

describe("a node that waits for the leader's snapshot", () => {
  procTest("answers a stale read 503 RECOVERING rather than a misleading \"no such table\"; an operator's stale read on the admin port is served", async (penv) => {
    // A member that joins no running cluster (its only peer is not up): it waits for a snapshot.
    const [, lone] = await penv.cluster(2);
    lone!.spawn();
    await waitFor("node2 to wait for a snapshot", async () =>
      ((await fetch(`${lone!.adminUrl}/health`).then((h) => h.json(), () => null)) as { recovery?: string } | null)?.recovery === "requesting_snapshot");
    const r = await queryRaw(lone!.clientUrl, "SELECT count(*) FROM kv", [], "stale");
    expect(expectError(r, 503, "RECOVERING")).toContain("requesting_snapshot");
    const admin = await postJson(`${lone!.adminUrl}/admin/query`, { sql: "SELECT 1", consistency: "stale" });
    expect(admin.status).toBe(200);
  });
});

describe("pause-writes and resume-writes", () => {
  it("a lease that is not whole milliseconds in digits is refused, changing nothing", async () => {
    for (const lease of ["1e3", "0x3e8", "1000.0", "999", "-5000"]) {
      const r = await request(`${node.adminUrl}/admin/pause-writes?lease_ms=${encodeURIComponent(lease)}`, { method: "POST" });
      expect({ lease, status: r.status }).toEqual({ lease, status: 400 });
    }
    expect((await getJson<{ writes_paused: boolean }>(`${node.clientUrl}/health`)).writes_paused).toBe(false);
    // A lease in the body was ignored, and the pause had no end: refused, naming where it goes.
    const inBody = await postJson(`${node.adminUrl}/admin/pause-writes`, { lease_ms: 60_000 });
    expect(expectError(inBody, 400, "BAD_REQUEST")).toContain("pause-writes reads nothing from its body");
    expect((await getJson<{ writes_paused: boolean }>(`${node.clientUrl}/health`)).writes_paused).toBe(false);
  });

  it("writes get 503 WRITES_PAUSED while paused, reads go on, and resume-writes lets writes through again", async () => {
    const pause = await runBinary(["admin", "pause-writes", "--node", node.adminUrl]);
    expect({ exitCode: pause.exitCode, stderr: pause.stderr }).toEqual({ exitCode: 0, stderr: "" });
    try {
      const r = await executeRaw(node.clientUrl, [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: ["paused-1", "x"] }]);
      expect(expectError(r, 503, "WRITES_PAUSED")).toContain("paused");
      expect(r.headers.get("retry-after")).not.toBeNull();
      expect(await countRows(node, "k = 'paused-1'")).toBe(0);
      expect((await getJson<{ writes_paused: boolean }>(`${node.clientUrl}/health`)).writes_paused).toBe(true);
      // A pause with no end is a problem cluster-status names: a forgotten one refuses every write.
      const status = await runBinary(["admin", "cluster-status", "--node", node.adminUrl]);
      expect(status.stdout).toContain("PROBLEM: writes are paused with no end set");
      expect(status.stdout).toContain("svc admin resume-writes");
      expect({ exitCode: status.exitCode, stderr: status.stderr }).toEqual({ exitCode: 1, stderr: "" });
    } finally {
      const resume = await runBinary(["admin", "resume-writes", "--node", node.adminUrl]);
      expect({ exitCode: resume.exitCode, stderr: resume.stderr }).toEqual({ exitCode: 0, stderr: "" });
    }
    await execute(node.clientUrl, [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: ["paused-1", "x"] }]);
    expect(await countRows(node, "k = 'paused-1'")).toBe(1);
    const after = await runBinary(["admin", "cluster-status", "--node", node.adminUrl]);
    expect(after.stdout).not.toContain("paused");
    // On failure, what it printed says which problem it saw.
    expect({ exitCode: after.exitCode, stdout: after.stdout, stderr: after.stderr }).toEqual({ exitCode: 0, stdout: expect.any(String), stderr: "" });
    // A lease outside what a pause takes is the command line's mistake: exit 2, naming the flag.
    for (const lease of ["0s", "2d"]) {
      const refused = await runBinary(["admin", "pause-writes", "--lease", lease, "--node", node.adminUrl]);
      expect({ lease, exitCode: refused.exitCode }).toEqual({ lease, exitCode: 2 });
      expect(refused.stderr).toContain(`--lease: ${lease} is outside 1s to 24h`);
    }
    // One with a lease ends by itself: shown, not a problem.
    const leasedPause = await runBinary(["admin", "pause-writes", "--lease", "60s", "--node", node.adminUrl]);
    expect({ exitCode: leasedPause.exitCode, stderr: leasedPause.stderr }).toEqual({ exitCode: 0, stderr: "" });
    try {
      const leased = await runBinary(["admin", "cluster-status", "--node", node.adminUrl]);
      expect(leased.stdout).toMatch(/writes paused until \d{4}-\d\d-\d\dT/);
      expect({ exitCode: leased.exitCode, stdout: leased.stdout, stderr: leased.stderr }).toEqual({ exitCode: 0, stdout: expect.any(String), stderr: "" });
    } finally {
      const resumed = await runBinary(["admin", "resume-writes", "--node", node.adminUrl]);
      expect({ exitCode: resumed.exitCode, stderr: resumed.stderr }).toEqual({ exitCode: 0, stderr: "" });
    }
  });
});

describe("the write pause is replicated state", () => {
  procTest("writes stay paused across a kill -9 and restart until resume-writes", async (env) => {
    const paused = await env.startSingleNode();
    await execute(paused.clientUrl, [kvSchema]);
    expect((await runBinary(["admin", "pause-writes", "--node", paused.adminUrl])).exitCode).toBe(0);
    await paused.kill9();
    await paused.start();
    const r = await executeRaw(paused.clientUrl, [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: ["after-restart", "x"] }]);
    expectError(r, 503, "WRITES_PAUSED");
    expect((await runBinary(["admin", "resume-writes", "--node", paused.adminUrl])).exitCode).toBe(0);
    await execute(paused.clientUrl, [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: ["after-restart", "x"] }]);
    expect(await query(paused.clientUrl, "SELECT k FROM kv")).toEqual([["after-restart"]]);
  });
});

describe("metrics and snapshots on the admin port", () => {
  it("/metrics has commit and applied index, snapshot, latency, throughput and memory metrics as `name value` lines", async () => {
    await execute(node.clientUrl, [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: ["metrics-1", "x"] }]);
    const r = await request(`${node.adminUrl}/metrics`);
    expect(r.status).toBe(200);
    const plain = new Map<string, number>();
    for (const line of r.text.split("\n")) {
      const m = /^([a-z_:][a-z0-9_:]*) (-?[0-9.]+(?:e[+-]?\d+)?|NaN|[+-]Inf)$/i.exec(line);
      if (m !== null) plain.set(m[1] ?? "", Number(m[2]));
    }
    expect(plain.get("tensor_chain_commit_index")).toBeGreaterThan(0);
    expect(plain.get("tensor_chain_applied_index")).toBe(plain.get("tensor_chain_commit_index"));
    const names = [...plain.keys()];
    for (const fragment of ["snapshot", "latency", "throughput", "memory"]) {
      expect({ fragment, found: names.filter((n) => n.includes(fragment)).length > 0 }).toEqual({ fragment, found: true });
    }
  });

  it("POST /admin/snapshot starts a snapshot whose completion shows in tensor_chain_snapshots_total", async () => {
    const before = await fetchMetrics(node.adminUrl);
    const snapshotsBefore = before.get("tensor_chain_snapshots_total") ?? 0;
    await execute(node.clientUrl, [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: ["snapshot-1", "x"] }]);
    const r = await request(`${node.adminUrl}/admin/snapshot`, { method: "POST" });
    expect(r.status).toBe(202);
    const after = await waitFor("tensor_chain_snapshots_total to increase", async () => {
      const m = await fetchMetrics(node.adminUrl);
      return (m.get("tensor_chain_snapshots_total") ?? 0) > snapshotsBefore ? m : undefined;
    });
    expect(after.get("tensor_chain_snapshot_in_progress")).toBe(0);
    expect(after.get("tensor_chain_snapshot_index")).toBeGreaterThan(before.get("tensor_chain_snapshot_index") ?? 0);
    expect(after.get("tensor_chain_snapshot_last_completed_timestamp_seconds")).toBeGreaterThan(0);

    // ?wait=true answers when the snapshot is done, with where it is.
    await execute(node.clientUrl, [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: ["snapshot-2", "x"] }]);
    const done = await postJson<{ status: string; index: number; dir: string }>(`${node.adminUrl}/admin/snapshot?wait=true`, undefined);
    expect(done.status).toBe(200);
    expect(done.body?.status).toBe("done");
    expect(fs.existsSync(join(done.body?.dir ?? "/nonexistent", "meta.json"))).toBe(true);
    // With nothing applied since, the newest image is the answer, and the request still shows
    // as completed: an operator waiting on the metrics (SPEC §4.4 step 2) would wait for ever.
    const totalBefore = (await fetchMetrics(node.adminUrl)).get("tensor_chain_snapshots_total") ?? 0;
    const again = await request(`${node.adminUrl}/admin/snapshot`, { method: "POST" });
    expect(again.status).toBe(202);
    await waitFor("tensor_chain_snapshots_total to count a snapshot with nothing new", async () => {
      const m = await fetchMetrics(node.adminUrl);
      return (m.get("tensor_chain_snapshots_total") ?? 0) > totalBefore ? m : undefined;
    });
    const same = await postJson<{ status: string; index: number; dir: string }>(`${node.adminUrl}/admin/snapshot?wait=true`, undefined);
    expect({ status: same.body?.status, index: same.body?.index, dir: same.body?.dir }).toEqual({ status: "done", index: done.body?.index, dir: done.body?.dir });
    // A yes/no parameter that is neither is refused, not read as no.
    const unclear = await postJson<{ error: { code: string; message: string } }>(`${node.adminUrl}/admin/snapshot?wait=maybe`, undefined);
    expect(unclear.status).toBe(400);
    expect(unclear.body?.error.code).toBe("BAD_REQUEST");
    expect(unclear.body?.error.message).toContain("?wait=maybe");
  });

  it("svc admin verify-checksums exits 0 on a healthy node", async () => {
    const r = await runBinary(["admin", "verify-checksums", "--node", node.adminUrl]);
    expect(r.stdout).toContain("all checks passed");
    expect(r.exitCode).toBe(0);
  });

  it("svc admin verify-checksums --data-dir refuses a data directory a running node holds", async () => {
    const r = await runBinary(["admin", "verify-checksums", "--data-dir", node.dataDir]);
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain("in use by another svc process");
    expect(r.stderr).toContain("stop the node first");
    expect((await request(`${node.clientUrl}/health`)).status).toBe(200);
  });

  it("svc admin snapshot takes a snapshot and prints where it is", async () => {
    await execute(node.clientUrl, [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: ["cli-snapshot", "x"] }]);
    const r = await runBinary(["admin", "snapshot", "--node", node.adminUrl, "--json"]);
    expect(r.exitCode).toBe(0);
    const out = JSON.parse(r.stdout) as { status: string; index: number; dir: string };
    expect(out.status).toBe("done");
    const applied = (await getJson<{ applied_index: number }>(`${node.clientUrl}/health`)).applied_index;
    expect(out.index).toBe(applied);
    expect(fs.existsSync(join(out.dir, "meta.json"))).toBe(true);
  });

  it("svc admin query prints the rows of a read", async () => {
    await execute(node.clientUrl, [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: ["cli-query", "seen by the CLI"] }]);
    const r = await runBinary(["admin", "query", "SELECT v FROM kv WHERE k = 'cli-query'", "--node", node.adminUrl]);
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toContain("seen by the CLI");
    expect(r.stdout).toContain("(1 row)");
    const refused = await runBinary(["admin", "query", "DELETE FROM kv", "--node", node.adminUrl]);
    expect(refused.exitCode).toBe(1);
    expect(refused.stderr).toContain("SQL_REFUSED");
  });
});

describe("64-bit integers", () => {
  it("go in as parameters and come back from reads, last_insert_id and svc admin query with every digit", async () => {
    const post = (path: string, body: string) => request(`${node.clientUrl}${path}`, { method: "POST", body });
    const created = await post("/v1/execute", '{"statements":["CREATE TABLE wide (k INTEGER PRIMARY KEY, v INTEGER)"]}');
    expect(created.status).toBe(200);
    const inserted = await post("/v1/execute", '{"statements":[{"sql":"INSERT INTO wide (k, v) VALUES (?, ?)","params":[9007199254740993,-9223372036854775808]}]}');
    expect(inserted.status).toBe(200);
    expect(inserted.text).toContain('"last_insert_id":9007199254740993');
    const read = await post("/v1/query", '{"sql":"SELECT k, v, typeof(v) FROM wide WHERE v = ?","params":[-9223372036854775808]}');
    expect(read.status).toBe(200);
    expect(read.text).toContain('"rows":[[9007199254740993,-9223372036854775808,"integer"]]');
    const cli = await runBinary(["admin", "query", "SELECT k FROM wide", "--node", node.adminUrl]);
    expect(cli.exitCode).toBe(0);
    expect(cli.stdout).toContain("9007199254740993");
  });
});

describe("a value is refused, never changed: 400 naming the parameter, and nothing enters the log", () => {
  const post = (path: string, body: string | Uint8Array) => request(`${node.clientUrl}${path}`, { method: "POST", body });
  const insertWith = (param: string) => `{"statements":[{"sql":"INSERT INTO kv (k, v) VALUES ('refused', ?)","params":[${param}]}]}`;

  for (const literal of ["9223372036854775808", "-9223372036854775809", "123456789012345678901234567890"]) {
    it(`an integer parameter outside 64 bits (${literal}) is refused, naming its index`, async () => {
      const r = await post("/v1/execute", insertWith(literal));
      expect(expectError(r, 400, "BAD_REQUEST")).toContain('"statements[0].params[0]"');
      const q = await post("/v1/query", `{"sql":"SELECT typeof(?)","params":[${literal}]}`);
      expect(expectError(q, 400, "BAD_REQUEST")).toContain('"params[0]"');
      expect(await countRows(node, "k = 'refused'")).toBe(0);
    });
  }

  it("a string parameter with a lone surrogate is refused, naming its index", async () => {
    const r = await post("/v1/execute", insertWith('"a\\ud800b"'));
    expect(expectError(r, 400, "BAD_REQUEST")).toContain('"statements[0].params[0]"');
    const q = await post("/v1/query", '{"sql":"SELECT ?","params":["\\udc00"]}');
    expect(expectError(q, 400, "BAD_REQUEST")).toContain('"params[0]"');
    expect(await countRows(node, "k = 'refused'")).toBe(0);
  });

  it("SQL with a lone surrogate is refused", async () => {
    const r = await post("/v1/execute", '{"statements":["INSERT INTO kv (k, v) VALUES (\'refused\', \'\\ud800\')"]}');
    expect(expectError(r, 400, "BAD_REQUEST")).toContain('"statements[0]"');
    const q = await post("/v1/query", '{"sql":"SELECT \'\\ud800\'"}');
    expect(expectError(q, 400, "BAD_REQUEST")).toContain('"sql"');
    expect(await countRows(node, "k = 'refused'")).toBe(0);
  });

  it("a paired surrogate escape goes in and comes back as the character", async () => {
    const r = await post("/v1/execute", '{"statements":[{"sql":"INSERT INTO kv (k, v) VALUES (?, ?)","params":["emoji","\\ud83d\\ude00"]}]}');
    expect(r.status).toBe(200);
    expect(await query(node.clientUrl, "SELECT v FROM kv WHERE k = 'emoji'")).toEqual([["\u{1F600}"]]);
  });

  it("a statement with placeholders and no params is refused like one with too few, naming the statement", async () => {
    const none = await post("/v1/execute", '{"statements":["INSERT INTO kv (k, v) VALUES (\'refused\', ?)"]}');
    expect(expectError(none, 400, "BAD_REQUEST")).toContain('"statements[0]" binds 1 parameter');
    const missing = await post("/v1/execute", '{"statements":[{"sql":"INSERT INTO kv (k, v) VALUES (?, ?)"}]}');
    expect(expectError(missing, 400, "BAD_REQUEST")).toContain('"statements[0]" binds 2 parameters');
    const short = await post("/v1/execute", '{"statements":["DELETE FROM kv WHERE 0",{"sql":"INSERT INTO kv (k, v) VALUES (?, ?)","params":["refused"]}]}');
    expect(expectError(short, 400, "BAD_REQUEST")).toContain('"statements[1]" binds 2 parameters');
    const extra = await post("/v1/execute", '{"statements":[{"sql":"INSERT INTO kv (k, v) VALUES (?, 1)","params":["refused", 2]}]}');
    expect(expectError(extra, 400, "BAD_REQUEST")).toContain('"statements[0]" binds 1 parameter');
    const read = await post("/v1/query", '{"sql":"SELECT v FROM kv WHERE k = ?"}');
    expect(expectError(read, 400, "BAD_REQUEST")).toContain('"sql" binds 1 parameter');
    expect(await countRows(node, "k = 'refused'")).toBe(0);
  });

  it("a body that is not UTF-8 is refused", async () => {
    const text = '{"statements":[{"sql":"INSERT INTO kv (k, v) VALUES (?, ?)","params":["refused","X"]}]}';
    const bytes = new TextEncoder().encode(text);
    bytes[bytes.indexOf("X".charCodeAt(0))] = 0xff;
    const r = await post("/v1/execute", bytes);
    expect(expectError(r, 400, "BAD_REQUEST")).toContain("UTF-8");
    expect(await countRows(node, "k = 'refused'")).toBe(0);
  });
});

/**
 * Where the records of a WAL segment are (u32 length | u32 crc | u8 type | payload each),
 * up to the zero-filled space a segment is preallocated with.
 */
function walRecords(buf: Uint8Array): { offset: number; end: number }[] {
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const records: { offset: number; end: number }[] = [];
  for (let offset = 0; offset + 9 <= buf.length;) {
    if (buf.subarray(offset, offset + 9).every((b) => b === 0)) break;
    const end = offset + 9 + view.getUint32(offset, true);
    records.push({ offset, end });
    offset = end;
  }
  return records;
}

describe("a WAL damaged in the middle of a segment", () => {
  procTest("is reported offline by verify-checksums --data-dir, and the node refuses to start on it, naming file, offset and wal-repair", async (env) => {
    const damaged = await env.startSingleNode();
    await execute(damaged.clientUrl, [kvSchema]);
    for (let i = 0; i < 40; i++) {
      await execute(damaged.clientUrl, [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: [`row-${i}`, "v".repeat(100)] }]);
    }
    expect(await damaged.stop()).toBe(0);
    const clean = await runBinary(["admin", "verify-checksums", "--data-dir", damaged.dataDir]);
    expect(clean.stdout).toContain("all checks passed");
    expect(clean.exitCode).toBe(0);

    const walDir = join(damaged.dataDir, "raft", "wal");
    const segments = fs.readdirSync(walDir).filter((n) => n.endsWith(".wal")).sort();
    expect(segments.length).toBeGreaterThan(0);
    const segment = join(walDir, segments[segments.length - 1] ?? "");
    const bytes = new Uint8Array(fs.readFileSync(segment));
    const records = walRecords(bytes);
    const recordsEnd = records.at(-1)?.end ?? 0;
    expect(records.length).toBeGreaterThan(20);
    expect(bytes.subarray(recordsEnd).every((b) => b === 0)).toBe(true);
    // The first record that starts past the middle, with valid records after it: damage, not a torn tail.
    const target = records.find((r) => r.offset >= recordsEnd / 2);
    expect(target).toBeDefined();
    expect(target === records.at(-1)).toBe(false);
    const flipAt = (target?.offset ?? 0) + 9 + 30;
    bytes[flipAt] = (bytes[flipAt] ?? 0) ^ 0x04;
    fs.writeFileSync(segment, bytes);

    const verify = await runBinary(["admin", "verify-checksums", "--data-dir", damaged.dataDir]);
    expect(verify.exitCode).toBe(1);
    const badLine = verify.stdout.split("\n").find((l) => l.startsWith("BAD"));
    expect(badLine).toContain(segment);
    expect(badLine).toContain(`byte offset ${target?.offset}`);

    const start = await runBinary(["serve", "--config", damaged.configPath], { cwd: env.dir });
    expect(start.exitCode).not.toBe(0);
    expect(start.stderr).toContain(segment);
    expect(start.stderr).toContain(`byte offset ${target?.offset}`);
    expect(start.stderr).toContain("wal-repair --skip-corrupted");
    // Refusing to start must not "repair" anything on its own.
    expect(new Uint8Array(fs.readFileSync(segment))).toEqual(bytes);
  });
});
