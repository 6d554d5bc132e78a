// The SQL process: a child of the node that runs statements whose cost nobody can bound in
// advance, so that the node can stop them by killing it (bun:sqlite cannot interrupt a
// statement, and a Worker inside a SQLite call cannot be stopped: PLATFORM.md). Two jobs:
//   query: a client's read, on its own read-only connection to the store file (WAL mode lets
//          another process read while the node writes). Rows come back capped by size.
//   check: a write batch run as the entry it would become (same statements, same entry
//          values for random() and 'now', same guards as Store.apply) inside a transaction
//          that is always rolled back, on a read-write connection whose changes never leave
//          its page cache (cache_spill off): whether it finishes, and how it fails if it does.
// One request at a time, over the IPC channel; the node enforces the time and memory limits.
// The process exits when the node goes away (its channel closes).

import { Database, type SQLQueryBindings, type Statement as SqliteStatement } from "bun:sqlite";
import { errorMessage } from "../util/errors.ts";
import type { SqlValue, Statement } from "./command.ts";
import { ApplyGuards } from "./_apply-guards.ts";
import { DeterministicFunctions, blobSize } from "./determinism.ts";
import { isRowidsUsedUp, rowidsUsedUpMessage } from "./_rowid-limit.ts";
import { isStoreDamage, isVirtualTableCorrupt } from "./damage.ts";
import { rowJsonText } from "./_json-rows.ts";

export type SqlProcessRequest =
  | { id: number; kind: "query"; path: string; sql: string; params: SqlValue[]; resultBytesMax: number }
  | { id: number; kind: "check"; path: string; statements: Statement[]; term: number; index: number; timestampMs: number };

/**
 * The statement of a tried batch that fails, as it would when applied. `virtualTableCorrupt`:
 * a virtual table found its contents broken (SQLITE_CORRUPT_VTAB): such a batch is never
 * logged (at apply that error is damage, see isDamageAtApply).
 */
export interface CheckFailure {
  statementIndex: number;
  message: string;
  virtualTableCorrupt?: true;
}

export type SqlProcessReply =
  /** `rowsJson`: the rows as the answer writes them (_json-rows.ts); `bytes`: its length (the pool looks at the process after a large answer). */
  | { id: number; kind: "rows"; columns: string[]; rowsJson: string; bytes?: number }
  | { id: number; kind: "checked"; failed: CheckFailure | null }
  /** Sent once at start (id 0): the process takes requests from now on. */
  | { id: number; kind: "ready" }
  /**
   * `tooLarge`: the result passed resultBytesMax. `environmental`: not the statement's fault (busy, I/O).
   * `damaged`: SQLite found the store file damaged (damage.ts).
   */
  | { id: number; kind: "error"; message: string; tooLarge?: boolean; environmental?: boolean; damaged?: boolean };

/** Set in a SQL process's environment: the compiled binary runs this instead of its commands. */
export const sqlProcessEnvKey = "SVC_SQL_PROCESS";
/** SQLite's page cache for the process's connections, in KiB (a share of max_memory_mb). */
export const sqlProcessCacheEnvKey = "SVC_SQL_CACHE_KIB";

/** The page cache each connection gets: what the node says, else SQLite's default (2 MB). */
function cacheKib(): number {
  const kib = Number(process.env[sqlProcessCacheEnvKey] ?? "");
  return Number.isSafeInteger(kib) && kib > 0 ? kib : 2000;
}

/** What blobSize() says of a blob past its cap. */
const blobTooLarge = /blob\(.*\) is larger than the \d+ bytes allowed here/;

let readerPath = "";
let reader: Database | null = null;
let readerBlobCap = 0;
let writerPath = "";
let writer: { db: Database; functions: DeterministicFunctions; guards: ApplyGuards } | null = null;

/** Serve requests until the node closes the channel. */
export function runSqlProcess(): void {
  const send = process.send?.bind(process);
  if (send === undefined) {
    process.stderr.write("svc: the SQL process runs only as a child of a node\n");
    process.exit(2);
  }
  process.on("disconnect", () => process.exit(0));
  process.on("message", (message: SqlProcessRequest) => {
    let reply: SqlProcessReply;
    try {
      reply = message.kind === "query" ? runQuery(message) : runCheck(message);
    } catch (e) {
      const tooLarge = message.kind === "query" && blobTooLarge.test(errorMessage(e));
      reply = { id: message.id, kind: "error", message: errorMessage(e), environmental: isEnvironmental(e), tooLarge, damaged: isStoreDamage(e) };
    }
    send(reply);
  });
  send({ id: 0, kind: "ready" });
}

function openReader(path: string, blobBytesMax: number): Database {
  if (reader === null || readerPath !== path) {
    reader?.close();
    reader = new Database(path, { readonly: true });
    reader.run(`PRAGMA cache_size = -${cacheKib()}`);
    readerPath = path;
    readerBlobCap = blobBytesMax;
    // A read makes no blob larger than it may answer (the rest is bounded by the node's
    // memory watch on this process).
    // Deterministic, as SQLite's own and the applying connection's: a schema with zeroblob() in a
    // generated column or an index is read by this connection too ("non-deterministic functions
    // prohibited" would fail every query).
    reader.function("zeroblob", { deterministic: true }, (n: unknown) => new Uint8Array(blobSize("zeroblob", n, readerBlobCap)));
    reader.function("randomblob", (n: unknown) => crypto.getRandomValues(new Uint8Array(Math.max(1, blobSize("randomblob", n, readerBlobCap)))));
  }
  readerBlobCap = blobBytesMax;
  return reader;
}

/**
 * What holding one row's text costs beyond its characters (a string of its own and its slot in
 * the list), counted toward resultBytesMax: a result of many narrow rows (`SELECT 1 FROM t`)
 * would otherwise pass the process's memory cap long before its text reached the limit.
 */
const rowHeldBytes = 48;

function runQuery(req: Extract<SqlProcessRequest, { kind: "query" }>): SqlProcessReply {
  const db = openReader(req.path, req.resultBytesMax);
  const stmt = db.prepare(req.sql);
  try {
    stmt.safeIntegers(true);
    const columns = stmt.columnNames;
    const params = req.params as SQLQueryBindings[];
    const tooLarge = (): SqlProcessReply => ({
      id: req.id, kind: "error", tooLarge: true,
      message: `result is larger than ${req.resultBytesMax} bytes (counting ${rowHeldBytes} bytes a row beyond its text)`,
    });
    // Rows one at a time when the columns have distinct names (iterate() gives objects);
    // otherwise all at once, still under the node's memory watch. Each row is kept as its
    // JSON text only: the values it was read as are garbage at once.
    const distinct = new Set(columns).size === columns.length;
    const texts: string[] = [];
    let bytes = 2;
    const add = (row: unknown[]): boolean => {
      const text = rowJsonText(row);
      // Its bytes as answered (UTF-8): a character past ASCII takes two to four.
      bytes += Buffer.byteLength(text) + 1 + rowHeldBytes;
      texts.push(text);
      return bytes <= req.resultBytesMax;
    };
    if (distinct) {
      for (const obj of stmt.iterate(...params) as IterableIterator<Record<string, unknown>>) {
        if (!add(columns.map((c) => obj[c]))) return tooLarge();
      }
    } else {
      for (const row of stmt.values(...params)) if (!add(row)) return tooLarge();
    }
    return { id: req.id, kind: "rows", columns, rowsJson: `[${texts.join(",")}]`, bytes };
  } finally {
    stmt.finalize();
  }
}

function openWriter(path: string): NonNullable<typeof writer> {
  if (writer === null || writerPath !== path) {
    writer?.db.close();
    const db = new Database(path);
    // As the applying connection has it (Store): constraints must fail here as they fail there.
    db.run("PRAGMA foreign_keys = ON");
    // Changes stay in this process's memory and are rolled back: the file never sees them.
    db.run("PRAGMA cache_spill = OFF");
    db.run("PRAGMA wal_autocheckpoint = 0");
    db.run("PRAGMA busy_timeout = 2000");
    db.run(`PRAGMA cache_size = -${cacheKib()}`);
    const functions = new DeterministicFunctions();
    functions.install(db);
    writer = { db, functions, guards: new ApplyGuards(db) };
    writerPath = path;
  }
  return writer;
}

function runCheck(req: Extract<SqlProcessRequest, { kind: "check" }>): SqlProcessReply {
  const { db, functions, guards } = openWriter(req.path);
  db.run("BEGIN IMMEDIATE");
  try {
    guards.beforeEntry(req.statements);
    const failed = functions.withEntry(req.term, req.index, req.timestampMs, () => {
      for (let i = 0; i < req.statements.length; i++) {
        const s = req.statements[i];
        if (s === undefined) continue;
        let stmt: SqliteStatement | null = null;
        try {
          stmt = db.prepare(s.sql);
          stmt.run(...(s.params as SQLQueryBindings[]));
          guards.afterStatement(s.sql);
        } catch (e) {
          // As at apply (_rowid-limit.ts): SQLITE_FULL with room left is the row, not the disk.
          if (isRowidsUsedUp(e, req.path)) return { statementIndex: i, message: rowidsUsedUpMessage };
          if (isEnvironmental(e) || isStoreDamage(e)) throw e;
          return isVirtualTableCorrupt(e) ? { statementIndex: i, message: errorMessage(e), virtualTableCorrupt: true as const } : { statementIndex: i, message: errorMessage(e) };
        } finally {
          stmt?.finalize();
        }
      }
      return null;
    });
    return { id: req.id, kind: "checked", failed };
  } finally {
    if (db.inTransaction) db.run("ROLLBACK");
  }
}

/** Not the statement's doing: the lock was busy, the disk failed. The check says nothing then. */
function isEnvironmental(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === "string" && (code.startsWith("SQLITE_BUSY") || code === "SQLITE_FULL" || code.startsWith("SQLITE_IOERR") || code === "SQLITE_NOMEM");
}
