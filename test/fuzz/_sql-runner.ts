// A child process for the SQL admission fuzz: runs a statement the read check accepted on a
// read-write connection and says whether it wrote. A child, because an accepted read may run
// for ever (bun:sqlite cannot interrupt a statement; the parent kills this process instead).

import { Database } from "bun:sqlite";

export type RunnerRequest = { id: number; sql: string; parameterCount: number };
export type RunnerReply = { id: number; wrote: string | null; error: string | null };

const schema = [
  "CREATE TABLE t (a INTEGER PRIMARY KEY, b TEXT, c BLOB)",
  "CREATE TABLE u (x, y)",
  "CREATE VIEW v AS SELECT a, b FROM t",
  "INSERT INTO t VALUES (1, 'one', x'01'), (2, 'two', NULL), (3, NULL, x'ff')",
  "INSERT INTO u VALUES (1, 2), ('a', 'b')",
];

function fresh(): Database {
  const db = new Database(":memory:");
  for (const s of schema) db.run(s);
  // Blobs stay small: a read that asks for a gigabyte proves nothing about writing.
  db.function("zeroblob", (n: unknown) => new Uint8Array(Math.min(1024, Math.max(0, Number(n) || 0))));
  db.function("randomblob", (n: unknown) => new Uint8Array(Math.min(1024, Math.max(1, Number(n) || 0))));
  return db;
}

let db = fresh();

/** What a write would change: rows changed, schema, user_version, the data itself. */
function state(): string {
  const one = (sql: string): unknown => Object.values(db.query(sql).get() as Record<string, unknown>)[0];
  return JSON.stringify([
    one("SELECT total_changes()"), one("PRAGMA schema_version"), one("PRAGMA user_version"), one("PRAGMA application_id"),
    db.query("SELECT * FROM t ORDER BY a").values(), db.query("SELECT * FROM u ORDER BY rowid").values(),
    db.query("SELECT type, name, sql FROM sqlite_schema ORDER BY name").values(), db.inTransaction,
  ], (_, v) => (typeof v === "bigint" ? v.toString() : v instanceof Uint8Array ? Buffer.from(v).toString("hex") : v));
}

process.on("message", (request: RunnerRequest) => {
  const before = state();
  let error: string | null = null;
  try {
    const stmt = db.prepare(request.sql);
    try {
      stmt.all(...(Array.from({ length: request.parameterCount }, () => null) as null[]));
    } finally {
      stmt.finalize();
    }
  } catch (e) {
    error = e instanceof Error ? e.message : String(e);
  }
  let after: string;
  try {
    after = state();
  } catch (e) {
    after = `state unreadable: ${e instanceof Error ? e.message : String(e)}`;
  }
  const wrote = after === before ? null : `before ${before}\n  after  ${after}`;
  if (wrote !== null) db = fresh();
  process.send?.({ id: request.id, wrote, error } satisfies RunnerReply);
});
process.on("disconnect", () => process.exit(0));
