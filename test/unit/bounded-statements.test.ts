// Every statement is bounded: a read stops at its time limit or when its client goes away,
// and the node serves others meanwhile; a result is bounded by size and refused, never cut;
// a write that would not finish is refused before it reaches the log, whatever shape hides
// the cost (a view, a trigger, a join of large tables), so no replica ever applies it and a
// node restarts and replays its log as usual. The node runs in this process, on real files.

import { afterEach, describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseConfig, renderConfigToml, type Config } from "../../src/config/index.ts";
import { SvcNode } from "../../src/node/index.ts";
import type { Statement } from "../../src/store/index.ts";
import { silentLogger } from "../../src/util/index.ts";
import { freePort } from "../lib/proc-ports.ts";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function testConfig(maxMemoryMb = 128): Promise<Config> {
  const dir = fs.mkdtempSync(join(tmpdir(), "svc-bounded-"));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  const peer = `127.0.0.1:${await freePort()}`;
  const text = renderConfigToml({
    nodeId: "n1",
    dataDir: join(dir, "data"),
    // Result limit: a thirty-second of this (4 MiB at 128); a SQL process may grow to an eighth
    // (at least 56 MiB). From 512 MB a node keeps two reader processes, below it one.
    maxMemoryBytes: maxMemoryMb * 1024 * 1024,
    listen: { client: "127.0.0.1:1", admin: "127.0.0.1:2", peer },
    cluster: { bootstrap: true, members: [{ id: "n1", peer, client: "127.0.0.1:1", admin: "127.0.0.1:2" }] },
    limits: { queryTimeoutMs: 700, adminQueryTimeoutMs: 1500, writeCheckTimeoutMs: 700 },
  });
  const result = parseConfig(text, "test.toml");
  if (!result.ok) throw new Error(JSON.stringify(result.problems));
  return result.config;
}

async function startNode(config: Config): Promise<SvcNode> {
  const node = await SvcNode.start(config, silentLogger);
  cleanups.push(() => node.stop());
  const deadline = Date.now() + 20_000;
  while (node.recoveryState !== "healthy" || node.status().role !== "leader") {
    if (Date.now() > deadline) throw new Error(`node stuck in ${node.recoveryState}`);
    await Bun.sleep(5);
  }
  return node;
}

const sql = (...texts: string[]): Statement[] => texts.map((t) => ({ sql: t, params: [] }));
const endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "ok";
  } catch (e) {
    return String((e as { code?: unknown }).code ?? e);
  }
}

/** A node with t(a), and big(x) of 3,000 rows. */
async function nodeWithData(maxMemoryMb?: number): Promise<{ node: SvcNode; config: Config }> {
  const config = await testConfig(maxMemoryMb);
  const node = await startNode(config);
  await node.execute(sql(
    "CREATE TABLE t (a)",
    "CREATE TABLE big (x INTEGER PRIMARY KEY)",
    "INSERT INTO big (x) WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 3000) SELECT n FROM c",
  ));
  return { node, config };
}

describe("bounded reads", () => {
  test("a read past query_timeout_ms is stopped with QUERY_TIMEOUT, and other reads and writes are served meanwhile", async () => {
    // Two reader processes: the runaway read holds one.
    const { node } = await nodeWithData(512);
    const runaway = codeOf(node.query(endless, [], "linearizable"));
    const startedMs = performance.now();
    await node.execute(sql("INSERT INTO t VALUES (1)"));
    expect((await node.query("SELECT count(*) FROM t", [], "linearizable")).rows).toEqual([[1]]);
    // Served while the runaway read still runs: well before its limit.
    expect(performance.now() - startedMs).toBeLessThan(700);
    expect(await runaway).toBe("QUERY_TIMEOUT");
    // A recursive CTE hidden in a view is the same read.
    await node.execute(sql("CREATE VIEW forever AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c"));
    expect(await codeOf(node.query("SELECT count(*) FROM forever", [], "stale"))).toBe("QUERY_TIMEOUT");
    // An operator's read has its own, larger limit.
    expect(await codeOf(node.query(endless, [], "stale", { admin: true }))).toBe("QUERY_TIMEOUT");
    expect((await node.query("SELECT 1", [], "stale")).rows).toEqual([[1]]);
  }, 30_000);

  test("a read whose client went away is stopped at once", async () => {
    const { node } = await nodeWithData();
    const controller = new AbortController();
    const startedMs = performance.now();
    const read = codeOf(node.query(endless, [], "stale", { signal: controller.signal }));
    await Bun.sleep(50);
    controller.abort();
    expect(await read).toBe("QUERY_CANCELLED");
    expect(performance.now() - startedMs).toBeLessThan(600);
    expect((await node.query("SELECT count(*) FROM big", [], "stale")).rows).toEqual([[3000]]);
  }, 30_000);

  test("a result just under its share of max_memory_mb is answered, again and again: the SQL process holds about the answer's size, not its rows as values", async () => {
    // 4 MiB at 128 MB; the process may grow to 56 MiB. The rows as JavaScript values took more
    // than ten times their JSON: a 2.4 MB answer was refused as needing more than 56 MiB.
    const node = await startNode(await testConfig());
    await node.execute(sql(
      "CREATE TABLE w (k TEXT, rid TEXT, wk INTEGER, seq INTEGER)",
      "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 30000) INSERT INTO w SELECT 'k-' || x, 'rid-0123456789-' || x, x % 64, x FROM c",
    ));
    for (let i = 0; i < 3; i++) {
      const r = await node.query("SELECT * FROM w", [], "stale");
      expect(r.rows.length).toBe(30_000);
      expect(r.rows[29_999]).toEqual(["k-30000", "rid-0123456789-30000", 30_000 % 64, 30_000]);
    }
  }, 60_000);

  test("a result larger than its share of max_memory_mb is refused, never cut short", async () => {
    const { node } = await nodeWithData();
    expect(await codeOf(node.query("SELECT a.x, b.x, 'padding padding' FROM big a, big b LIMIT 100000000", [], "stale"))).toBe("RESULT_TOO_LARGE");
    expect(await codeOf(node.query("SELECT zeroblob(1000000000)", [], "stale"))).toBe("RESULT_TOO_LARGE");
    expect(await codeOf(node.query("SELECT printf('%.*c', 200000000, 'x')", [], "stale"))).toBe("RESULT_TOO_LARGE");
    const small = await node.query("SELECT x FROM big ORDER BY x LIMIT 3", [], "stale");
    expect(small.rows).toEqual([[1], [2], [3]]);
  }, 30_000);

  test("a result's size is its bytes as answered (UTF-8), not its characters", async () => {
    // 1.5 million characters of 3 bytes each: 4.5 MB answered, past the 4 MiB share at 128 MB.
    const node = await startNode(await testConfig());
    expect(await codeOf(node.query("SELECT replace(printf('%.*c', 1500000, 'x'), 'x', '€')", [], "stale"))).toBe("RESULT_TOO_LARGE");
    expect((await node.query("SELECT length(replace(printf('%.*c', 1500000, 'x'), 'x', '€'))", [], "stale")).rows).toEqual([[1_500_000]]);
  }, 30_000);
});

describe("bounded admin reads", () => {
  test("stats counts the tables' rows in a SQL process, as the store would", async () => {
    const { node } = await nodeWithData();
    const s = await node.statsBounded();
    expect(s.tables).toEqual(node.stats().tables);
    expect(s.tables).toEqual([{ name: "big", rows: 3000 }, { name: "t", rows: 0 }]);
    expect(s.totalEntries).toBe(3000);
    expect(s.sizeBytes).toBeGreaterThan(0);
    // A table SQLite cannot count (an FTS5 table whose content table does not exist) is named
    // with why; the others are still counted (it made stats answer 400 SQL_ERROR as a whole).
    await node.execute(sql("CREATE VIRTUAL TABLE fz USING fts5 (body, content = nonexistent)"));
    const withBroken = await node.statsBounded();
    expect(withBroken.tables).toEqual(node.stats().tables);
    expect(withBroken.tables.find((x) => x.name === "fz")).toEqual({ name: "fz", rows: null, error: expect.stringContaining("no such table: main.nonexistent") });
    expect(withBroken.tables.find((x) => x.name === "big")).toEqual({ name: "big", rows: 3000 });
    expect(withBroken.totalEntries).toBe(withBroken.tables.reduce((sum, x) => sum + (x.rows ?? 0), 0));
  }, 30_000);

  test("a virtual table's rows count once: its shadow tables (FTS5's _data, _idx, _content, ...) are SQLite's, not the client's", async () => {
    const { node } = await nodeWithData();
    await node.execute(sql("CREATE VIRTUAL TABLE docs USING fts5 (body)", "INSERT INTO docs (body) VALUES ('one'), ('two'), ('three')"));
    for (const s of [await node.statsBounded(), node.stats()]) {
      expect(s.tables).toEqual([{ name: "big", rows: 3000 }, { name: "docs", rows: 3 }, { name: "t", rows: 0 }]);
      expect(s.totalEntries).toBe(3003);
    }
  }, 30_000);
});

describe("bounded writes", () => {
  test("runaway writes no text filter can catch are refused before the log, and the node restarts and replays it", async () => {
    const { node, config } = await nodeWithData();
    await node.execute(sql(
      "CREATE VIEW forever AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c",
      "CREATE TABLE fired (a)",
      // Fires once per insert into fired: recursive_triggers is off, so it cannot re-fire itself.
      "CREATE TRIGGER again AFTER INSERT ON fired BEGIN INSERT INTO fired VALUES (new.a + 1); END",
      "CREATE TABLE watched (a)",
      "CREATE TRIGGER costly AFTER INSERT ON watched BEGIN INSERT INTO t SELECT count(*) FROM forever; END",
    ));
    const lastIndexBefore = node.status().lastLogIndex;
    for (const statements of [
      sql(`WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) INSERT INTO t SELECT count(*) FROM c`),
      sql("INSERT INTO t SELECT count(*) FROM forever"),
      sql("INSERT INTO t SELECT count(*) FROM big a, big b, big c"),
      sql("UPDATE big SET x = x WHERE x = (SELECT count(*) FROM big a, big b, big c)"),
      // A plain INSERT, but a trigger makes it endless.
      sql("INSERT INTO watched VALUES (1)"),
      sql("INSERT INTO t VALUES (1)", "INSERT INTO watched VALUES (2)"),
    ]) {
      expect(`${statements.map((s) => s.sql).join("; ")}: ${await codeOf(node.execute(statements))}`).toEndWith("WRITE_TOO_EXPENSIVE");
    }
    // Nothing of them reached the log.
    expect(node.status().lastLogIndex).toBe(lastIndexBefore);
    // The self-referencing trigger ends (SQLite's recursive_triggers is off): one row more.
    await node.execute(sql("INSERT INTO fired VALUES (1)"));
    expect((await node.query("SELECT a FROM fired ORDER BY a", [], "linearizable")).rows).toEqual([[1], [2]]);
    // A cheap write on the same shapes goes through, and a failing one is answered without a log entry.
    await node.execute(sql("INSERT INTO t SELECT count(*) FROM big a, big b WHERE a.x = b.x"));
    const beforeFailure = node.status().lastLogIndex;
    expect(await codeOf(node.execute(sql("INSERT INTO t SELECT count(*) FROM nosuch")))).toBe("SQL_ERROR");
    expect(node.status().lastLogIndex).toBe(beforeFailure);

    // Restart, and restart again with the store removed: the whole log is replayed.
    const rows = (await node.query("SELECT a FROM t ORDER BY rowid", [], "linearizable")).rows;
    await node.stop();
    const again = await startNode(config);
    expect((await again.query("SELECT a FROM t ORDER BY rowid", [], "linearizable")).rows).toEqual(rows);
    await again.stop();
    fs.rmSync(join(config.dataDir, "store"), { recursive: true, force: true });
    const rebuilt = await startNode(config);
    expect((await rebuilt.query("SELECT a FROM t ORDER BY rowid", [], "linearizable")).rows).toEqual(rows);
    expect((await rebuilt.query("SELECT count(*) FROM big", [], "linearizable")).rows).toEqual([[3000]]);
  }, 60_000);

  test("a plain write sent right after a trigger is created waits for it, and is checked against it", async () => {
    const { node } = await nodeWithData();
    await node.execute(sql("CREATE TABLE watched (a)"));
    const createTrigger = node.execute(sql("CREATE TRIGGER costly AFTER INSERT ON watched BEGIN INSERT INTO t SELECT count(*) FROM big a, big b, big c; END"));
    const plain = codeOf(node.execute(sql("INSERT INTO watched VALUES (1)")));
    await createTrigger;
    expect(await plain).toBe("WRITE_TOO_EXPENSIVE");
    await node.execute(sql("DROP TRIGGER costly"));
    await node.execute(sql("INSERT INTO watched VALUES (2)"));
    expect((await node.query("SELECT a FROM watched", [], "linearizable")).rows).toEqual([[2]]);
  }, 30_000);

  test("a plain DELETE of parent rows whose children's column has no index is checked first: each row deleted scans the child table", async () => {
    // It went straight to the log as plain, and 20,000 × 20,000 ran 15 s in every node's apply.
    const { node } = await nodeWithData();
    const rows = (n: number): string => `WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ${n}) SELECT i FROM c`;
    await node.execute(sql(
      "CREATE TABLE par (id INTEGER PRIMARY KEY, g INTEGER)", "CREATE TABLE chi (pid INTEGER REFERENCES par (id))",
      `INSERT INTO par (id, g) SELECT i, CASE WHEN i = 1 THEN 2 ELSE 1 END FROM (${rows(20_000)})`, `INSERT INTO chi SELECT 1 FROM (${rows(20_000)})`,
    ));
    expect(await codeOf(node.execute(sql("DELETE FROM par WHERE g = 1")))).toBe("WRITE_TOO_EXPENSIVE");
    // A cheap one on the same tables still goes through, checked.
    await node.execute([{ sql: "DELETE FROM par WHERE id = ?", params: [20_000] }]);
    expect((await node.query("SELECT count(*) FROM par", [], "linearizable")).rows).toEqual([[19_999]]);
  }, 60_000);

  test("a deferred constraint is refused before the log, and an FTS5 index out of step with its table fails the statement, not the node", async () => {
    const { node } = await nodeWithData();
    // Deferred to the store's commit, one orphan row failed that commit on every node, at every replay.
    await node.execute(sql("CREATE TABLE p (id INTEGER PRIMARY KEY)"));
    expect(await codeOf(node.execute(sql("CREATE TABLE c (pid INTEGER REFERENCES p (id) DEFERRABLE INITIALLY DEFERRED)")))).toBe("SQL_REFUSED");
    // SQLITE_CORRUPT_VTAB is the virtual table's finding about what a client wrote: it stopped each node it reached.
    await node.execute(sql(
      "CREATE TABLE docs (id INTEGER PRIMARY KEY, body TEXT)", "CREATE VIRTUAL TABLE fe USING fts5 (body, content = docs, content_rowid = id)",
      "INSERT INTO docs VALUES (2, 'hello again')", "INSERT INTO fe (rowid, body) VALUES (2, 'hello again')", "INSERT INTO fe (fe, rowid, body) VALUES ('delete', 2, 'zzz qqq')",
    ));
    for (const consistency of ["linearizable", "stale"] as const) {
      expect(await codeOf(node.query("SELECT rowid FROM fe WHERE fe MATCH 'hello' ORDER BY rank", [], consistency))).toBe("SQL_ERROR");
    }
    // A write it refuses is refused before the log, id or not: applied, that error would be damage.
    expect(await codeOf(node.execute(sql("INSERT INTO fe (fe, rank) VALUES ('integrity-check', 1)")))).toBe("SQL_ERROR");
    expect(await codeOf(node.execute(sql("INSERT INTO fe (fe, rank) VALUES ('integrity-check', 1)"), { requestId: "integrity-1" }))).toBe("SQL_ERROR");
    const logged = node.status().lastLogIndex;
    expect(await codeOf(node.execute(sql("INSERT INTO fe (fe, rank) VALUES ('integrity-check', 1)"), { requestId: "integrity-2" }))).toBe("SQL_ERROR");
    expect(node.status().lastLogIndex).toBe(logged);
    expect(node.fatal).toBeNull();
    await node.execute(sql("INSERT INTO t VALUES ('still serving')"));
    expect((await node.query("SELECT count(*) FROM t", [], "linearizable")).rows).toEqual([[1]]);
  }, 30_000);

  test("writes of random(), the date and changes() apply as they were checked", async () => {
    const { node } = await nodeWithData();
    await node.execute(sql("CREATE TABLE r (a, b, c)", "INSERT INTO r SELECT random(), datetime('now'), changes() FROM big WHERE x < 3"));
    const rows = (await node.query("SELECT count(*), count(DISTINCT a) FROM r", [], "linearizable")).rows;
    expect(rows).toEqual([[2, 2]]);
  }, 30_000);
});
