import { describe, expect, test } from "bun:test";
import { sqlTraits } from "../../src/store/_sql-traits.ts";

describe("sqlTraits", () => {
  test("reads each statement's text as the apply needs it, the same whether or not it was seen before", () => {
    const cases: [string, Partial<Record<keyof ReturnType<typeof sqlTraits>, boolean>>][] = [
      ["INSERT INTO t VALUES (1)", { inserting: true, creates: false, fail: false }],
      ["/* c */ -- x\n  replace into t values (1)", { inserting: true }],
      ["WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x", { inserting: true }],
      ["UPDATE t SET x = changes()", { inserting: false, connState: true, counted: true }],
      ["CREATE VIRTUAL TABLE f USING fts5(a)", { counted: false, creates: true }],
      [" delete FROM t", { counted: true, inserting: false }],
      ["INSERT OR FAIL INTO t VALUES (1)", { fail: true, inserting: true }],
      ["CREATE TEMP TABLE x (a)", { creates: true, schemaChange: true }],
      ["ALTER TABLE t ADD COLUMN b", { schemaChange: true, creates: false }],
      ["EXPLAIN SELECT 1", { explain: true }],
      ["SELECT last_insert_rowid()", { connState: true }],
    ];
    for (let round = 0; round < 2; round++) {
      for (const [sql, expected] of cases) expect(sqlTraits(sql)).toMatchObject(expected);
    }
    // Past the number of texts kept, the oldest go and are read again when they come back.
    for (let i = 0; i < 3000; i++) expect(sqlTraits(`INSERT INTO t VALUES (${i})`).inserting).toBe(true);
    for (const [sql, expected] of cases) expect(sqlTraits(sql)).toMatchObject(expected);
    // A long text (values written inline) is read each time, not kept.
    const long = `UPDATE t SET v = '${"x".repeat(5000)}' WHERE changes() = 0`;
    expect(sqlTraits(long)).toMatchObject({ connState: true, inserting: false });
  });
});
