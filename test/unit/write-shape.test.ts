// Which writes may enter the log without being tried first: shapes bounded by their own size.

import { describe, expect, test } from "bun:test";
import { isPlainWrite } from "../../src/store/index.ts";

describe("plain writes", () => {
  test("INSERT … VALUES, UPDATE and DELETE by column equality with placeholders or literals are plain", () => {
    for (const sql of [
      "INSERT INTO kv (k, v) VALUES (?, ?)",
      "insert or replace into main.kv values (?1, 'it''s', -2.5e3, NULL, x'00ff'), (:a, @b, $c, true, 0x10)",
      "REPLACE INTO \"odd name\" ([a b]) VALUES (?);",
      "UPDATE kv SET v = ?, w = 3 WHERE k = ? AND j = 'x'",
      "DELETE FROM kv WHERE k = ?",
    ]) expect(`${sql}: ${isPlainWrite(sql)}`).toBe(`${sql}: true`);
    // Many rows of literals in one statement (a bulk load) are plain too.
    const rows = Array.from({ length: 2000 }, (_, i) => `(${i}, '${"v''".repeat(100)}', -1.5e3, X'00')`).join(", ");
    expect(isPlainWrite(`INSERT INTO kv (k, v, w, b) VALUES ${rows}`)).toBe(true);
  });

  test("anything that calls, selects, joins, returns or hides text in a comment is tried first", () => {
    for (const sql of [
      "INSERT INTO kv VALUES (randomblob(?))",
      "INSERT INTO kv SELECT * FROM other",
      "INSERT INTO kv VALUES ((SELECT count(*) FROM a, b))",
      "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) INSERT INTO kv SELECT x FROM c",
      "UPDATE kv SET v = v + 1 WHERE k = ?",
      "UPDATE kv SET v = ? WHERE k > ?",
      "UPDATE kv SET v = ?",
      "DELETE FROM kv",
      "DELETE FROM kv WHERE k IN (SELECT k FROM other)",
      "INSERT INTO kv VALUES (?) RETURNING *",
      "INSERT INTO kv VALUES (?) ON CONFLICT DO NOTHING",
      "INSERT INTO kv /* a comment */ VALUES (?)",
      "CREATE TABLE t (a)",
    ]) expect(`${sql}: ${isPlainWrite(sql)}`).toBe(`${sql}: false`);
  });
});
