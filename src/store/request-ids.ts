// Safe retries: the request ids of recent writes and what each one answered, kept in the
// store (so in the replicated state and in every snapshot), written in the same transaction
// as the entry that carried the id. An execute entry whose id is still remembered applies
// nothing and answers the first one's result: a client may retry a write whose outcome it
// does not know (OUTCOME_UNKNOWN, a lost connection) with the same id, on any node.
//
// What is remembered is bounded, and forgotten the same way on every replica (by the
// entries' own timestamps and order, never a local clock), each time an entry with an id
// applies:
//   - an id whose entry is more than requestWindowMs older than the entry applying now;
//   - past requestsRememberedMax ids, or past requestOutcomesBytesMax of answers, the oldest
//     (in log order) first.
// A retry after its id is forgotten is a new write: it applies again.
//
// With each id goes a hash of the statements it carried: a request that reuses an id for other
// statements (a client bug) is answered REQUEST_ID_REUSED and applies nothing, rather than the
// first write's answer, which would say statements succeeded that never ran. Ids remembered
// by a version that kept no hash answer as before.
//
// The budget is kept without counting rows: each row's key is the running total of the
// budget spent so far (a row costs its bytes, at least requestOutcomesBytesMax /
// requestsRememberedMax), so the rows within budget are those whose key lies within
// requestOutcomesBytesMax of the newest: one range delete on the primary key.

import type { Database, Statement as SqliteStatement } from "bun:sqlite";
import type { Entry } from "../util/log-data.ts";
import { assert } from "../util/assert.ts";
import { stringifyJson64 } from "../util/json64.ts";
import { internalTablePrefix } from "./_sql.ts";
import type { Statement } from "./command.ts";

/** One statement's result (store.ts StatementResult). */
interface StatementResult {
  rowsAffected: number;
  lastInsertId: number | bigint;
}

/** How long a request id is remembered, measured with the entries' timestamps (10 minutes). */
export const requestWindowMs = 10 * 60 * 1000;
/** At most this many request ids are remembered; the oldest is forgotten first. */
export const requestsRememberedMax = 100_000;
/** At most this much of remembered answers (their JSON); the oldest is forgotten first. */
export const requestOutcomesBytesMax = 64 * 1024 * 1024;
/** Spaced at least this far apart, at most requestsRememberedMax keys fit within the byte budget. */
const rowCostBytesMin = Math.ceil(requestOutcomesBytesMax / requestsRememberedMax);

const table = `${internalTablePrefix}requests`;

/** What an execute entry answered, as remembered for its request id (`bodyHash`: null when not kept). */
export type RequestOutcome = RequestAnswer & { bodyHash: string | null };
/** What a retry of a remembered request id is answered. */
export type RequestAnswer =
  | { ok: true; results: StatementResult[]; firstIndex: number }
  | { ok: false; statementIndex: number; message: string; firstIndex: number };

/** What identifies a request's statements: their SQL and parameters, in order. */
export function requestBodyHash(statements: readonly Statement[]): string {
  const hasher = new Bun.CryptoHasher("sha256");
  hasher.update(stringifyJson64(statements.map((st) => [st.sql, st.params])));
  return hasher.digest("hex").slice(0, 32);
}

/** The answer a remembered outcome gives a retry (its hash is the store's business). */
export function answerOf(outcome: RequestOutcome): RequestAnswer {
  const { bodyHash: _, ...answer } = outcome;
  return answer;
}

/** Whether `outcome` was remembered for other statements than those hashed to `bodyHash`. */
export function reusedFor(outcome: RequestOutcome, bodyHash: string): boolean {
  return outcome.bodyHash !== null && outcome.bodyHash !== bodyHash;
}

/** The answer to a request id used again for other statements. */
export function requestIdReusedMessage(id: string, firstIndex: number): string {
  return `request_id ${JSON.stringify(id)} was used by another write (log entry ${firstIndex}) with other statements; nothing was applied`;
}

export class RequestLog {
  private tableKnown = false;
  private statements: {
    find: SqliteStatement;
    newest: SqliteStatement;
    insert: SqliteStatement;
    forgetOlderThan: SqliteStatement;
    forgetBefore: SqliteStatement;
  } | null = null;

  constructor(private readonly db: Database) {}

  /**
   * Within an apply's transaction, as an entry carrying `id` starts: forget what the bounds
   * say to forget (as of this entry), then the outcome remembered for `id`, or null.
   */
  beforeEntry(id: string, entry: Entry): RequestOutcome | null {
    const s = this.prepared();
    s.forgetOlderThan.run(entry.timestampMs - requestWindowMs);
    return decodeRow(s.find.get(id));
  }

  /** Within the same transaction: remember what the entry carrying `id` answered. */
  remember(id: string, entry: Entry, outcome: { ok: true; results: StatementResult[] } | { ok: false; statementIndex: number; message: string }, bodyHash: string): void {
    const s = this.prepared();
    const text = outcome.ok
      ? JSON.stringify({ r: outcome.results.map((r) => [r.rowsAffected, typeof r.lastInsertId === "bigint" ? String(r.lastInsertId) : r.lastInsertId]), h: bodyHash })
      : JSON.stringify({ f: [outcome.statementIndex, outcome.message], h: bodyHash });
    const newest = (s.newest.get() as { k: number | bigint | null } | null)?.k ?? 0;
    const key = Number(newest) + Math.max(rowCostBytesMin, Buffer.byteLength(text) + id.length);
    s.insert.run(key, id, entry.index, entry.timestampMs, text);
    s.forgetBefore.run(key - requestOutcomesBytesMax);
  }

  /**
   * Outside any apply (the leader, before proposing a retry): the outcome remembered for
   * `id` if its entry is within the window of `nowMs`. An answer from here is an applied,
   * committed entry's; one not found here is settled by the entry's apply.
   */
  remembered(id: string, nowMs: number): RequestOutcome | null {
    if (!this.hasTable()) return null;
    const row = this.prepared().find.get(id) as { timestamp_ms: number } | null;
    if (row === null || row.timestamp_ms < nowMs - requestWindowMs) return null;
    return decodeRow(row);
  }

  /** How many request ids are remembered (for tests and stats). */
  count(): number {
    if (!this.hasTable()) return 0;
    return Number((this.db.query(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n);
  }

  private hasTable(): boolean {
    this.tableKnown ||= this.db.query("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?").get(table) !== null;
    return this.tableKnown;
  }

  private prepared(): NonNullable<RequestLog["statements"]> {
    if (this.statements !== null) return this.statements;
    if (!this.hasTable()) {
      // Made by the first entry with an id, inside its transaction: identically on every replica.
      this.db.run(`CREATE TABLE IF NOT EXISTS ${table} (
        budget_key INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        entry_index INTEGER NOT NULL,
        timestamp_ms INTEGER NOT NULL,
        outcome TEXT NOT NULL)`);
      this.db.run(`CREATE INDEX IF NOT EXISTS ${table}_by_time ON ${table} (timestamp_ms)`);
      this.tableKnown = true;
    }
    this.statements = {
      find: this.db.prepare(`SELECT entry_index, timestamp_ms, outcome FROM ${table} WHERE id = ?`),
      newest: this.db.prepare(`SELECT max(budget_key) AS k FROM ${table}`),
      insert: this.db.prepare(`INSERT INTO ${table} (budget_key, id, entry_index, timestamp_ms, outcome) VALUES (?, ?, ?, ?, ?)`),
      forgetOlderThan: this.db.prepare(`DELETE FROM ${table} WHERE timestamp_ms < ?`),
      forgetBefore: this.db.prepare(`DELETE FROM ${table} WHERE budget_key <= ?`),
    };
    return this.statements;
  }

  /**
   * A transaction was rolled back: the table may be gone with it (made by the entry that first
   * carried an id), so what was learnt of it is looked up again.
   */
  forget(): void {
    this.tableKnown = false;
    this.close();
  }

  close(): void {
    if (this.statements === null) return;
    for (const s of Object.values(this.statements)) s.finalize();
    this.statements = null;
  }
}

function decodeRow(row: unknown): RequestOutcome | null {
  if (row === null || row === undefined) return null;
  const r = row as { entry_index: number; outcome: string };
  const v = JSON.parse(r.outcome) as { r?: [number, number | string][]; f?: [number, string]; h?: string };
  const firstIndex = Number(r.entry_index);
  const bodyHash = typeof v.h === "string" ? v.h : null;
  if (v.f !== undefined) return { ok: false, statementIndex: v.f[0], message: v.f[1], firstIndex, bodyHash };
  assert(Array.isArray(v.r), "a remembered outcome holds results or a failure");
  return {
    ok: true,
    results: v.r.map(([rowsAffected, id]) => ({ rowsAffected, lastInsertId: typeof id === "string" ? BigInt(id) : id })),
    firstIndex,
    bodyHash,
  };
}
