// Fuzz: SQL admission (checkWriteStatement, checkReadStatement). For any text: each check
// returns a shape or throws an SvcError with code SQL_REFUSED, nothing else; neither takes
// a second on it; and a statement the read check accepts does not write when it runs (it
// runs on a read-write connection in a child process, so that this is the check's doing and
// not the read-only connection's).

import { afterAll, expect, test } from "bun:test";
import type { Subprocess } from "bun";
import { join } from "node:path";
import { checkReadStatement, checkWriteStatement, type StatementShape } from "../../src/store/index.ts";
import { SvcError } from "../../src/util/errors.ts";
import { fuzzPlan, runCases, type Gen } from "./_gen.ts";
import type { RunnerReply, RunnerRequest } from "./_sql-runner.ts";

const plan = fuzzPlan("sql-admission", 1_000);

const reads = [
  "SELECT * FROM t WHERE a = ?",
  "SELECT count(*), max(a) FROM t",
  "select a, b from t order by a desc limit 2 offset 1",
  "WITH x(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM x WHERE n < 3) SELECT n FROM x",
  "VALUES (1, 'a'), (2, 'b')",
  "EXPLAIN QUERY PLAN SELECT * FROM t WHERE b = :b",
  "PRAGMA table_info(t)",
  "PRAGMA main.user_version",
  "PRAGMA integrity_check",
  "SELECT \"a\", [b], `c` FROM t /* comment; here */ -- and; here\n",
  "SELECT 'it''s; fine', ?1, ?2, :name, @at, $dollar FROM u",
  "SELECT json_extract('{\"x\": [1, 2]}', '$.x[1]'), hex(randomblob(4)), changes()",
  "SELECT * FROM t JOIN u ON t.a = u.x WHERE t.b IN (SELECT y FROM u) GROUP BY t.a HAVING count(*) > 0",
  "SELECT CASE WHEN a > 1 THEN 'big' ELSE 'small' END FROM v",
];
const writes = [
  "INSERT INTO t (a, b) VALUES (?, ?)",
  "INSERT OR IGNORE INTO u VALUES (:x, :y)",
  "UPDATE t SET b = 'x' WHERE a = 1",
  "DELETE FROM t WHERE a > 5 RETURNING a",
  "REPLACE INTO t VALUES (1, 'one', NULL)",
  "CREATE TABLE w (x INTEGER PRIMARY KEY, y TEXT NOT NULL DEFAULT '')",
  "CREATE INDEX i ON t (b)",
  "CREATE TRIGGER tr AFTER INSERT ON t BEGIN UPDATE u SET y = NEW.b; SELECT CASE WHEN 1 THEN 1 END; END",
  "CREATE VIEW w AS SELECT * FROM t",
  "DROP TABLE IF EXISTS w",
  "ALTER TABLE t ADD COLUMN d",
  "WITH s AS (SELECT 1 AS n) INSERT INTO u SELECT n, n FROM s",
  "INSERT INTO t (b) VALUES (changes()), (last_insert_rowid())",
];
const corpus = [...reads, ...writes];
const words = [
  "SELECT", "INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "DROP", "ALTER", "WITH", "RECURSIVE", "VALUES", "EXPLAIN", "QUERY", "PLAN",
  "PRAGMA", "ATTACH", "DETACH", "BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE", "VACUUM", "TEMP", "TEMPORARY", "TRIGGER",
  "VIEW", "INDEX", "TABLE", "CASE", "WHEN", "RETURNING", "INTO", "FROM", "WHERE", "OR", "ROLLBACK", "RAISE", "user_version", "schema_version",
  "application_id", "total_changes", "changes", "load_extension", "sqlite_version", "sqlite_offset", "_svc_meta", "sqlite_stmt", "dbstat",
  "pragma_table_info", "sqlite_schema", "zeroblob", "randomblob", "t", "u", "v", ";", "--", "/*", "*/", "'", "\"", "[", "?", "?999", ":a",
  "(5)", "= 5", "main.", "temp.", "\ufeff", "\u00a0", "\u0000", "\v", "\f", "`", "]",
];

/** The one child running accepted reads; replaced when a read runs too long. */
class Runner {
  private proc: Subprocess | null = null;
  private nextId = 1;
  private waiting: { id: number; resolve: (r: RunnerReply | null) => void } | null = null;
  readsRun = 0;

  private spawn(): Subprocess {
    const proc = Bun.spawn({
      cmd: [process.execPath, join(import.meta.dir, "_sql-runner.ts")],
      stdio: ["ignore", "ignore", "inherit"],
      ipc: (reply: RunnerReply) => {
        if (this.waiting?.id === reply.id) this.waiting.resolve(reply);
      },
    });
    this.proc = proc;
    return proc;
  }

  /** Its reply, or null when the read ran longer than `timeMsMax` (the child is replaced). */
  async run(sql: string, parameterCount: number, timeMsMax: number): Promise<RunnerReply | null> {
    const proc = this.proc ?? this.spawn();
    const id = this.nextId++;
    this.readsRun++;
    const reply = await new Promise<RunnerReply | null>((resolve) => {
      const timer = setTimeout(() => resolve(null), timeMsMax);
      this.waiting = { id, resolve: (r) => { clearTimeout(timer); resolve(r); } };
      proc.send({ id, sql, parameterCount } satisfies RunnerRequest);
    });
    this.waiting = null;
    if (reply === null) this.stop();
    return reply;
  }

  stop(): void {
    this.proc?.kill(9);
    this.proc = null;
  }
}

const runner = new Runner();
afterAll(() => runner.stop());

type Verdict = { ok: true; shape: StatementShape } | { ok: false };

function admit(check: (sql: string) => StatementShape, sql: string, what: string): Verdict {
  const startedMs = performance.now();
  let verdict: Verdict;
  try {
    verdict = { ok: true, shape: check(sql) };
  } catch (e) {
    if (!(e instanceof SvcError)) throw new Error(`${what} threw ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`);
    if (e.code !== "SQL_REFUSED") throw new Error(`${what} refused with ${e.code}, not SQL_REFUSED: ${e.message}`);
    if (e.message === "") throw new Error(`${what} refused without a message`);
    verdict = { ok: false };
  }
  const tookMs = performance.now() - startedMs;
  if (tookMs > 1_000) throw new Error(`${what} took ${Math.round(tookMs)} ms on ${sql.length} characters: a hang`);
  if (verdict.ok && !(Number.isSafeInteger(verdict.shape.parameterCount) && verdict.shape.parameterCount >= 0)) {
    throw new Error(`${what} counted ${verdict.shape.parameterCount} parameters`);
  }
  return verdict;
}

function sqlFor(gen: Gen): string {
  if (gen.chance(0.08)) return new TextDecoder().decode(gen.randomBytes(200));
  return gen.mutateText(gen.pick(corpus), corpus, words);
}

test("SQL admission refuses with SQL_REFUSED or accepts; an accepted read never writes", async () => {
  let accepted = 0;
  const cases = await runCases(plan, async (gen) => {
    const sql = sqlFor(gen);
    gen.note(sql);
    admit(checkWriteStatement, sql, "checkWriteStatement");
    const read = admit(checkReadStatement, sql, "checkReadStatement");
    if (!read.ok) return;
    accepted++;
    // Binding more values than SQLite allows fails the statement; that proves nothing either way.
    if (read.shape.parameterCount > 32_766) return;
    const reply = await runner.run(sql, read.shape.parameterCount, 500);
    if (reply?.wrote != null) throw new Error(`checkReadStatement accepted a statement that writes:\n  ${reply.wrote}`);
  }, { caseTimeMsMax: 2_000 });
  console.log(`fuzz sql-admission: ${cases} cases, ${accepted} accepted as reads, ${runner.readsRun} run`);
  expect(cases).toBe(plan.seeds.length);
}, 600_000);

// Inputs the fuzz found, each refused as a read since (the seed that found it first).
const foundWrites: [number, string][] = [
  [773, "WITH s AS (SELECT 1e308 AS n) INSERT INTO u SELECT n, n FROM s"],
  [773, "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 3) DELETE FROM t WHERE a IN (SELECT n FROM s)"],
  [773, "WITH s AS (SELECT 'x' AS b) UPDATE t SET b = (SELECT b FROM s)"],
  [773, "with s as materialized (select 1) replace into u select 1, 2"],
];

test("a statement the fuzz found to write is refused as a read, and runs as a write", () => {
  for (const [, sql] of foundWrites) {
    expect(() => checkReadStatement(sql)).toThrow(/not a read/);
    expect(checkWriteStatement(sql).keyword).toBe("WITH");
  }
});

test("U+FEFF before a word hides nothing from the checks (SQLite reads it as white space there)", () => {
  // Found by seed 223076: "WITH s AS (…) \ufeffINSERT INTO u …" was accepted as a read.
  expect(() => checkReadStatement("WITH s AS (SELECT -9007199254740993 AS n) \ufeffINSERT INTO u SELECT n, n FROM s")).toThrow(/not a read/);
  for (const sql of ["\ufeffPRAGMA journal_mode = DELETE", "\ufeff\ufeffATTACH DATABASE '/tmp/x.db' AS x", "\ufeffBEGIN", "INSERT INTO t (b) VALUES (\ufefftotal_changes())", "CREATE \ufeffTEMP TABLE x (a)"]) {
    expect(() => checkWriteStatement(sql)).toThrow(/not allowed/);
  }
  expect(() => checkReadStatement("\ufeffDELETE FROM t")).toThrow(/not a read/);
  expect(checkReadStatement("\ufeffSELECT 1").keyword).toBe("SELECT");
});

test("a PRAGMA that sets its value with an argument in parentheses is refused as a read", () => {
  for (const sql of ["PRAGMA user_version(5)", "pragma main.schema_version (7)", "PRAGMA page_size(512)", "PRAGMA user_version = 5"]) {
    expect(() => checkReadStatement(sql)).toThrow(/not allowed in a query/);
  }
  for (const sql of ["PRAGMA table_info(t)", "PRAGMA integrity_check(t)", "PRAGMA user_version", "PRAGMA index_list('t')"]) {
    expect(checkReadStatement(sql).keyword).toBe("PRAGMA");
  }
});

test("a numbered placeholder no request can bind is refused, and the count stays exact", () => {
  // Found by seed 1437: ?9007199254740991 counted 9007199254740992 values.
  for (const sql of ["SELECT ?9007199254740991", "SELECT ?0", "INSERT INTO t VALUES (?32767)", `SELECT ?${"9".repeat(400)}`]) {
    expect(() => checkReadStatement(sql.replace("INSERT INTO t VALUES", "SELECT"))).toThrow(/outside \?1 to \?32766/);
    expect(() => checkWriteStatement(sql)).toThrow(/outside \?1 to \?32766/);
  }
  expect(checkReadStatement("SELECT ?32766, ?").parameterCount).toBe(32_767);
});

test("a long run of unclosed comments is checked in one pass", () => {
  // Found by seed 2159: "PRAGMA table_inf" and 100,000 dashes took seconds (quadratic).
  for (const filler of ["-", "/*", "--\n", "/*/"]) {
    for (const head of ["PRAGMA table_info", "CREATE ", "SELECT 1 "]) {
      const sql = head + filler.repeat(500_000);
      const startedMs = performance.now();
      try {
        checkReadStatement(sql);
        checkWriteStatement(sql);
      } catch (e) {
        expect((e as SvcError).code).toBe("SQL_REFUSED");
      }
      expect(performance.now() - startedMs).toBeLessThan(1_000);
    }
  }
});

test("the reads and writes the fuzz starts from are admitted, so mutations start from valid statements", () => {
  for (const sql of reads) expect(checkReadStatement(sql).keyword).toBeString();
  for (const sql of writes) expect(checkWriteStatement(sql).keyword).toBeString();
});
