// Makes applying an entry deterministic on every node: random(), randomblob() and every
// date/time function that reads 'now' (CURRENT_TIMESTAMP and friends included) take their
// values from the entry being applied — the leader's timestamp and a PRNG seeded by the
// entry's term and index — through function overrides on the connection.
//
// The date functions are evaluated by SQLite itself on a helper connection that has no
// overrides, with 'now' replaced by the entry's time: same semantics, fixed clock.

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
const randomBlobBytesMax = 64 * 1024 * 1024;

export class DeterministicFunctions {
  private context: ApplyContext | null = null;
  private readonly helper = new Database(":memory:");
  private readonly helperStatements = new Map<string, Statement>();

  /** Register the overrides on a connection that applies entries. */
  install(db: Database): void {
    db.function("random", () => this.randomInt64());
    db.function("randomblob", (n: unknown) => this.randomBlob(n));
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
    const sizeBytes = Math.min(Math.max(1, Number(sizeArg) || 1), randomBlobBytesMax);
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
    const replaced = args.map((a) => (typeof a === "string" && a.trim().toLowerCase() === "now" ? now : a));
    // With no time value, these functions mean 'now' (strftime's first argument is its format).
    if (name === "strftime" ? replaced.length === 1 : replaced.length === 0) replaced.push(now);
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
