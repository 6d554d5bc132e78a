// What keeps an entry's effect a function of the entry and the data alone, beyond the
// function overrides of determinism.ts:
//   - changes() and last_insert_rowid() read the connection's memory of the statement before:
//     after a restart that is 0, on a node that applied the previous entry it is that
//     entry's. When an entry (or a trigger or view it may fire) names them, both are reset to
//     0 as the entry starts, so they give the entry's own values on every node (a table's
//     DEFAULT, CHECK or generated column may name them too: a table counts as a trigger). So are they
//     before an entry with a request id: its answer (a statement's last_insert_id, which an
//     UPDATE leaves at the connection's earlier insert) is kept in the replicated state.
//   - TEMP objects live in one connection and are never replicated: a statement that leaves
//     one behind fails, identically everywhere.
//   - A batch that was checked before it entered the log (WriteChecker) was checked as the
//     entry at one index, against the state before it: applied at another index it fails.
// And one concern of the process rather than the data: a write check in another process may
// hold SQLite's write lock for a moment, so the apply's BEGIN waits for it instead of failing.

import type { Database } from "bun:sqlite";
import { internalTablePrefix } from "./_sql.ts";
import { sqlTraits } from "./_sql-traits.ts";

const resetTable = `${internalTablePrefix}reset`;
const tempObjectsSql = `SELECT type, name FROM temp.sqlite_schema WHERE name NOT LIKE '${internalTablePrefix.replaceAll("_", "\\_")}%' ESCAPE '\\' LIMIT 1`;
/** How long an apply waits for another process's write lock (a write check is killed long before). */
const busyWaitMsMax = 30_000;

export class ApplyGuards {
  /** Counts entries that may have changed the schema: what was learnt of it before is stale. */
  schemaEpoch = 0;
  /** Whether a trigger, view or table names changes() or last_insert_rowid(); null: look again. */
  private schemaNamesConnState: boolean | null = null;

  constructor(private readonly db: Database) {}

  /**
   * Before an execute entry's statements run. `remembered`: the entry's answer is kept in the
   * replicated state (a request id): its last_insert_id must not depend on the connection either.
   */
  beforeEntry(statements: readonly { sql: string }[], remembered = false): void {
    let named = false;
    for (const s of statements) {
      const traits = sqlTraits(s.sql);
      if (traits.connState) named = true;
      if (traits.schemaChange) {
        this.schemaNamesConnState = null;
        this.schemaEpoch++;
      }
    }
    if (named || remembered || this.schemaNames()) this.resetConnectionState();
  }

  /** Statements were rolled back (a batch, or the transaction): the schema learnt since may be undone. */
  forget(): void {
    this.schemaNamesConnState = null;
    this.schemaEpoch++;
  }

  /** After a statement succeeded: throws when it left a TEMP object behind. */
  afterStatement(sql: string): void {
    if (!sqlTraits(sql).creates) return;
    // query(): the connection caches the statement and finalizes it when it closes.
    const found = this.db.query(tempObjectsSql).get() as { type: string; name: string } | null;
    if (found !== null) {
      throw new Error(`TEMP objects are not allowed in a write (${found.type} ${found.name}): they live in one node's connection and are never replicated; create a regular ${found.type}`);
    }
  }

  /** BEGIN IMMEDIATE, waiting while another process (a write check) holds the write lock. */
  beginImmediate(): void {
    const deadline = performance.now() + busyWaitMsMax;
    for (;;) {
      try {
        this.db.run("BEGIN IMMEDIATE");
        return;
      } catch (e) {
        const code = (e as { code?: unknown } | null)?.code;
        if (code !== "SQLITE_BUSY" || performance.now() > deadline) throw e;
        Bun.sleepSync(1);
      }
    }
  }

  private schemaNames(): boolean {
    if (this.schemaNamesConnState === null) {
      const row = this.db
        .query("SELECT 1 AS found FROM sqlite_schema WHERE type IN ('trigger', 'view', 'table') AND (sql LIKE '%changes%' OR sql LIKE '%last_insert_rowid%') LIMIT 1")
        .get();
      this.schemaNamesConnState = row !== null;
    }
    return this.schemaNamesConnState;
  }

  /** changes() and last_insert_rowid() read 0 after this (a rowid-0 insert, then a delete of nothing). */
  private resetConnectionState(): void {
    this.db.run(`CREATE TEMP TABLE IF NOT EXISTS ${resetTable} (x)`);
    this.db.run(`INSERT OR REPLACE INTO temp.${resetTable} (rowid, x) VALUES (0, NULL)`);
    this.db.run(`DELETE FROM temp.${resetTable} WHERE rowid < 0`);
  }
}

/** The verdict for an entry checked as another index than the one it landed at. */
export function checkedElsewhereMessage(checkedIndex: number, index: number): string {
  return `the batch was checked as log entry ${checkedIndex} but landed at ${index}, on other data; nothing was applied, retry it`;
}
