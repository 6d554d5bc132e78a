import { afterEach, describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { isDiskFullError } from "../../src/io/index.ts";
import { commitDelayMs, commitEntriesMax, indexRunsCode, tableRunsCode } from "../../src/store/store.ts";
import { SqlProcessPool, Store, encodeCommand, decodeCommand, checkWriteStatement, checkReadStatement, refuseReadInWrite, createSnapshotImage, sealReceivedImage, stageStoreImage, type Command } from "../../src/store/index.ts";
import { encodeMembership, type Entry } from "../../src/raft/types.ts";
import { isSvcError } from "../../src/util/index.ts";
import { FileSnapshots } from "../../src/node/file-snapshots.ts";
import { SnapshotStore } from "../../src/storage/index.ts";

const dirs: string[] = [];
const stores: Store[] = [];
/**
 * A store directory of its own, one level inside the temp dir this file removes: a store found
 * damaged is moved aside beside its directory (`<dir>.damaged-<time>`), which must land inside
 * it too, not in the system's temp dir.
 */
function tempDir(): string {
  const root = fs.mkdtempSync(join(tmpdir(), "svc-store-"));
  dirs.push(root);
  const d = join(root, "store");
  fs.mkdirSync(d);
  return d;
}
function openStore(path = join(tempDir(), "state.db")): Store {
  const s = Store.open(path);
  stores.push(s);
  return s;
}
afterEach(() => {
  for (const s of stores.splice(0)) s.close();
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function exec(index: number, ...sql: (string | [string, unknown[]])[]): Entry {
  const command: Command = {
    op: "execute",
    statements: sql.map((s) => (typeof s === "string" ? { sql: s, params: [] } : { sql: s[0], params: s[1] as never })),
  };
  return { term: 1, index, kind: "normal", timestampMs: 1_700_000_000_000 + index * 1000, data: encodeCommand(command) };
}

function dump(store: Store): unknown {
  return store.query("SELECT * FROM t ORDER BY rowid", []).rows;
}

describe("store", () => {
  test("two stores fed the same entries end with identical contents, whatever the clock and randomness", () => {
    const entries = [
      exec(1, "CREATE TABLE t (id INTEGER PRIMARY KEY, r INTEGER, b BLOB, d TEXT, c TEXT DEFAULT CURRENT_TIMESTAMP, j REAL, u INTEGER, s TEXT)"),
      exec(2, "INSERT INTO t (r, b, d, j, u, s) VALUES (random(), randomblob(16), datetime('now'), julianday('now'), unixepoch(), strftime('%Y-%m-%d %H:%M:%f'))"),
      exec(3, "INSERT INTO t (r, b, d, j, u, s) VALUES (random(), randomblob(3), date('now', '+1 day'), julianday(), unixepoch('now'), time())"),
      exec(4, "INSERT INTO t (r, d, s) VALUES (abs(random()) % 1000, CURRENT_DATE, CURRENT_TIME)", "UPDATE t SET r = r + random() % 7"),
    ];
    const a = openStore();
    a.apply(entries.slice(0, 2));
    Bun.sleepSync(5);
    a.apply(entries.slice(2));
    const b = openStore();
    Bun.sleepSync(5);
    for (const e of entries) b.apply([e]);
    expect(dump(a)).toEqual(dump(b));
    const rows = dump(a) as unknown[][];
    // The values come from the entries: entry 2's timestamp, not the machine's clock.
    expect(rows[0]?.[3]).toBe("2023-11-14 22:13:22");
    expect(rows[0]?.[4]).toBe("2023-11-14 22:13:22");
    expect(rows[1]?.[3]).toBe("2023-11-15");
    expect(rows[0]?.[1]).not.toBe(rows[1]?.[1]);
  });

  test("a failing statement rolls back its own batch only and is reported", () => {
    const s = openStore();
    const results = s.apply([
      exec(1, "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT UNIQUE)"),
      exec(2, ["INSERT INTO t (v) VALUES (?)", ["a"]]),
      exec(3, ["INSERT INTO t (v) VALUES (?)", ["b"]], ["INSERT INTO t (v) VALUES (?)", ["a"]]),
      exec(4, "INSERT INTO t (v) VALUES ('c')", "INSERT INTO nowhere VALUES (1)"),
      exec(5, ["INSERT INTO t (v) VALUES (?)", ["d"]]),
    ]);
    expect(results[2]).toMatchObject({ kind: "execute", ok: false, statementIndex: 1 });
    expect((results[2] as { message: string }).message).toContain("UNIQUE constraint failed");
    expect(results[3]).toMatchObject({ ok: false, statementIndex: 1 });
    expect((results[3] as { message: string }).message).toContain("no such table");
    expect(results[4]).toEqual({ kind: "execute", ok: true, results: [{ rowsAffected: 1, lastInsertId: 2 }] });
    // A statement that inserts nothing answers 0, not the connection's last insert.
    const [update, del, ignored, withInsert] = s.apply([
      exec(6, "UPDATE t SET v = 'dd' WHERE v = 'd'"), exec(7, "DELETE FROM t WHERE v = 'nothing'"),
      exec(8, "INSERT OR IGNORE INTO t (v) VALUES ('a')"), exec(9, "/* c */ WITH x(v) AS (VALUES ('e')) INSERT INTO t (v) SELECT v FROM x"),
    ]);
    expect(update).toEqual({ kind: "execute", ok: true, results: [{ rowsAffected: 1, lastInsertId: 0 }] });
    expect(del).toEqual({ kind: "execute", ok: true, results: [{ rowsAffected: 0, lastInsertId: 0 }] });
    expect(ignored).toEqual({ kind: "execute", ok: true, results: [{ rowsAffected: 0, lastInsertId: 0 }] });
    expect(withInsert).toEqual({ kind: "execute", ok: true, results: [{ rowsAffected: 1, lastInsertId: 3 }] });
    expect(s.query("SELECT v FROM t ORDER BY v", []).rows).toEqual([["a"], ["dd"], ["e"]]);
    expect(s.meta.appliedIndex).toBe(9);
  });

  test("the applied index survives a reopen with the data it covers", () => {
    const path = join(tempDir(), "state.db");
    const s = Store.open(path);
    s.apply([exec(1, "CREATE TABLE t (v)"), exec(2, "INSERT INTO t VALUES (1)")]);
    s.close();
    const again = openStore(path);
    expect(again.meta.appliedIndex).toBe(2);
    expect(again.meta.appliedTerm).toBe(1);
    expect(again.stats().totalEntries).toBe(1);
  });

  test("membership, the write pause and noops are applied and recorded", () => {
    const s = openStore();
    const ts = 1;
    s.apply([
      { term: 1, index: 1, kind: "config", timestampMs: ts, data: encodeMembership({ voters: ["n1"], learners: [] }) },
      { term: 1, index: 2, kind: "noop", timestampMs: 0, data: new Uint8Array() },
      { term: 1, index: 3, kind: "normal", timestampMs: ts, data: encodeCommand({ op: "pause_writes" }) },
    ]);
    expect(s.meta.membership.voters).toEqual(["n1"]);
    expect(s.meta.writesPaused).toBe(true);
    s.apply([{ term: 1, index: 4, kind: "normal", timestampMs: ts, data: encodeCommand({ op: "resume_writes" }) }]);
    expect(s.meta.writesPaused).toBe(false);
  });

  test("stats count rows across user tables but not svc's own", () => {
    const s = openStore();
    s.apply([exec(1, "CREATE TABLE a (v)", "CREATE TABLE b (v)", "INSERT INTO a VALUES (1), (2)", "INSERT INTO b VALUES (3)")]);
    const stats = s.stats();
    expect(stats.totalEntries).toBe(3);
    expect(stats.tables).toEqual([{ name: "a", rows: 2 }, { name: "b", rows: 1 }]);
  });

  test("svc's own tables cannot be named by a string literal, which SQLite takes as a name", () => {
    // Each of these ran: the first two left request ids failing every write with 500 INTERNAL.
    for (const sql of [
      "DROP TABLE '_svc_requests'", "CREATE TABLE '_svc_requests' (x)", "INSERT INTO '_svc_meta' VALUES ('membership', '{}')",
      "UPDATE '_SVC_META' SET value = 0 WHERE key = 'cluster_id'", "ALTER TABLE t RENAME TO '_svc_requests'",
      "CREATE VIRTUAL TABLE leak USING fts5(key, value, content='_svc_meta', content_rowid='value')",
    ]) {
      expect(() => checkWriteStatement(sql)).toThrow(/reserved for svc's own tables/);
    }
    expect(() => checkReadStatement("SELECT * FROM '_svc_meta'")).toThrow(/reserved for svc's own tables/);
    expect(() => checkReadStatement("PRAGMA table_info('_svc_requests')")).toThrow(/reserved for svc's own tables/);
    // A pattern names no table.
    expect(checkReadStatement("SELECT name FROM sqlite_schema WHERE name NOT LIKE '_svc_%'").keyword).toBe("SELECT");
  });

  test("statements that would differ between nodes are refused before the log", () => {
    for (const sql of [
      "ATTACH DATABASE 'x.db' AS x", "PRAGMA journal_mode = DELETE", "BEGIN", "COMMIT", "select load_extension('x')",
      "INSERT INTO t VALUES (1); DROP TABLE t", "DELETE FROM _svc_meta", "VACUUM", "   ",
      "INSERT OR ROLLBACK INTO t VALUES (1)", "CREATE TABLE u (v UNIQUE ON CONFLICT ROLLBACK)",
      // A PRAGMA acts when compiled, EXPLAIN or not; edited planner statistics are read only at open.
      "EXPLAIN PRAGMA query_only=ON", "/* x */ explain query plan PRAGMA writable_schema=ON", "EXPLAIN INSERT INTO t VALUES (1)",
      "UPDATE sqlite_stat1 SET stat = '1000 1 1'", "INSERT INTO sqlite_stat4 SELECT * FROM sqlite_stat4", "DELETE FROM main.sqlite_stat1",
      // A deferred constraint is checked at the store's commit, for no write in particular: one
      // orphan row then failed that commit on every node, at every replay.
      "CREATE TABLE c (pid INTEGER REFERENCES p (id) DEFERRABLE INITIALLY DEFERRED)",
      "CREATE TABLE c (pid INTEGER, FOREIGN KEY (pid) REFERENCES p (id) deferrable /* x */ initially\n deferred)",
      "ALTER TABLE c ADD COLUMN q INTEGER REFERENCES p (id) DEFERRABLE INITIALLY DEFERRED",
      // The schema table's rootpage and row order are the file's layout, anew in a node rebuilt from an image.
      // FTS5's source id is the build's, as sqlite_source_id() is: it differs across a rolling upgrade.
      "INSERT INTO t VALUES (fts5_source_id())",
      "CREATE TABLE rp AS SELECT name, rootpage FROM sqlite_master", "INSERT INTO t SELECT name FROM main.sqlite_schema", "INSERT INTO t SELECT rootpage FROM \"SQLITE_MASTER\"",
    ]) {
      let err: unknown = null;
      try { checkWriteStatement(sql); } catch (e) { err = e; }
      expect(isSvcError(err, "SQL_REFUSED")).toBe(true);
    }
    expect(checkWriteStatement("insert into t values ('a;b', \"x;\") -- ; trailing").keyword).toBe("INSERT");
    // A ROLLBACK statement is refused as one, not as a conflict clause.
    expect(() => checkWriteStatement("ROLLBACK TO a")).toThrow("ROLLBACK is not allowed in a write: a batch of statements is already one transaction");
    // Immediate constraints stay allowed, however they are spelt; so do the words elsewhere.
    expect(checkWriteStatement("CREATE TABLE c (pid INTEGER REFERENCES p (id) DEFERRABLE INITIALLY IMMEDIATE, q REFERENCES p DEFERRABLE)").keyword).toBe("CREATE");
    expect(checkWriteStatement("INSERT INTO notes (initially, deferred) VALUES ('initially deferred', 1)").keyword).toBe("INSERT");
    expect(checkWriteStatement("CREATE TRIGGER tr AFTER INSERT ON t BEGIN UPDATE t SET v = CASE WHEN 1 THEN 2 END; INSERT INTO u VALUES (1); END").keyword).toBe("CREATE");
    // A read sent as a write answers no rows: named, as a write sent as a read is.
    const refused = (sql: string) => () => refuseReadInWrite([checkWriteStatement("INSERT INTO t VALUES (1)"), checkWriteStatement(sql)]);
    expect(refused("SELECT * FROM t")).toThrow("SELECT is not a write: POST /v1/execute answers no rows");
    expect(refused("/* c */ values (1)")).toThrow("VALUES is not a write");
    expect(refused("WITH x AS (SELECT 1) SELECT * FROM x")).toThrow("WITH … SELECT is not a write");
    for (const write of ["WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x", "INSERT INTO t SELECT 1", "SELECT optimize(ft) FROM ft LIMIT 1"]) {
      expect(refused(write)).not.toThrow();
    }
  });

  test("a statement's parameter count is SQLite's: ? takes the next index, ?N its own, a repeated name one", () => {
    const db = new Database(":memory:");
    for (const [values, count] of [
      ["1", 0], ["?, ?", 2], ["?3, ?", 4], ["?1, ?1", 1], [":a, @b, $c, :a", 3], ["'?', \"?\", ? -- ?\n", 1], ["? /* :x */", 1],
    ] as const) {
      expect({ values, count: checkWriteStatement(`INSERT INTO t SELECT ${values}`).parameterCount }).toEqual({ values, count });
      expect(db.prepare(`SELECT ${values}`).paramsCount).toBe(count);
    }
    db.close();
  });

  test("placeholders are read as SQLite reads them: #name, Tcl's $a::b and $a(…), whose suffix hides nothing", () => {
    const sqlite = new Database(":memory:");
    try {
      for (const sql of ["SELECT #a", "SELECT $a::b", "SELECT :a::b, @c::d", "SELECT $a(x), $a(x), $a(y)", "SELECT $::a", "SELECT ?2, :a, #a, $a"]) {
        expect(checkReadStatement(sql).parameterCount).toBe(sqlite.prepare(sql).paramsCount);
      }
    } finally {
      sqlite.close();
    }
    // SQLite reads `$a(')` as one placeholder: the quote opened no string that could hide what follows.
    expect(() => checkReadStatement("SELECT $a(') , * FROM _svc_meta --')")).toThrow(/reserved for svc's own tables/);
    expect(() => checkWriteStatement("INSERT INTO kv SELECT $a('), sum(unused) FROM dbstat --')")).toThrow(/dbstat is not allowed/);
    expect(() => checkWriteStatement("INSERT INTO kv VALUES ($a('), 1); INSERT INTO kv VALUES ('second', 2); --')")).toThrow(/one statement per entry/);
  });

  test("several statements in one string are refused with a hint that fits where they were sent", () => {
    expect(() => checkWriteStatement("INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)")).toThrow(expect.objectContaining({ hint: expect.stringContaining('element of "statements"') }));
    // A read has no "statements" to split them into.
    expect(() => checkReadStatement("SELECT 1; SELECT 2")).toThrow(expect.objectContaining({
      message: expect.stringContaining("one statement per query"), hint: "send each query in a request of its own",
    }));
  });

  test("a refused statement is refused every time, and accepted ones stay accepted past the memo's bound", () => {
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 600; i++) expect(checkWriteStatement(`INSERT INTO t VALUES (${i})`).keyword).toBe("INSERT");
      for (const sql of ["BEGIN", "INSERT OR ROLLBACK INTO t VALUES (1)"]) {
        let err: unknown = null;
        try { checkWriteStatement(sql); } catch (e) { err = e; }
        expect(isSvcError(err, "SQL_REFUSED")).toBe(true);
      }
      expect(() => checkReadStatement("DELETE FROM t")).toThrow(/not a read/);
      // A misspelt read is a syntax error, not a write sent to the wrong endpoint.
      expect(() => checkReadStatement("SELEC * FROM t")).toThrow(/near "SELEC": syntax error/);
      expect(() => checkReadStatement("SELECT 1")).not.toThrow();
    }
  });

  test("a command applied from the array it was proposed in reads exactly as every other node reads it", () => {
    const plain: Command = { op: "execute", statements: [{ sql: "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)", params: [1.5, "x\ud800", null, true, 2 ** 53 - 1, 2n ** 63n - 1n] }] };
    const bytes = encodeCommand(plain);
    expect(decodeCommand(bytes)).toBe(plain);
    expect(decodeCommand(bytes.slice())).toEqual(plain);
    // Handed out once: read again, the bytes are decoded.
    const again = decodeCommand(bytes);
    expect(again).not.toBe(plain);
    expect(again).toEqual(plain);
    // -0 comes back from JSON as 0: the proposer reads its own entry as the others do.
    const negativeZero: Command = { op: "execute", statements: [{ sql: "INSERT INTO t VALUES (?)", params: [-0] }] };
    const zeroBytes = encodeCommand(negativeZero);
    const own = decodeCommand(zeroBytes);
    const other = decodeCommand(zeroBytes.slice());
    expect(own).toEqual(other);
    expect(own?.op === "execute" && Object.is(own.statements[0]?.params[0], 0)).toBe(true);
    // A double holding an integer past 2^53 stays that double, and a BigInt that integer.
    const wide: Command = { op: "execute", statements: [{ sql: "INSERT INTO t VALUES (?, ?, ?)", params: [2 ** 60, -(2 ** 70), 2n ** 60n] }] };
    expect(decodeCommand(encodeCommand(wide).slice())).toEqual(wide);
    // An entry without the mark (as every earlier version wrote them) reads as plain JSON.
    const earlier = new TextEncoder().encode('{"op":"execute","statements":[{"sql":"INSERT INTO t VALUES (?)","params":[1152921504606847000]}]}');
    expect(decodeCommand(earlier)).toEqual({ op: "execute", statements: [{ sql: "INSERT INTO t VALUES (?)", params: [2 ** 60] }] });
  });

  test("a statement other than INSERT, REPLACE, UPDATE or DELETE answers 0 rows affected, on every store", () => {
    const entries = [
      exec(1, "CREATE TABLE t (v)"),
      exec(2, "INSERT INTO t VALUES (1), (2), (3)"),
      // FTS5 and R*Tree fill their shadow tables as they are created: SQLite's count of changes saw those rows.
      exec(3, "CREATE VIRTUAL TABLE docs USING fts5(body)"),
      exec(4, "CREATE VIRTUAL TABLE boxes USING rtree(id, x0, x1)", "CREATE INDEX t_v ON t (v)", "/* x */ CREATE VIRTUAL TABLE more USING fts5(a, b)"),
      exec(5, "INSERT INTO docs (body) VALUES ('a b'), ('c d')"),
      exec(6, "ALTER TABLE docs RENAME TO texts", "DROP TABLE boxes", "CREATE TABLE u AS SELECT * FROM t"),
    ];
    const a = openStore();
    const b = openStore();
    const ownResults = a.apply(entries);
    const decodedResults = b.apply(entries.map((e) => ({ ...e, data: e.data.slice() })));
    for (const results of [ownResults, decodedResults]) {
      const affected = results.map((r) => (r.kind === "execute" && r.ok ? r.results.map((s) => s.rowsAffected) : r));
      expect(affected).toEqual([[0], [3], [0], [0, 0, 0], [2], [0, 0, 0]]);
    }
  });

  test("64-bit integers go through the log and the store exact, in both directions", () => {
    const a = openStore();
    const b = openStore();
    const big = [2n ** 53n + 1n, -(2n ** 63n), 2n ** 63n - 1n];
    const entries = [
      exec(1, "CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER, x)"),
      exec(2, ["INSERT INTO t (k, v, x) VALUES (?, ?, ?)", big]),
      exec(3, "INSERT INTO t (k, v) VALUES (9007199254740995, 9007199254740997)"),
    ];
    // The proposer applies its own command objects; another node decodes the same bytes.
    const ownResults = a.apply(entries);
    b.apply(entries.map((e) => ({ ...e, data: e.data.slice() })));
    const insert = ownResults[1];
    expect(insert?.kind === "execute" && insert.ok && insert.results[0]?.lastInsertId).toBe(2n ** 53n + 1n);
    for (const store of [a, b]) {
      const rows = store.query("SELECT k, v, x, typeof(x) FROM t WHERE v = ? OR k = ? ORDER BY k", [-(2n ** 63n), 9007199254740995n]).rows;
      expect(JSON.stringify(rows)).toBe('[[9007199254740993,-9223372036854775808,9223372036854775807,"integer"],[9007199254740995,9007199254740997,null,"null"]]');
      // Integers a double holds exactly stay plain numbers; a real past 2^53 reads as a real.
      expect(store.query("SELECT 42, 2.5", []).rows).toEqual([[42, 2.5]]);
      expect(JSON.stringify(store.query("SELECT CAST(1152921504606846976 AS REAL)", []).rows)).toBe("[[1.152921504606847e+18]]");
    }
  });

  test("a real that is infinite reads as the string \"Infinity\" or \"-Infinity\", in the node and in a SQL process alike", async () => {
    const path = join(tempDir(), "state.db");
    const s = openStore(path);
    s.apply([exec(1, "CREATE TABLE t (k INTEGER PRIMARY KEY, r REAL)"), exec(2, "INSERT INTO t VALUES (1, 9e999), (2, -9e999), (3, 1.5)")]);
    const sql = "SELECT r, typeof(r), 1e999, -1e999 FROM t ORDER BY k";
    const expected = '[["Infinity","real","Infinity","-Infinity"],["-Infinity","real","Infinity","-Infinity"],[1.5,"real","Infinity","-Infinity"]]';
    expect(JSON.stringify(s.query(sql, []).rows)).toBe(expected);
    const pool = new SqlProcessPool(path, { processesCount: 1, processMemoryBytesMax: 512 * 1024 * 1024 });
    try {
      expect((await pool.query(sql, [], { timeoutMs: 60_000, resultBytesMax: 1024 * 1024 })).rowsJson).toBe(expected);
    } finally {
      pool.close();
    }
  });

  test("a store on a disk that refuses writes is a storage failure and is left in place, not rebuilt", () => {
    const dir = tempDir();
    const path = join(dir, "state.db");
    const s = Store.open(path);
    s.apply([exec(1, "CREATE TABLE t (v)"), exec(2, "INSERT INTO t VALUES (1)")]);
    s.close();
    const before = fs.readFileSync(path);
    // The immutable flag refuses every change in the directory, to root as well (ext4, tmpfs).
    expect(Bun.spawnSync(["chattr", "+i", dir]).exitCode).toBe(0);
    let error: unknown;
    try {
      Store.open(path);
    } catch (e) {
      error = e;
    } finally {
      Bun.spawnSync(["chattr", "-i", dir]);
    }
    expect(isSvcError(error) && error.code).toBe("STORAGE_FAILED");
    expect(String(error)).toMatch(/cannot write the store/);
    expect(fs.readFileSync(path).equals(before)).toBe(true);
  });

  test("queries accept reads only", () => {
    expect(() => checkReadStatement("SELECT 1")).not.toThrow();
    expect(() => checkReadStatement("PRAGMA table_info(t)")).not.toThrow();
    expect(() => checkReadStatement("INSERT INTO t VALUES (1)")).toThrow(/not a read/);
    expect(() => checkReadStatement("PRAGMA user_version = 3")).toThrow(/not allowed/);
    expect(() => checkReadStatement("EXPLAIN SELECT 1")).not.toThrow();
    expect(() => checkReadStatement("EXPLAIN QUERY PLAN SELECT * FROM t")).not.toThrow();
    expect(() => checkReadStatement("explain query plan insert into t values (1)")).not.toThrow();
    for (const sql of ["EXPLAIN PRAGMA case_sensitive_like=1", "EXPLAIN QUERY PLAN PRAGMA query_only=0", "EXPLAIN ATTACH 'x' AS x", "EXPLAIN", "EXPLAIN VACUUM"]) {
      expect(() => checkReadStatement(sql)).toThrow(/EXPLAIN.*not allowed/);
    }
    expect(() => checkReadStatement("SELECT * FROM sqlite_stat1")).not.toThrow();
    const s = openStore();
    s.apply([exec(1, "CREATE TABLE t (v)")]);
    expect(() => s.query("SELECT * FROM missing", [])).toThrow(/no such table/);
  });

  test("a snapshot image taken off the main thread carries its applied index and data", async () => {
    const dir = tempDir();
    const s = openStore(join(dir, "state.db"));
    s.apply([exec(1, "CREATE TABLE t (v)"), exec(2, "INSERT INTO t VALUES ('x')")]);
    const image = await createSnapshotImage(join(dir, "state.db"), join(dir, "image.db"));
    expect(image.appliedIndex).toBe(2);
    expect(image.appliedTerm).toBe(1);
    const restored = openStore(join(tempDir(), "copy.db"));
    restored.close();
    Store.installImage(join(dir, "image.db"), restored.path);
    const reopened = openStore(restored.path);
    expect(reopened.meta.appliedIndex).toBe(2);
    expect(reopened.query("SELECT v FROM t", []).rows).toEqual([["x"]]);
    // The checksum for meta.json is the image's, and so is that of an image received whole.
    const fileSha = new Bun.CryptoHasher("sha256").update(fs.readFileSync(join(dir, "image.db"))).digest("hex");
    expect(image.stateSha256).toBe(fileSha);
    expect(await sealReceivedImage(join(dir, "image.db"))).toBe(fileSha);
    const missing = await sealReceivedImage(join(dir, "absent.db")).catch((e: unknown) => e);
    expect(isSvcError(missing) && missing.code).toBe("SNAPSHOT_FAILED");
    expect(String((missing as Error).message)).toContain("absent.db");
  });

  test("a received image staged beside the store is installed by a rename; stale staged copies go", async () => {
    const dir = tempDir();
    const source = openStore(join(dir, "source.db"));
    source.apply([exec(1, "CREATE TABLE t (v)"), exec(2, "INSERT INTO t VALUES ('staged')")]);
    await createSnapshotImage(source.path, join(dir, "image.db"));
    const storePath = join(tempDir(), "state.db");
    const staged = Store.stagedImagePath(storePath, "0000000000000001-0000000000000002");
    const stale = Store.stagedImagePath(storePath, "0000000000000001-0000000000000001");
    fs.writeFileSync(stale, "left by an earlier transfer");
    await stageStoreImage(join(dir, "image.db"), staged);
    expect(fs.readFileSync(staged)).toEqual(fs.readFileSync(join(dir, "image.db")));
    expect(Store.installImage(join(dir, "missing-image.db"), storePath, staged)).toBe(true);
    expect(fs.existsSync(staged)).toBe(false);
    expect(fs.existsSync(stale)).toBe(false);
    const installed = openStore(storePath);
    expect(installed.meta.appliedIndex).toBe(2);
    expect(installed.query("SELECT v FROM t", []).rows).toEqual([["staged"]]);
  });

  test("a file that is not a database is reported as damaged, and moved aside beside the store's directory", () => {
    const dir = tempDir();
    const path = join(dir, "state.db");
    fs.writeFileSync(path, "this is not sqlite".repeat(400));
    expect(() => Store.open(path)).toThrow(/damaged/);
    const aside = fs.readdirSync(join(dir, "..")).filter((n) => n.startsWith("store.damaged-"));
    expect(aside.length).toBe(1);
    expect(fs.readdirSync(join(dir, "..", aside[0] ?? ""))).toContain("state.db");
    expect(fs.existsSync(path)).toBe(false);
  });

  test("an open store is marked with the boot; a close flushes it and removes the mark", () => {
    const path = join(tempDir(), "state.db");
    const s = Store.open(path);
    const bootId = fs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
    expect(fs.readFileSync(`${path}-boot`, "utf8").trim()).toBe(bootId);
    s.apply([exec(1, "CREATE TABLE t (v)"), exec(2, "INSERT INTO t VALUES (1)")]);
    s.close();
    expect(fs.existsSync(`${path}-boot`)).toBe(false);
    expect(fs.existsSync(`${path}-wal`)).toBe(false);
    // A store left open by a process that died in this boot is whole: the kernel kept its writes.
    const crashed = Store.open(path);
    crashed.apply([exec(3, "INSERT INTO t VALUES (2)")]);
    const again = openStore(path);
    expect(again.meta.appliedIndex).toBe(3);
    expect(dump(again)).toEqual([[1], [2]]);
    crashed.close();
  });

  test("a store that was open when the machine went down is reported as damaged, and removing it clears the mark", () => {
    const path = join(tempDir(), "state.db");
    const s = Store.open(path);
    s.apply([exec(1, "CREATE TABLE t (v)")]);
    s.close();
    fs.writeFileSync(`${path}-boot`, "00000000-0000-0000-0000-000000000000\n");
    let error: unknown;
    try {
      Store.open(path);
    } catch (e) {
      error = e;
    }
    expect(isSvcError(error) && error.code).toBe("STORE_DAMAGED");
    expect(String(error)).toMatch(/open when the machine went down/);
    Store.remove(path);
    for (const suffix of ["", "-wal", "-shm", "-boot"]) expect(fs.existsSync(path + suffix)).toBe(false);
    expect(openStore(path).meta.appliedIndex).toBe(0);
  });
});

test("a lone statement that fails part way leaves no trace, whatever its conflict resolution", () => {
  const s = Store.open(join(tempDir(), "state.db"));
  stores.push(s);
  s.apply([exec(1, "CREATE TABLE t (v INTEGER UNIQUE)", "INSERT INTO t VALUES (5)")]);
  const results = s.apply([
    exec(2, "INSERT INTO t VALUES (1), (2), (5), (6)"),
    exec(3, "INSERT OR FAIL INTO t VALUES (3), (4), (5), (7)"),
    exec(4, "INSERT INTO t VALUES (8)"),
  ]);
  expect(results[0]).toMatchObject({ ok: false, statementIndex: 0 });
  expect(results[1]).toMatchObject({ ok: false, statementIndex: 0 });
  expect(results[2]).toMatchObject({ ok: true });
  expect(s.query("SELECT v FROM t ORDER BY v", []).rows).toEqual([[5], [8]]);
});

describe("commits that a node's applies share", () => {
  const deferred = (nowMs: number) => ({ nowMs, eager: false });
  /** Rows of t as another connection (a SQL process, an image) sees the file. */
  function seenElsewhere(path: string): number {
    const other = new Database(path, { readonly: true });
    try {
      return Number((other.query("SELECT count(*) AS n FROM t").get() as { n: number }).n);
    } finally {
      other.close();
    }
  }

  test("under a load that never stops, the SQLite WAL still starts over once it passes its bound (it grew as large as the store)", () => {
    const path = join(tempDir(), "state.db");
    const s = openStore(path);
    s.walRestart = { bytes: 1024 * 1024, everyMs: 0 };
    s.apply([exec(1, "CREATE TABLE t (v)")]);
    const blob = "x".repeat(64 * 1024);
    let largest = 0;
    // 16 MiB of rows, each batch committed, the next begun at once: no pause for the WAL to reset.
    for (let i = 2; i < 258; i++) {
      s.apply([{ term: 1, index: i, kind: "normal", timestampMs: 0, data: encodeCommand({ op: "execute", statements: [{ sql: "INSERT INTO t VALUES (?)", params: [blob] }] }) }], { nowMs: i, eager: true });
      largest = Math.max(largest, s.walFileBytes());
    }
    expect(seenElsewhere(path)).toBe(256);
    expect(largest).toBeLessThan(4 * 1024 * 1024);
    s.close();
  });

  test("are made when due: others see applied entries once committed, and a crash before takes back only what the log holds", () => {
    const path = join(tempDir(), "state.db");
    const s = openStore(path);
    s.apply([exec(1, "CREATE TABLE t (v)")]);
    s.apply([exec(2, "INSERT INTO t VALUES (1)"), exec(3, "INSERT INTO t VALUES (2)")], deferred(0));
    expect(s.meta.appliedIndex).toBe(3);
    expect(s.uncommittedCount).toBe(2);
    expect(seenElsewhere(path)).toBe(0);
    // Not yet due; then due by age.
    s.commitIfDue(deferred(commitDelayMs - 1));
    expect(seenElsewhere(path)).toBe(0);
    s.commitIfDue(deferred(commitDelayMs));
    expect(s.uncommittedCount).toBe(0);
    expect(seenElsewhere(path)).toBe(2);
    // Due by count.
    s.apply(Array.from({ length: commitEntriesMax - 1 }, (_, i) => exec(4 + i, "INSERT INTO t VALUES (3)")), deferred(100));
    expect(seenElsewhere(path)).toBe(2);
    s.apply([exec(3 + commitEntriesMax, "INSERT INTO t VALUES (4)")], deferred(100));
    expect(seenElsewhere(path)).toBe(2 + commitEntriesMax);
    // Eager: every batch.
    s.apply([exec(4 + commitEntriesMax, "INSERT INTO t VALUES (5)")], { nowMs: 100, eager: true });
    expect(seenElsewhere(path)).toBe(3 + commitEntriesMax);
    // A batch left open, then the process dies (discard drops the open transaction, as a
    // kill -9 would): the store reopens at what it committed, and the log applies the rest.
    s.apply([exec(5 + commitEntriesMax, "INSERT INTO t VALUES (6)")], deferred(200));
    s.close({ discard: true });
    const reopened = openStore(path);
    expect(reopened.meta.appliedIndex).toBe(4 + commitEntriesMax);
    reopened.apply([exec(5 + commitEntriesMax, "INSERT INTO t VALUES (6)")], deferred(0));
    // A reader of this process, a snapshot and a clean close all commit first.
    expect(reopened.query("SELECT count(*) FROM t", []).rows).toEqual([[4 + commitEntriesMax]]);
    expect(seenElsewhere(path)).toBe(4 + commitEntriesMax);
    reopened.apply([exec(6 + commitEntriesMax, "INSERT INTO t VALUES (7)")], deferred(0));
    reopened.close();
    expect(openStore(path).meta.appliedIndex).toBe(6 + commitEntriesMax);
  });

  test("tables with a deferred constraint, made before svc refused them, are found (the node warns at start)", () => {
    const store = openStore();
    // In the log from an earlier version: applied as it was (refusing it now would make nodes differ).
    store.apply([exec(1, "CREATE TABLE p (id INTEGER PRIMARY KEY)", "CREATE TABLE c (pid INTEGER REFERENCES p (id) DEFERRABLE INITIALLY DEFERRED)", "CREATE TABLE d (note TEXT DEFAULT 'initially deferred')")]);
    store.commitApplied();
    expect(store.deferredConstraintTables()).toEqual(["c"]);
  });

  test("a virtual table that finds its contents broken while an entry applies is this node's damage, not the entry's result", () => {
    // Such a write is refused before the log on the leader (the write gate): met at apply, the
    // node's copy differs (a flipped bit in FTS5's blobs, which SQLite checks no page of), and
    // recording it as the entry's failure would make this node differ for good.
    const store = openStore();
    store.apply([exec(1,
      "CREATE TABLE docs (id INTEGER PRIMARY KEY, body TEXT)", "CREATE VIRTUAL TABLE fe USING fts5 (body, content = docs, content_rowid = id)",
      "INSERT INTO docs VALUES (2, 'hello again')", "INSERT INTO fe (rowid, body) VALUES (2, 'hello again')", "INSERT INTO fe (fe, rowid, body) VALUES ('delete', 2, 'zzz qqq')",
    )]);
    let err: unknown = null;
    try { store.apply([exec(2, "INSERT INTO fe (fe, rank) VALUES ('integrity-check', 1)")]); } catch (e) { err = e; }
    expect(isSvcError(err, "STORE_DAMAGED")).toBe(true);
    expect(store.meta.appliedIndex).toBe(1);
    expect(tableRunsCode("CREATE VIRTUAL TABLE fe USING fts5 (body)")).toBe(true);
  });

  test("an EXPLAIN already in the log fails its statement at apply and leaves the connection as it was", () => {
    const s = openStore();
    s.apply([exec(1, "CREATE TABLE t (v INTEGER CHECK (v > 0))")]);
    const [r] = s.apply([exec(2, "EXPLAIN PRAGMA query_only=ON")]);
    expect(r).toMatchObject({ kind: "execute", ok: false });
    s.apply([exec(3, "EXPLAIN PRAGMA ignore_check_constraints=ON")]);
    expect(s.apply([exec(4, "INSERT INTO t VALUES (1)")])[0]).toMatchObject({ ok: true });
    expect(s.apply([exec(5, "INSERT INTO t VALUES (-1)")])[0]).toMatchObject({ ok: false });
    expect(s.query("SELECT v FROM t", []).rows).toEqual([[1]]);
  });

  test("a table whose CHECK, generated column or DEFAULT calls a function makes no write plain, as a trigger does", () => {
    expect(tableRunsCode("CREATE TABLE a (x INTEGER CHECK (x > 0), y DEFAULT 0, z DEFAULT (1), w AS (x + 1))")).toBe(false);
    expect(tableRunsCode("CREATE TABLE a (\"check(\" TEXT DEFAULT 'f(x)', [as(] INT) -- default (f())")).toBe(false);
    expect(tableRunsCode("CREATE TABLE a (b BLOB GENERATED ALWAYS AS (zeroblob(id)) STORED, id INT)")).toBe(true);
    expect(tableRunsCode("CREATE TABLE a (x TEXT CHECK (length(x) < 10))")).toBe(true);
    expect(tableRunsCode("CREATE TABLE a (x TEXT, CONSTRAINT c CHECK ((x) != upper (x)))")).toBe(true);
    expect(tableRunsCode("CREATE TABLE a (x DEFAULT (strftime('%s', 'now')))")).toBe(true);
    const s = openStore();
    s.apply([exec(1, "CREATE TABLE t (v INTEGER CHECK (v > 0))")]);
    expect(s.runsCodeOnWrite()).toBe(false);
    s.apply([exec(2, "CREATE TABLE g (id INTEGER PRIMARY KEY, b AS (hex(zeroblob(id))) STORED)")]);
    expect(s.runsCodeOnWrite()).toBe(true);
  });

  test("an index on an expression that calls a function, a partial index whose WHERE calls one, or a foreign key makes no write plain", () => {
    expect(indexRunsCode("CREATE INDEX i ON t (a, b COLLATE nocase)")).toBe(false);
    expect(indexRunsCode("CREATE UNIQUE INDEX IF NOT EXISTS \"on(\" ON \"t(\" (a + b) WHERE a > 0")).toBe(false);
    expect(indexRunsCode("CREATE INDEX ei ON ei (length(printf('%.*c', x, 'a')))")).toBe(true);
    expect(indexRunsCode("CREATE INDEX p ON t (a) WHERE upper(b) = 'X'")).toBe(true);
    // A plain foreign key too: a DELETE of each parent row scans the child table where its column
    // has no index (20,000 × 20,000 ran 15 s in the apply, unchecked, and stalled the cluster).
    expect(tableRunsCode("CREATE TABLE c (id INTEGER PRIMARY KEY, p REFERENCES parent (id))")).toBe(true);
    expect(tableRunsCode("CREATE TABLE c (id INTEGER PRIMARY KEY, \"references\" TEXT DEFAULT 'references')")).toBe(false);
    expect(tableRunsCode("CREATE TABLE c (id INTEGER PRIMARY KEY, p REFERENCES parent (id) ON DELETE CASCADE)")).toBe(true);
    expect(tableRunsCode("CREATE TABLE c (p INT, FOREIGN KEY (p) REFERENCES parent (id) ON UPDATE SET NULL)")).toBe(true);
    for (const [i, ddl] of ["CREATE INDEX ei ON t (length(printf('%.*c', v, 'a')))", "CREATE INDEX p ON t (v) WHERE abs(v) > 1"].entries()) {
      const s = openStore();
      s.apply([exec(1, "CREATE TABLE t (v)", "CREATE INDEX plain ON t (v)")]);
      expect(s.runsCodeOnWrite()).toBe(false);
      s.apply([exec(2, ddl)]);
      expect({ i, runs: s.runsCodeOnWrite() }).toEqual({ i, runs: true });
    }
  });

  test("an install whose copy of the image fails (a full disk) leaves the store in use open and whole", () => {
    const dir = tempDir();
    const s = Store.open(join(dir, "state.db"));
    s.apply([exec(1, "CREATE TABLE t (v)"), exec(2, "INSERT INTO t VALUES (1)")]);
    const snapshots = new FileSnapshots(new SnapshotStore(join(dir, "snapshots")), s.path);
    // An image that cannot be copied: its file is missing (as ENOSPC, the copy throws).
    const record = { term: 1, index: 9, membership: { voters: ["n1"], learners: [] }, clusterId: "c", sizeBytes: 1, location: join(dir, "gone") };
    expect(() => snapshots.install(s, record)).toThrow();
    expect(s.query("SELECT v FROM t", []).rows).toEqual([[1]]);
    expect(s.apply([exec(3, "INSERT INTO t VALUES (2)")])[0]).toMatchObject({ ok: true });
    expect(fs.existsSync(`${s.path}.installing`)).toBe(false);
    s.close();
  });

  test("a trigger applied but not yet committed is known to the write path", () => {
    const s = openStore();
    s.apply([exec(1, "CREATE TABLE t (v)")]);
    expect(s.runsCodeOnWrite()).toBe(false);
    s.apply([exec(2, "CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; END")], deferred(0));
    expect(s.uncommittedCount).toBe(1);
    expect(s.runsCodeOnWrite()).toBe(true);
  });

  test("a failing statement in a deferred batch takes back its own batch only", () => {
    const path = join(tempDir(), "state.db");
    const s = openStore(path);
    s.apply([exec(1, "CREATE TABLE t (v UNIQUE)")]);
    s.apply([exec(2, "INSERT INTO t VALUES (1)")], deferred(0));
    const [r] = s.apply([exec(3, "INSERT INTO t VALUES (2)", "INSERT INTO t VALUES (1)")], deferred(0));
    expect(r).toMatchObject({ kind: "execute", ok: false, statementIndex: 1 });
    s.commitApplied();
    expect(s.query("SELECT v FROM t ORDER BY v", []).rows).toEqual([[1]]);
    expect(seenElsewhere(path)).toBe(1);
    expect(s.meta.appliedIndex).toBe(3);
  });

  describe.skipIf(process.getuid?.() !== 0)("on a file system that fills up (a tmpfs mounted here)", () => {
    /** A 2 MiB tmpfs, unmounted when `fn` ends. */
    function withSmallDisk(fn: (dir: string) => void): void {
      const dir = join(tempDir(), "disk");
      fs.mkdirSync(dir);
      const mounted = Bun.spawnSync(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", dir]);
      if (mounted.exitCode !== 0) throw new Error(`mount failed: ${mounted.stderr.toString()}`);
      try {
        fn(dir);
      } finally {
        Bun.spawnSync(["umount", "-l", dir]);
      }
    }
    /** Fill the file system of `dir` to its last byte with `dir`/filler; returns its path. */
    function fillDisk(dir: string): string {
      const filler = join(dir, "filler");
      const fd = fs.openSync(filler, "w");
      try {
        for (;;) fs.writeSync(fd, new Uint8Array(64 * 1024));
      } catch {
        // ENOSPC: full
      } finally {
        fs.closeSync(fd);
      }
      return filler;
    }
    function thrown(fn: () => void): unknown {
      try {
        fn();
      } catch (e) {
        return e;
      }
      return null;
    }

    test("a commit the full disk refuses keeps what was applied: it is applied again and committed once there is room", () => {
      withSmallDisk((mountDir) => {
        const path = join(mountDir, "state.db");
        const s = Store.open(path);
        try {
          s.apply([exec(1, "CREATE TABLE t (v)")]);
          const value = "x".repeat(2000);
          const rows = (from: number, n: number) => Array.from({ length: n }, (_, i) => exec(from + i, ["INSERT INTO t VALUES (?)", [value]]));
          s.apply(rows(2, 50), deferred(0));
          expect(s.uncommittedCount).toBe(50);
          // Fill the disk: the commit cannot write its pages.
          const filler = fillDisk(mountDir);
          expect(isDiskFullError(thrown(() => s.commitApplied()))).toBe(true);
          // Still applied, to this store's reader of record, and nothing else sees a torn state.
          expect(s.meta.appliedIndex).toBe(51);
          expect(s.uncommittedCount).toBe(50);
          expect(seenElsewhere(path)).toBe(0);
          // A batch applied meanwhile fails whole (for the node to retry it), the rest kept.
          expect(isDiskFullError(thrown(() => s.apply(rows(52, 10), { nowMs: 0, eager: true })))).toBe(true);
          expect(s.meta.appliedIndex).toBe(51);
          fs.rmSync(filler);
          s.apply(rows(52, 10), { nowMs: 0, eager: true });
          expect(s.uncommittedCount).toBe(0);
          expect(s.meta.appliedIndex).toBe(61);
          expect(seenElsewhere(path)).toBe(60);
        } finally {
          s.close();
        }
      });
    });

    test("entries applied again after a refused commit end as on a store that never failed: request ids, triggers, schema", () => {
      const withId = (index: number, id: string, sql: string): Entry => ({
        term: 1, index, kind: "normal", timestampMs: 1_700_000_000_000 + index * 1000,
        data: encodeCommand({ op: "execute", statements: [{ sql, params: [] }], requestId: id }),
      });
      const first = [exec(1, "CREATE TABLE t (v)", "CREATE TABLE log (n, r)", "CREATE TRIGGER tr AFTER INSERT ON t BEGIN INSERT INTO log VALUES (changes(), last_insert_rowid()); END")];
      const deferredEntries = [
        // First: what its trigger logs depends on the connection's state unless the guard resets it.
        exec(2, "INSERT INTO t VALUES (1)"),
        withId(3, "r1", "INSERT INTO t VALUES (2), (3)"),
        exec(4, "UPDATE t SET v = v + 10 WHERE v > 1"),
        exec(5, "DROP TRIGGER tr"),
        exec(6, "CREATE TABLE other (x)"),
        withId(7, "r2", "INSERT INTO t VALUES (4)"),
      ];
      const contents = (store: Store) => [
        store.query("SELECT * FROM t ORDER BY rowid", []).rows,
        store.query("SELECT * FROM log ORDER BY rowid", []).rows,
        store.rememberedRequest("r1", 1_700_000_010_000),
        store.rememberedRequest("r2", 1_700_000_010_000),
      ];
      const twin = openStore();
      twin.apply(first);
      twin.apply(deferredEntries, deferred(0));
      twin.commitApplied();
      withSmallDisk((mountDir) => {
        const s = Store.open(join(mountDir, "state.db"));
        try {
          s.apply(first);
          s.apply(deferredEntries.slice(0, 3), deferred(0));
          s.apply(deferredEntries.slice(3), deferred(1));
          const filler = fillDisk(mountDir);
          expect(isDiskFullError(thrown(() => s.commitApplied()))).toBe(true);
          expect(s.commitRefused).toBe(true);
          expect(s.commitForReaders()).toBe(false);
          fs.rmSync(filler);
          s.commitApplied();
          expect(s.commitRefused).toBe(false);
          expect(contents(s)).toEqual(contents(twin));
          // And it goes on applying entries with ids.
          s.apply([withId(8, "r3", "INSERT INTO t VALUES (5)")], deferred(2));
          expect(s.rememberedRequest("r3", 1_700_000_010_000)?.firstIndex).toBe(8);
        } finally {
          s.close();
        }
      });
    });
  });
});

describe("a table out of rowids", () => {
  const deferred = (nowMs: number) => ({ nowMs, eager: false });
  const limit = "9223372036854775807";

  /** A store with table x, and table ai (AUTOINCREMENT) whose sequence is at the largest rowid; all committed. */
  function storeAtLimit(): Store {
    const s = openStore();
    s.apply([
      exec(1, "CREATE TABLE x (v TEXT)", "CREATE TABLE ai (id INTEGER PRIMARY KEY AUTOINCREMENT, v)"),
      exec(2, `INSERT INTO ai (id, v) VALUES (${limit}, 'last')`),
    ]);
    return s;
  }

  test("fails the entry that needs a rowid, as a statement error with the reason; the entries around it apply, committed or not", () => {
    const s = storeAtLimit();
    // Applied, not committed: SQLite's answer to a rowid it cannot pick rolls back the whole open transaction.
    s.apply([exec(3, "INSERT INTO x VALUES ('earlier batch')")], deferred(0));
    expect(s.uncommittedCount).toBe(1);
    const results = s.apply([
      exec(4, "INSERT INTO x VALUES ('before')"),
      exec(5, "INSERT INTO x VALUES ('same entry, rolled back')", "INSERT INTO ai (v) VALUES ('no rowid left')"),
      exec(6, "INSERT INTO ai (v) VALUES ('no rowid left')"),
      exec(7, "INSERT INTO x VALUES ('after')"),
    ], deferred(1));
    expect(results.map((r) => (r.kind === "execute" ? r.ok : r.kind))).toEqual([true, false, false, true]);
    const failed = results[1];
    expect(failed?.kind === "execute" && !failed.ok ? failed.message : "").toContain("rowid");
    expect(failed?.kind === "execute" && !failed.ok ? failed.statementIndex : -1).toBe(1);
    expect(s.appliedIndex).toBe(7);
    s.commitApplied();
    expect(s.query("SELECT v FROM x ORDER BY rowid", []).rows).toEqual([["earlier batch"], ["before"], ["after"]]);
    expect(s.query("SELECT count(*) FROM ai", []).rows).toEqual([[1]]);
    // Writes go on, and the answer does not depend on how the entries were batched.
    s.apply([exec(8, "INSERT INTO x VALUES ('later')")]);
    const one = storeAtLimit();
    for (let i = 3; i <= 8; i++) {
      const e = [exec(3, "INSERT INTO x VALUES ('earlier batch')"), exec(4, "INSERT INTO x VALUES ('before')"),
        exec(5, "INSERT INTO x VALUES ('same entry, rolled back')", "INSERT INTO ai (v) VALUES ('no rowid left')"),
        exec(6, "INSERT INTO ai (v) VALUES ('no rowid left')"), exec(7, "INSERT INTO x VALUES ('after')"), exec(8, "INSERT INTO x VALUES ('later')")][i - 3]!;
      one.apply([e], { nowMs: i, eager: true });
    }
    expect(one.query("SELECT v FROM x ORDER BY rowid", []).rows).toEqual(s.query("SELECT v FROM x ORDER BY rowid", []).rows);
  });
});

describe("a store another connection holds locked for a moment", () => {
  test("is opened once the lock is let go, not set aside as damaged and rebuilt", async () => {
    const path = join(tempDir(), "state.db");
    const first = Store.open(path);
    first.apply([exec(1, "CREATE TABLE t (v)", ["INSERT INTO t VALUES (?)", [1]])]);
    first.close();
    // Another process takes the file's exclusive lock (as a checkpoint closing the last
    // connection does, for a moment), and lets it go 400 ms later.
    const holder = Bun.spawn([process.execPath, "-e", `
      const { Database } = require("bun:sqlite");
      const db = new Database(${JSON.stringify(path)});
      db.run("PRAGMA locking_mode = EXCLUSIVE");
      db.run("BEGIN EXCLUSIVE");
      db.run("CREATE TABLE IF NOT EXISTS held (v)");
      console.log("held");
      setTimeout(() => { db.run("COMMIT"); db.close(); }, 400);
    `], { stdout: "pipe" });
    const reader = holder.stdout.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toContain("held");
    const again = Store.open(path);
    stores.push(again);
    expect(again.meta.appliedIndex).toBe(1);
    expect(fs.readdirSync(join(path, "..", "..")).filter((n) => n.includes("damaged"))).toEqual([]);
    await holder.exited;
  });
});

