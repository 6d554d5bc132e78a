// The node's SQL processes (store/sql-pool.ts): a few for reads, one for write checks, so that
// a slow read never delays a write. Both follow the store file when a snapshot replaces it.
// Limits are shares of max_memory_mb: a read answers at most a thirty-second of it, and a
// process that grows past an eighth is stopped with its statement.
// A node on an in-memory store (the simulator) has none: it reads in-process, unbounded.

import * as fs from "node:fs";
import type { Config } from "../config/index.ts";
import { SqlProcessPool, Store, internalTablePrefix, type QueryResult, type SqlValue, type StoreStats } from "../store/index.ts";

const readProcessesCount = 2;
/** SQLite allows 500 terms in a compound SELECT. */
const countsPerQueryMax = 400;

export class NodeSqlProcesses {
  private readonly readers: SqlProcessPool;
  private readonly checker: SqlProcessPool;
  private openedFor: Store;
  readonly resultBytesMax: number;

  private constructor(store: Store, config: Config) {
    this.openedFor = store;
    const processMemoryBytesMax = Math.max(64 * 2 ** 20, Math.floor(config.maxMemoryBytes / 8));
    this.resultBytesMax = Math.max(2 ** 20, Math.floor(config.maxMemoryBytes / 32));
    this.readers = new SqlProcessPool(store.path, { processesCount: readProcessesCount, processMemoryBytesMax, label: "query" });
    // Warm: a write check's budget is spent on the write, not on starting a process.
    this.checker = new SqlProcessPool(store.path, { processesCount: 1, processMemoryBytesMax, queuedMax: 1, label: "write check", warm: true });
  }

  /** Null for an in-memory store. */
  static forStore(store: Store, config: Config): NodeSqlProcesses | null {
    return store.path === ":memory:" ? null : new NodeSqlProcesses(store, config);
  }

  async query(store: Store, sql: string, params: SqlValue[], limits: { timeoutMs: number; signal?: AbortSignal }): Promise<QueryResult> {
    this.follow(store);
    const r = await this.readers.query(sql, params, { ...limits, resultBytesMax: this.resultBytesMax });
    return { columns: r.columns, rows: r.rows.map(Store.jsonRow) };
  }

  /** What Store.stats() tells, with the rows counted in a SQL process within `timeoutMs`. */
  async stats(store: Store, timeoutMs: number): Promise<StoreStats> {
    this.follow(store);
    const limits = { timeoutMs, resultBytesMax: this.resultBytesMax };
    const listed = await this.readers.query("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name", [], limits);
    const names = listed.rows.map((r) => String(r[0])).filter((n) => !n.startsWith(internalTablePrefix));
    const tables: { name: string; rows: number }[] = [];
    for (let i = 0; i < names.length; i += countsPerQueryMax) {
      const chunk = names.slice(i, i + countsPerQueryMax);
      const sql = chunk.map((n) => `SELECT count(*) FROM "${n.replaceAll('"', '""')}"`).join(" UNION ALL ");
      const counted = await this.readers.query(sql, [], limits);
      chunk.forEach((name, j) => tables.push({ name, rows: Number(counted.rows[j]?.[0] ?? 0) }));
    }
    let sizeBytes = 0;
    for (const suffix of ["", "-wal"]) sizeBytes += fs.statSync(store.path + suffix, { throwIfNoEntry: false })?.size ?? 0;
    return { totalEntries: tables.reduce((sum, t) => sum + t.rows, 0), tables, sizeBytes };
  }

  /** The pool that tries writes, following `store`. */
  checkerFor(store: Store): SqlProcessPool {
    this.follow(store);
    return this.checker;
  }

  close(): void {
    this.readers.close();
    this.checker.close();
  }

  private follow(store: Store): void {
    if (store === this.openedFor) return;
    this.openedFor = store;
    this.readers.reopen(store.path);
    this.checker.reopen(store.path);
  }
}
