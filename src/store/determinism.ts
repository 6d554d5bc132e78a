// Makes applying an entry deterministic on every node: random(), randomblob() and every
// date/time function that reads 'now' (CURRENT_TIMESTAMP and friends included) take their
// values from the entry being applied — the leader's timestamp and a PRNG seeded by the
// entry's term and index — through function overrides on the connection.
//
// The date functions are evaluated by SQLite itself on a helper connection that has no
// overrides, with 'now' (and 'subsec' as a time value) replaced by the entry's time: same
// semantics, fixed clock. In a write the 'localtime' and 'utc' modifiers are taken in UTC
// (they change nothing): the node's time zone can differ between nodes.
//
// Functions that read the connection or the binary rather than the data (total_changes(),
// sqlite_version(), sqlite_offset(), …) fail the statement, the same way on every node:
// their values differ between a node that applied since it started and one rebuilt from a
// snapshot, or between builds. changes() and last_insert_rowid() give the entry's own values
// (the store resets them when an entry starts, see Store). Blobs made by randomblob() and
// zeroblob() larger than writeBlobBytesMax fail the statement: never cut short.

import { Database, type SQLFunctionResult, type Statement } from "bun:sqlite";
import { createPrng, type Prng } from "../util/prng.ts";

/** What the functions read while an entry applies; the PRNG is made on its first use. */
interface ApplyContext {
  timestampMs: number;
  term: number;
  index: number;
  prng: Prng | null;
}

const dateFunctions = ["date", "time", "datetime", "julianday", "unixepoch", "strftime", "timediff"] as const;
/** The largest randomblob()/zeroblob() a write may make: a constant, so every node agrees. */
export const writeBlobBytesMax = 64 * 1024 * 1024;

/** Functions whose value depends on the connection, the file layout or the build. */
export const connectionStateFunctions: Readonly<Record<string, string>> = {
  total_changes: "it counts the changes since the node's connection opened, which differs between nodes; use changes()",
  sqlite_version: "the SQLite version can differ between nodes (a rolling upgrade)",
  sqlite_source_id: "the SQLite build can differ between nodes (a rolling upgrade)",
  sqlite_compileoption_get: "the SQLite build can differ between nodes (a rolling upgrade)",
  sqlite_compileoption_used: "the SQLite build can differ between nodes (a rolling upgrade)",
  fts5_source_id: "the SQLite build, FTS5 with it, can differ between nodes (a rolling upgrade)",
  sqlite_offset: "a row's place in the file can differ between nodes",
};

/**
 * N for randomblob(N) and zeroblob(N) as SQLite reads it (a non-number is 0, a real is cut
 * to an integer), refused beyond `maxBytes`.
 */
export function blobSize(name: string, sizeArg: unknown, maxBytes: number): number {
  const n = typeof sizeArg === "bigint" ? Number(sizeArg) : typeof sizeArg === "number" ? Math.trunc(sizeArg) : Number(sizeArg) || 0;
  if (!Number.isFinite(n) || n > maxBytes) {
    throw new Error(`${name}(${String(sizeArg)}) is larger than the ${maxBytes} bytes allowed here`);
  }
  return Math.max(0, n);
}

export class DeterministicFunctions {
  private context: ApplyContext | null = null;
  private readonly helper = new Database(":memory:");
  private readonly helperStatements = new Map<string, Statement>();

  /** Register the overrides on a connection that applies entries. */
  install(db: Database): void {
    db.function("random", () => this.randomInt64());
    db.function("randomblob", (n: unknown) => this.randomBlob(n));
    // Deterministic, as SQLite's own: allowed where SQLite allows it (generated columns, indexes).
    db.function("zeroblob", { deterministic: true }, (n: unknown) => new Uint8Array(blobSize("zeroblob", n, writeBlobBytesMax)));
    for (const [name, why] of Object.entries(connectionStateFunctions)) {
      const refuse = (): never => {
        throw new Error(`${name}() is not allowed in a write: ${why}`);
      };
      db.function(name, { varargs: true }, refuse);
      // SQLite finds a function the connection holds by its exact argument count before a
      // varargs one of the same name: FTS5's fts5_source_id() is replaced with its own count.
      db.function(name, refuse);
    }
    db.function("load_extension", { varargs: true }, () => {
      throw new Error("load_extension is not allowed");
    });
    for (const name of dateFunctions) {
      db.function(name, { varargs: true }, (...args: unknown[]) => this.date(name, args));
    }
    db.function("current_timestamp", () => this.date("datetime", []));
    db.function("current_date", () => this.date("date", []));
    db.function("current_time", () => this.date("time", []));
  }

  /** Run `fn` with the values of entry (term, index, timestampMs). */
  withEntry<T>(term: number, index: number, timestampMs: number, fn: () => T): T {
    this.context = { timestampMs, term, index, prng: null };
    try {
      return fn();
    } finally {
      this.context = null;
    }
  }

  private currentTimestampMs(): number {
    // Outside an entry (reads through this connection) the node's own clock is fine:
    // nothing read that way is replicated.
    return this.context?.timestampMs ?? Date.now();
  }

  /** The entry's PRNG, seeded by its term and index (most entries never call for one). */
  private currentPrng(): Prng {
    const context = this.context;
    if (context === null) return createPrng(Date.now() >>> 0);
    context.prng ??= createPrng(context.index >>> 0, (context.term * 0x9e3779b1 + Math.floor(context.index / 0x1_0000_0000)) >>> 0);
    return context.prng;
  }

  private randomInt64(): bigint {
    const prng = this.currentPrng();
    const hi = BigInt(prng.nextU32());
    const lo = BigInt(prng.nextU32());
    return BigInt.asIntN(64, (hi << 32n) | lo);
  }

  private randomBlob(sizeArg: unknown): Uint8Array {
    // SQLite makes at least one byte.
    const sizeBytes = Math.max(1, blobSize("randomblob", sizeArg, writeBlobBytesMax));
    const prng = this.currentPrng();
    const out = new Uint8Array(sizeBytes);
    for (let i = 0; i < sizeBytes; i += 4) {
      const v = prng.nextU32();
      out[i] = v & 0xff;
      if (i + 1 < sizeBytes) out[i + 1] = (v >>> 8) & 0xff;
      if (i + 2 < sizeBytes) out[i + 2] = (v >>> 16) & 0xff;
      if (i + 3 < sizeBytes) out[i + 3] = v >>> 24;
    }
    return out;
  }

  private date(name: (typeof dateFunctions)[number], args: unknown[]): SQLFunctionResult {
    const now = formatSqliteTime(this.currentTimestampMs());
    // strftime's first argument is its format; timediff takes two time values and no modifier.
    const timeAt = name === "strftime" ? 1 : 0;
    const replaced: unknown[] = [];
    args.forEach((a, i) => {
      const word = typeof a === "string" ? a.trim().toLowerCase() : null;
      const isTime = i === timeAt || (name === "timediff" && i === 1);
      if (word === "now") replaced.push(now);
      // 'subsec' as the time value means 'now' with fractional seconds (SQLite 3.42).
      else if (isTime && (word === "subsec" || word === "subsecond")) replaced.push(now, ...(name === "timediff" ? [] : ["subsec"]));
      // 'localtime' and 'utc' read the node's time zone: in a write they are taken in UTC, where
      // both change nothing, on every node. (Refused, they would fail entries of the log that
      // applied before on nodes that then ran in UTC.)
      else if (!isTime && (word === "localtime" || word === "utc") && this.context !== null) return;
      else replaced.push(a);
    });
    // With no time value, these functions mean 'now'.
    if (replaced.length === timeAt) replaced.push(now);
    const key = `${name}/${replaced.length}`;
    let stmt = this.helperStatements.get(key);
    if (stmt === undefined) {
      stmt = this.helper.prepare(`SELECT ${name}(${replaced.map(() => "?").join(", ")}) AS v`);
      this.helperStatements.set(key, stmt);
    }
    const row = stmt.get(...(replaced as never[])) as { v: unknown } | null;
    return (row?.v ?? null) as SQLFunctionResult;
  }
}

/** 'YYYY-MM-DD HH:MM:SS.SSS' in UTC, the form SQLite's date functions read. */
export function formatSqliteTime(ms: number): string {
  return new Date(ms).toISOString().replace("T", " ").replace("Z", "");
}
