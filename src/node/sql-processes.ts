// The node's SQL processes (store/sql-pool.ts): one or two for reads, one for write checks, so
// that a slow read never delays a write. Both follow the store file when a snapshot replaces it.
// Count and limits come from max_memory_mb (memory-budget.ts): a read answers at most a
// thirty-second of it, a process that grows past an eighth (at least 56 MiB) is stopped with its
// statement, and below 512 MB one process does both jobs, started when asked, stopped when idle.
// A node on an in-memory store (the simulator) has none: it reads in-process, unbounded.

import * as fs from "node:fs";
import type { Config } from "../config/index.ts";
import { memoryBudget, sqlProcessBaseBytes } from "./memory-budget.ts";
import { SqlProcessPool, Store, internalTablePrefix, rowsOfJsonText, totalRows, userTablesSql, type QueryResult, type SqlValue, type StoreStats, type TableCount } from "../store/index.ts";
import { errorMessage, isSvcError } from "../util/errors.ts";

/** A process with nothing to do is stopped after this (when its pool is not kept warm). */
const processIdleMs = 30_000;
/** SQLite allows 500 terms in a compound SELECT. */
const countsPerQueryMax = 400;

export class NodeSqlProcesses {
  private readonly readers: SqlProcessPool;
  private readonly checker: SqlProcessPool;
  private openedFor: Store;
  readonly resultBytesMax: number;

  private constructor(store: Store, config: Config) {
    this.openedFor = store;
    const budget = memoryBudget(config.maxMemoryBytes);
    const processMemoryBytesMax = budget.sqlProcessBytesMax;
    // Halfway between a process at rest and its cap: what a request may still grow by.
    const restartAboveBytes = sqlProcessBaseBytes + (processMemoryBytesMax - sqlProcessBaseBytes) / 2;
    const shared = { processMemoryBytesMax, restartAboveBytes, cacheBytes: budget.readerCacheBytes, maxMemoryMb: config.maxMemoryBytes / 2 ** 20 };
    this.resultBytesMax = budget.resultBytesMax;
    this.readers = new SqlProcessPool(store.path, { ...shared, processesCount: budget.readerProcessesCount, label: "query", idleMs: processIdleMs });
    // Warm: a write check's budget is spent on the write, not on starting a process. Below
    // 512 MB the reader runs checks too (before waiting reads; a check's time limit runs once a
    // process has taken it): a second process would cost more than such a node can spare.
    this.checker = budget.writeCheckOwnProcess
      ? new SqlProcessPool(store.path, { ...shared, processesCount: 1, queuedMax: 1, label: "write check", warm: true })
      : this.readers;
  }

  /** Null for an in-memory store. */
  static forStore(store: Store, config: Config): NodeSqlProcesses | null {
    return store.path === ":memory:" ? null : new NodeSqlProcesses(store, config);
  }

  async query(store: Store, sql: string, params: SqlValue[], limits: { timeoutMs: number; signal?: AbortSignal }): Promise<QueryResult> {
    this.follow(store);
    const r = await this.readers.query(sql, params, { ...limits, resultBytesMax: this.resultBytesMax });
    return queryResultOfText(r.columns, r.rowsJson);
  }

  /** What Store.stats() tells, with the rows counted in a SQL process within `timeoutMs`. */
  async stats(store: Store, timeoutMs: number): Promise<StoreStats> {
    this.follow(store);
    const limits = { timeoutMs, resultBytesMax: this.resultBytesMax };
    const listed = rowsOfJsonText((await this.readers.query(userTablesSql, [], limits)).rowsJson);
    const names = listed.map((r) => String(r[0])).filter((n) => !n.startsWith(internalTablePrefix));
    const tables: TableCount[] = [];
    const count = async (chunk: readonly string[]) => rowsOfJsonText((await this.readers.query(chunk.map((n) => `SELECT count(*) FROM "${n.replaceAll('"', '""')}"`).join(" UNION ALL "), [], limits)).rowsJson);
    for (let i = 0; i < names.length; i += countsPerQueryMax) {
      const chunk = names.slice(i, i + countsPerQueryMax);
      try {
        const counted = await count(chunk);
        chunk.forEach((name, j) => tables.push({ name, rows: Number(counted[j]?.[0] ?? 0) }));
      } catch (e) {
        if (!isSvcError(e, "SQL_ERROR")) throw e;
        // A table SQLite cannot count (an FTS5 table whose content table is gone) fails the
        // chunk: each is counted alone, and that one says why.
        for (const name of chunk) {
          tables.push(await count([name]).then(
            (r): TableCount => ({ name, rows: Number(r[0]?.[0] ?? 0) }),
            (err: unknown): TableCount => {
              if (!isSvcError(err, "SQL_ERROR")) throw err;
              return { name, rows: null, error: errorMessage(err) };
            },
          ));
        }
      }
    }
    let sizeBytes = 0;
    for (const suffix of ["", "-wal"]) sizeBytes += fs.statSync(store.path + suffix, { throwIfNoEntry: false })?.size ?? 0;
    return { totalEntries: totalRows(tables), tables, sizeBytes };
  }

  /** The pool that tries writes, following `store`. */
  checkerFor(store: Store): SqlProcessPool {
    this.follow(store);
    return this.checker;
  }

  close(): void {
    this.readers.close();
    if (this.checker !== this.readers) this.checker.close();
  }

  private follow(store: Store): void {
    if (store === this.openedFor) return;
    this.openedFor = store;
    this.readers.reopen(store.path);
    if (this.checker !== this.readers) this.checker.reopen(store.path);
  }
}

/** A result read in a SQL process: answered from its text; its rows read from it only when asked for. */
function queryResultOfText(columns: string[], rowsJson: string): QueryResult {
  let rows: unknown[][] | null = null;
  return {
    columns,
    rowsJson,
    get rows(): unknown[][] {
      rows ??= rowsOfJsonText(rowsJson);
      return rows;
    },
  };
}
