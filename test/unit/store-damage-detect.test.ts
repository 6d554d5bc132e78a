// What counts as a damaged store: SQLite's code, never a message a statement can choose.

import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { isStoreDamage } from "../../src/store/damage.ts";

function errorOf(run: () => void): unknown {
  try {
    run();
  } catch (e) {
    return e;
  }
  throw new Error("expected an error");
}

describe("store damage detection", () => {
  test("a trigger's RAISE with SQLite's damage message is a statement's error, not damage", () => {
    const db = new Database(":memory:");
    db.run("CREATE TABLE t (x)");
    db.run("CREATE TRIGGER forged BEFORE INSERT ON t BEGIN SELECT RAISE(ABORT, 'database disk image is malformed'); END");
    const e = errorOf(() => db.run("INSERT INTO t VALUES (1)"));
    expect((e as Error).message).toBe("database disk image is malformed");
    expect(isStoreDamage(e)).toBe(false);
    db.close();
  });

  test("an error without SQLite's code is never damage, whatever its message (it may quote a name a client chose)", () => {
    expect(isStoreDamage(new Error('TEMP objects are not allowed in a write (table database disk image is malformed)'))).toBe(false);
    expect(isStoreDamage("database disk image is malformed")).toBe(false);
  });

  test("SQLITE_CORRUPT (and its extended codes) and SQLITE_NOTADB are damage", () => {
    expect(isStoreDamage(Object.assign(new Error("database disk image is malformed"), { code: "SQLITE_CORRUPT" }))).toBe(true);
    expect(isStoreDamage(Object.assign(new Error("database disk image is malformed"), { code: "SQLITE_CORRUPT_INDEX" }))).toBe(true);
    expect(isStoreDamage(Object.assign(new Error("file is not a database"), { code: "SQLITE_NOTADB" }))).toBe(true);
    expect(isStoreDamage(Object.assign(new Error("no such table: t"), { code: "SQLITE_ERROR" }))).toBe(false);
  });

  test("an FTS5 index a client put out of step with its table (SQLITE_CORRUPT_VTAB) is the statement's error, not damage: the same on every node", () => {
    // Taken for damage, three reads stopped three nodes, again after each rebuild.
    const db = new Database(":memory:");
    db.run("CREATE TABLE docs (id INTEGER PRIMARY KEY, body TEXT)");
    db.run("CREATE VIRTUAL TABLE fe USING fts5 (body, content = docs, content_rowid = id)");
    db.run("INSERT INTO docs VALUES (2, 'hello again')");
    db.run("INSERT INTO fe (rowid, body) VALUES (2, 'hello again')");
    db.run("INSERT INTO fe (fe, rowid, body) VALUES ('delete', 2, 'zzz qqq')");
    const read = errorOf(() => db.query("SELECT rowid FROM fe WHERE fe MATCH 'hello' ORDER BY rank").all());
    expect((read as { code?: string }).code).toBe("SQLITE_CORRUPT_VTAB");
    expect(isStoreDamage(read)).toBe(false);
    expect(isStoreDamage(errorOf(() => db.run("INSERT INTO fe (fe, rank) VALUES ('integrity-check', 1)")))).toBe(false);
    db.close();
  });
});
