// Runaway statements against the compiled binary, over HTTP: an endless read does not stop the
// node from answering /health, reads and writes; it stops when its client disconnects (its SQL
// process is killed) or at query_timeout_ms; SIGTERM stops the node while one runs; an endless
// write is refused before the log, and the node restarts and replays its log afterwards.

import * as fs from "node:fs";
import { describe, expect } from "bun:test";
import { execute, executeRaw, getJson, postJson, procTest, query, useCompiledBinary, useProcessCleanup, waitFor } from "../lib/proc.ts";

useProcessCleanup();
useCompiledBinary();

const endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";

/** The node's child processes (its SQL processes). */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const task of fs.readdirSync(`/proc/${pid}/task`)) {
    const text = fs.readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").trim();
    if (text !== "") out.push(...text.split(/\s+/).map(Number));
  }
  return out;
}

const alive = (pid: number): boolean => fs.existsSync(`/proc/${pid}`);

describe("runaway statements", () => {
  procTest("an endless read leaves the node serving others, and stops when its client goes away", async (env) => {
    const node = await env.startSingleNode({ limits: { queryTimeoutMs: 120_000 } });
    await execute(node.clientUrl, ["CREATE TABLE t (a)"]);
    const pid = node.pid as number;
    const before = new Set(childrenOf(pid));
    const client = new AbortController();
    const runaway = fetch(`${node.clientUrl}/v1/query`, { method: "POST", body: JSON.stringify({ sql: endless }), signal: client.signal }).catch(() => "aborted");
    // The read's process is the child that was not there before.
    const reader = await waitFor("the read's SQL process", () => childrenOf(pid).find((c) => !before.has(c)) ?? false);
    expect((await getJson(`${node.adminUrl}/health`)).status).toBe("ok");
    await execute(node.clientUrl, [{ sql: "INSERT INTO t VALUES (?)", params: [1] }]);
    expect(await query(node.clientUrl, "SELECT a FROM t")).toEqual([[1]]);
    client.abort();
    expect(await runaway).toBe("aborted");
    await waitFor("the read's SQL process to be killed", () => !alive(reader));
  });

  procTest("an endless read is stopped at query_timeout_ms; SIGTERM stops the node while one runs", async (env) => {
    const node = await env.startSingleNode({ limits: { queryTimeoutMs: 500 } });
    const timedOut = await postJson<{ error: { code: string } }>(`${node.clientUrl}/v1/query`, { sql: endless });
    expect(timedOut.status).toBe(400);
    expect(timedOut.body?.error.code).toBe("QUERY_TIMEOUT");
    const pid = node.pid as number;
    const pending = postJson(`${node.clientUrl}/v1/query`, { sql: endless }, 30_000).catch(() => null);
    await waitFor("a SQL process", () => childrenOf(pid).length > 0);
    const children = childrenOf(pid);
    expect(await node.stop(10_000)).toBe(0);
    await pending;
    for (const c of children) await waitFor(`SQL process ${c} to exit with the node`, () => !alive(c));
  });

  procTest("an endless write is refused before the log, and the node restarts and replays its log", async (env) => {
    const node = await env.startSingleNode();
    await execute(node.clientUrl, [
      "CREATE TABLE t (a)",
      "CREATE VIEW forever AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c",
    ]);
    for (const sql of [
      "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) INSERT INTO t SELECT count(*) FROM c",
      "INSERT INTO t SELECT count(*) FROM forever",
    ]) {
      const refused = await executeRaw(node.clientUrl, [sql]);
      expect(refused.status).toBe(400);
      expect(refused.body?.error?.code).toBe("WRITE_TOO_EXPENSIVE");
    }
    await execute(node.clientUrl, [{ sql: "INSERT INTO t VALUES (?)", params: [7] }]);
    await node.kill9();
    await node.start();
    expect(await query(node.clientUrl, "SELECT a FROM t")).toEqual([[7]]);
  });

  procTest("a plain-looking insert into a table whose generated column is costly is tried before the log, and a schema using zeroblob() leaves every table readable", async (env) => {
    const node = await env.startSingleNode();
    // Costly per row (about half a second here): no INSERT … VALUES into it is plain any more.
    await execute(node.clientUrl, [
      "CREATE TABLE t (a)",
      "CREATE TABLE g (id INTEGER PRIMARY KEY, n INTEGER AS (length(replace(replace(hex(zeroblob(4000000 + id)), '0', '00'), '0', '00'))) STORED)",
    ]);
    const rows = Array.from({ length: 40 }, (_, i) => `(${i + 1})`).join(", ");
    const costly = await executeRaw(node.clientUrl, [`INSERT INTO g (id) VALUES ${rows}`], 15_000);
    // Refused where it was tried, never applied on the node's thread.
    expect(costly.status).toBe(400);
    expect(costly.body?.error?.code).toBe("WRITE_TOO_EXPENSIVE");
    expect((await getJson(`${node.adminUrl}/health`)).status).toBe("ok");
    await execute(node.clientUrl, [
      "CREATE TABLE z (id INTEGER PRIMARY KEY, b BLOB GENERATED ALWAYS AS (zeroblob(id)) STORED)",
      { sql: "INSERT INTO z (id) VALUES (?)", params: [3] },
      "CREATE TABLE w (x)",
    ]);
    expect(await query(node.clientUrl, "SELECT count(*) FROM t")).toEqual([[0]]);
    expect(await query(node.clientUrl, "SELECT length(b) FROM z")).toEqual([[3]]);
  });
});
