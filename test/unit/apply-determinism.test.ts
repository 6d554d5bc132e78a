// Applying an entry is a function of the entry and the data before it, whatever the
// connection did earlier: a differential test applies the same random entries (the SQLite
// functions and statement kinds users reach for) to two stores, rebuilds one of them midway
// from an older snapshot image plus the entries after it (what a restart or a new replica
// does), and compares a hash of both stores and the entries' results after every entry.
// SEED=<n> replays one run; DETERMINISM_RUNS sets how many seeds run (default 4).

import { Database } from "bun:sqlite";
import { afterEach, describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Store, encodeCommand, type ApplyResult, type SqlValue } from "../../src/store/index.ts";
import type { Entry } from "../../src/util/log-data.ts";
import { createPrng, type Prng } from "../../src/util/prng.ts";

const baseSeed = process.env.SEED !== undefined ? Number(process.env.SEED) : Date.now() % 2_147_483_647;
const runs = process.env.SEED !== undefined ? 1 : Number(process.env.DETERMINISM_RUNS ?? 4);
console.log(`test/unit/apply-determinism.test.ts: SEED=${baseSeed}`);

const entriesCount = 240;
const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});

function tempStorePath(): string {
  const dir = fs.mkdtempSync(join(tmpdir(), "svc-determinism-"));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  return join(dir, "state.db");
}

type Gen = (r: Prng) => { sql: string; params: SqlValue[] };
const pick = <T>(r: Prng, xs: readonly T[]): T => xs[r.nextInt(xs.length)] as T;
const table = (r: Prng): string => pick(r, ["t1", "t2", "t3"]);
const fixed = (sql: string): Gen => () => ({ sql, params: [] });

/** Statement shapes, with the functions whose values could depend on the node or the connection. */
const generators: Gen[] = [
  (r) => ({ sql: `INSERT INTO ${table(r)} (a, b, c) VALUES (?, ?, ?)`, params: [r.nextInt(100), `s${r.nextInt(50)}`, r.next()] }),
  (r) => fixed(`INSERT INTO ${table(r)} (a, b) VALUES (random(), randomblob(8))`)(r),
  (r) => fixed(`INSERT INTO ${table(r)} (a, b) VALUES (changes(), last_insert_rowid())`)(r),
  (r) => fixed(`INSERT INTO ${table(r)} (a) VALUES (total_changes())`)(r),
  (r) => fixed(`INSERT INTO ${table(r)} (a) VALUES (sqlite_version())`)(r),
  (r) => fixed(`INSERT INTO ${table(r)} (a, b, c) VALUES (datetime('now'), strftime('%s', 'now'), julianday('now'))`)(r),
  (r) => fixed(`INSERT INTO ${table(r)} (a, b) VALUES (CURRENT_TIMESTAMP, unixepoch())`)(r),
  (r) => fixed(`INSERT INTO ${table(r)} (a, b, c) VALUES (unixepoch('subsec'), datetime('subsecond'), datetime('now', 'localtime'))`)(r),
  (r) => fixed(`INSERT INTO ${table(r)} (a) SELECT count(*) FROM ${table(r)}`)(r),
  (r) => fixed(`INSERT INTO ${table(r)} (a, b) SELECT a, b FROM ${table(r)} WHERE id % 3 = 0 LIMIT 5`)(r),
  (r) => fixed(`UPDATE ${table(r)} SET a = coalesce(a, 0) + 1, c = changes() WHERE id % 2 = 0`)(r),
  (r) => fixed(`DELETE FROM ${table(r)} WHERE id IN (SELECT id FROM ${table(r)} ORDER BY id LIMIT 2)`)(r),
  (r) => ({ sql: `INSERT OR REPLACE INTO ${table(r)} (id, a) VALUES (?, last_insert_rowid())`, params: [1 + r.nextInt(30)] }),
  (r) => ({ sql: `INSERT INTO ${table(r)} (id, a) VALUES (?, 1) ON CONFLICT(id) DO UPDATE SET a = a + changes()`, params: [1 + r.nextInt(30)] }),
  (r) => fixed(`CREATE INDEX IF NOT EXISTS i_${table(r)} ON ${table(r)} (a)`)(r),
  (r) => {
    const t = table(r);
    return fixed(`CREATE TRIGGER IF NOT EXISTS tr_${t} AFTER INSERT ON ${t} BEGIN INSERT INTO log (x, y) VALUES (changes(), last_insert_rowid()); END`)(r);
  },
  (r) => fixed(`CREATE TEMP TABLE IF NOT EXISTS tmp (x)`)(r),
  (r) => fixed(`CREATE TABLE IF NOT EXISTS temp.tmp2 (x)`)(r),
  (r) => fixed(`CREATE TEMP TRIGGER IF NOT EXISTS ttr AFTER INSERT ON t1 BEGIN INSERT INTO log (x) VALUES ('temp'); END`)(r),
  (r) => fixed(`INSERT INTO log (x) SELECT count(*) FROM tmp`)(r),
  (r) => fixed(`CREATE VIEW IF NOT EXISTS v_${table(r)} AS SELECT count(*) AS n, total(a) AS s FROM ${table(r)}`)(r),
  (r) => fixed(`INSERT INTO log (x, y) SELECT n, s FROM v_${table(r)}`)(r),
  (r) => fixed(`INSERT INTO ${table(r)} (a) VALUES (json_object('k', random(), 'h', hex(randomblob(4))))`)(r),
  (r) => fixed(`INSERT INTO ${table(r)} (a) SELECT group_concat(id) FROM ${table(r)}`)(r),
  (r) => fixed(`ALTER TABLE ${table(r)} ADD COLUMN d${r.nextInt(3)}`)(r),
  (r) => fixed(`INSERT INTO nosuch VALUES (1)`)(r),
  (r) => ({ sql: `UPDATE ${table(r)} SET b = ? WHERE id = ? RETURNING id`, params: [`u${r.nextInt(9)}`, 1 + r.nextInt(30)] }),
  (r) => fixed(`INSERT INTO log (x, y) VALUES (abs(random() % 1000), zeroblob(4))`)(r),
  (r) => fixed(`INSERT INTO log (x) VALUES (typeof(last_insert_rowid()) || changes())`)(r),
  // A PRAGMA under EXPLAIN acts when compiled: in the log (from a version that let it through)
  // it must not change the applying connection (a CHECK ignored, triggers recursing).
  (r) => fixed(pick(r, ["EXPLAIN PRAGMA ignore_check_constraints=ON", "EXPLAIN PRAGMA recursive_triggers=ON", "EXPLAIN QUERY PLAN PRAGMA reverse_unordered_selects=ON"]))(r),
  (r) => ({ sql: "INSERT INTO ck (x) VALUES (?)", params: [r.nextInt(5) - 2] }),
  // A table's DEFAULT naming the connection's memory, made midway.
  (r) => fixed("CREATE TABLE IF NOT EXISTS dflt (id INTEGER PRIMARY KEY, lr DEFAULT (last_insert_rowid()), ch DEFAULT (changes()))")(r),
  (r) => fixed("INSERT INTO dflt (id) VALUES (NULL)")(r),
];

const schema = [
  "CREATE TABLE t1 (id INTEGER PRIMARY KEY, a, b, c)",
  "CREATE TABLE t2 (id INTEGER PRIMARY KEY, a, b, c)",
  "CREATE TABLE t3 (id INTEGER PRIMARY KEY, a, b, c)",
  "CREATE TABLE log (id INTEGER PRIMARY KEY, x, y)",
  "CREATE TABLE ck (id INTEGER PRIMARY KEY, x INTEGER CHECK (x > 0))",
];

function makeEntries(r: Prng): Entry[] {
  const entries: Entry[] = [
    { term: 1, index: 1, kind: "normal", timestampMs: 1_700_000_000_000, data: encodeCommand({ op: "execute", statements: schema.map((sql) => ({ sql, params: [] })) }) },
  ];
  for (let index = 2; index <= entriesCount; index++) {
    const count = 1 + r.nextInt(3);
    const statements = Array.from({ length: count }, () => pick(r, generators)(r));
    // Read back from the log (the WAL, a peer): a fresh array, decoded as every follower does.
    const data = new Uint8Array(encodeCommand({ op: "execute", statements }));
    entries.push({ term: 1 + Math.floor(index / 100), index, kind: "normal", timestampMs: 1_700_000_000_000 + index * 1_337, data });
  }
  return entries;
}

/** Every table's rows (svc's own included) and the schema, hashed, read through a connection of its own. */
function storeHash(store: Store): string {
  const db = new Database(store.path, { readonly: true });
  try {
    const rows = (sql: string): unknown[][] => db.query(sql).values().map((r) => r.map((v) => (v instanceof Uint8Array ? Buffer.from(v).toString("hex") : v)));
    const tables = rows("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").map((r) => String(r[0]));
    const parts: unknown[] = [rows("SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY type, name")];
    for (const t of tables) {
      if (t.startsWith("sqlite_")) continue;
      parts.push(t, rows(`SELECT * FROM "${t}" ORDER BY 1`));
    }
    return Bun.hash(JSON.stringify(parts)).toString(16);
  } finally {
    db.close();
  }
}

/** What an entry's result says that every node must agree on (not last_insert_id: the leader's answer only). */
function verdict(result: ApplyResult | undefined): unknown {
  if (result?.kind !== "execute") return result?.kind;
  return result.ok ? { ok: true } : { ok: false, at: result.statementIndex, message: result.message };
}

describe("apply is deterministic", () => {
  for (let run = 0; run < runs; run++) {
    const seed = baseSeed + run;
    test(`a store rebuilt from a snapshot and the later entries matches one that applied them all (seed ${seed})`, () => {
      const r = createPrng(seed);
      const entries = makeEntries(r);
      const pathA = tempStorePath();
      const pathB = tempStorePath();
      let a = Store.open(pathA);
      let b = Store.open(pathB);
      cleanups.push(() => { a.close(); b.close(); });
      const snapshotAt = 20 + r.nextInt(entriesCount / 2);
      const rebuildAt = snapshotAt + 1 + r.nextInt(entriesCount / 3);
      let image: Uint8Array | null = null;
      const failures: string[] = [];
      for (const entry of entries) {
        const [ra] = a.apply([entry]);
        const [rb] = b.apply([entry]);
        if (JSON.stringify(verdict(ra)) !== JSON.stringify(verdict(rb))) {
          failures.push(`entry ${entry.index}: ${JSON.stringify(verdict(ra))} != ${JSON.stringify(verdict(rb))}`);
        }
        if (entry.index === snapshotAt) image = b.serialize();
        if (entry.index === rebuildAt) {
          // B restarts from its snapshot and replays the log after it.
          expect(image).not.toBeNull();
          b.close();
          const imagePath = `${pathB}.image`;
          fs.writeFileSync(imagePath, image as Uint8Array);
          Store.installImage(imagePath, pathB);
          b = Store.open(pathB);
          expect(b.appliedIndex).toBe(snapshotAt);
          for (const replayed of entries.slice(snapshotAt, rebuildAt)) b.apply([replayed]);
        }
        const ha = storeHash(a);
        const hb = storeHash(b);
        if (ha !== hb) failures.push(`entry ${entry.index}: stores differ after ${new TextDecoder().decode(entry.data)}`);
        if (failures.length > 0) break;
      }
      // One more check of a node that merely restarted (a fresh connection, no rebuild).
      a.close();
      a = Store.open(pathA);
      expect(storeHash(a)).toBe(storeHash(b));
      expect(failures).toEqual([]);
    });
  }

  test("connection-state functions, TEMP objects and oversized blobs fail the statement, the same way everywhere", () => {
    const store = Store.open(tempStorePath());
    cleanups.push(() => store.close());
    let index = 0;
    const apply = (...sqls: string[]): ApplyResult | undefined => {
      index++;
      const data = encodeCommand({ op: "execute", statements: sqls.map((sql) => ({ sql, params: [] })) });
      return store.apply([{ term: 1, index, kind: "normal", timestampMs: 1_700_000_000_000, data: new Uint8Array(data) }])[0];
    };
    expect(apply("CREATE TABLE t (a)")).toMatchObject({ ok: true });
    for (const [sql, message] of [
      ["INSERT INTO t VALUES (total_changes())", /total_changes\(\) is not allowed/],
      ["INSERT INTO t VALUES (sqlite_version())", /sqlite_version\(\) is not allowed/],
      ["INSERT INTO t VALUES (fts5_source_id())", /fts5_source_id\(\) is not allowed/],
      ["CREATE TEMP TABLE x (a)", /TEMP objects are not allowed/],
      ["CREATE TABLE temp.x (a)", /TEMP objects are not allowed/],
      ["CREATE TEMP TRIGGER tt AFTER INSERT ON t BEGIN SELECT 1; END", /TEMP objects are not allowed/],
      ["INSERT INTO t VALUES (randomblob(100000000))", /randomblob\(100000000\) is larger than/],
      ["INSERT INTO t VALUES (zeroblob(100000000))", /zeroblob\(100000000\) is larger than/],
    ] as const) {
      const result = apply(sql);
      expect(result).toMatchObject({ kind: "execute", ok: false });
      expect(result?.kind === "execute" && !result.ok ? result.message : "").toMatch(message);
    }
    // Nothing TEMP was left behind by the failed statements.
    expect(store.query("SELECT count(*) FROM temp.sqlite_schema WHERE name NOT LIKE '\\_svc\\_%' ESCAPE '\\'", []).rows).toEqual([[0]]);
    // changes() and last_insert_rowid() start from 0 in every entry.
    expect(apply("INSERT INTO t VALUES (1), (2), (3)")).toMatchObject({ ok: true });
    expect(apply("INSERT INTO t VALUES (changes() * 100 + last_insert_rowid())")).toMatchObject({ ok: true });
    expect(store.query("SELECT a FROM t ORDER BY rowid DESC LIMIT 1", []).rows).toEqual([[0]]);
    expect(apply("INSERT INTO t VALUES (7), (8)", "INSERT INTO t VALUES (changes() * 100 + last_insert_rowid())")).toMatchObject({ ok: true });
    expect(store.query("SELECT a FROM t ORDER BY rowid DESC LIMIT 1", []).rows).toEqual([[206]]);
    // 'localtime' and 'utc' are taken in UTC, whatever the node's time zone: they change nothing.
    expect(apply("INSERT INTO t VALUES (datetime('2024-01-01 00:00:00', 'utc')), (strftime('%H:%M', 'now', 'LocalTime'))")).toMatchObject({ ok: true });
    expect(store.query("SELECT a FROM t ORDER BY rowid DESC LIMIT 2", []).rows).toEqual([["22:13"], ["2024-01-01 00:00:00"]]);
    // 'subsec' as the time value is the entry's time, with its milliseconds.
    expect(apply("INSERT INTO t VALUES (unixepoch('subsec')), (unixepoch('SUBSECOND')), (datetime('subsec')), (strftime('%f', 'subsecond')), (timediff('subsec', '2023-11-14 22:13:20'))")).toMatchObject({ ok: true });
    expect(store.query("SELECT a FROM t ORDER BY rowid DESC LIMIT 5", []).rows).toEqual([["+0000-00-00 00:00:00.000"], ["20.000"], ["2023-11-14 22:13:20.000"], [1_700_000_000], [1_700_000_000]]);
  });

  test("an entry checked as one index and logged at another fails, the same way everywhere", () => {
    const store = Store.open(tempStorePath());
    cleanups.push(() => store.close());
    const data = encodeCommand({ op: "execute", statements: [{ sql: "CREATE TABLE t (a)", params: [] }], checkedIndex: 2 });
    const [result] = store.apply([{ term: 1, index: 1, kind: "normal", timestampMs: 0, data: new Uint8Array(data) }]);
    expect(result).toMatchObject({ kind: "execute", ok: false, statementIndex: 0 });
    expect(store.query("SELECT count(*) FROM sqlite_schema WHERE name = 't'", []).rows).toEqual([[0]]);
  });
});
