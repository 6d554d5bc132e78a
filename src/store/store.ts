// The tensor store: the SQLite state machine at store/state.db. It applies committed
// entries deterministically, records the applied index in the same transaction as the
// entries it applied (so a restart replays exactly what the store has not seen), and
// answers reads on a separate read-only connection.
//
// Each entry is applied inside a savepoint, so a failing statement rolls back its own batch
// only and is reported. A node's applies share one SQLite transaction that it commits when due
// (CommitPolicy): a commit writes the pages a batch touched plus the b-tree's interior pages and
// the database header, so committing every few hundred entries instead of every batch writes a
// fraction of the bytes. Nothing is less durable for it: the Raft WAL is what makes a write
// durable, and a restart applies again what the store had not committed. What is applied but
// not committed is seen by this connection only: anything that reads the store elsewhere (SQL
// processes, snapshot images, checkpoints, the write check) commits first (commitApplied).
// A commit that fails for want of space loses the transaction; its entries are kept and
// applied again before anything else (they were answered already, and apply alike again).
//
// The store never waits for the disk on the thread that applies writes: the Raft WAL is what
// makes a write durable. It runs SQLite's WAL mode with synchronous=NORMAL and no automatic
// checkpoints, so a commit only writes; checkpoints run off that thread every
// snapshot_interval entries (checkpointDurably) and make the store durable up to an applied
// index, which raft/checkpoint records. NORMAL keeps the file consistent across a power loss.
// The files are also flushed a few times a second (flusher.ts). While the store is open,
// state.db-boot holds the kernel's boot id: found with another boot's id, a store that
// raft/checkpoint vouches for is kept (consistent, and at least at its checkpoint), one
// without (written before checkpoints existed, with synchronous=OFF) is rebuilt from the
// newest snapshot and the WAL like a damaged one. Closing flushes the file and removes the mark.

import { Database, type Statement as SqliteStatement } from "bun:sqlite";
import * as fs from "node:fs";
import { basename, dirname, join } from "node:path";
import { decodeMembership, emptyMembership, type Entry, type Membership } from "../util/log-data.ts";
import { fsyncPath, writeFileAtomic } from "../io/durable-file.ts";
import { isDiskFullError } from "../io/disk-space.ts";
import type { StateMachine } from "../io/state-machine.ts";
import { assert } from "../util/assert.ts";
import { SvcError, errorMessage } from "../util/errors.ts";
import { exactInt } from "../util/json64.ts";
import { decodeCommand, type MemberAddress, type SqlValue } from "./command.ts";
import { jsonValue } from "./_json-rows.ts";
import { DeterministicFunctions } from "./determinism.ts";
import { StoreFlusher } from "./flusher.ts";
import { StoreCheckpointer, type CheckpointResult } from "./snapshot-image.ts";
import { checkReadStatement, internalTablePrefix, lexSql, refusedAtApply } from "./_sql.ts";
import { sqlTraits } from "./_sql-traits.ts";
import { ApplyGuards, checkedElsewhereMessage } from "./_apply-guards.ts";
import { RequestLog, answerOf, requestBodyHash, requestIdReusedMessage, reusedFor, type RequestOutcome } from "./request-ids.ts";
import { isRowidsUsedUp, rowidsUsedUpMessage } from "./_rowid-limit.ts";
import { damageMarkSuffix, damagedStoreFix, isDamageAtApply, isStoreDamage, readDamageMark, setStoreAside, storeDamagedError } from "./damage.ts";

export interface StatementResult {
  rowsAffected: number;
  /** A BigInt only when a double cannot hold it exactly. */
  lastInsertId: number | bigint;
}

export type ApplyResult =
  /** `firstIndex`: the entry that applied this request id first, when this entry was its retry. */
  | { kind: "execute"; ok: true; results: StatementResult[]; firstIndex?: number }
  /** `requestIdReused`: the entry's request id was first used for other statements (nothing applied). */
  | { kind: "execute"; ok: false; statementIndex: number; message: string; firstIndex?: number; requestIdReused?: true }
  | { kind: "pause_writes" | "resume_writes" | "config" | "noop" | "init_cluster" | "set_member" | "archived_through" }
  /** An entry this version cannot read; skipped identically on every node of this version. */
  | { kind: "unreadable" };

/**
 * When a node's apply commits (see the top of this file). `eager`: commit every batch (the
 * disk is full or nearly, or a write is being checked in another process).
 */
export interface CommitPolicy {
  nowMs: number;
  eager: boolean;
}

/** An open transaction is committed once it holds this many entries, */
export const commitEntriesMax = 4096;
/** or this many bytes of entries, */
const commitBytesMax = 8 * 1024 * 1024;
/** or has been open this long. */
export const commitDelayMs = 50;
/** After a refused commit, readers try it again at most this often (each try applies the refused entries again). */
const readerRetryMs = 200;
/** Past `bytes` the SQLite WAL is made to start over, checked at most every `everyMs` (see restartWalIfLarge). */
const walRestartDefault = { bytes: 128 * 1024 * 1024, everyMs: 1_000 };

export interface QueryResult {
  columns: string[];
  rows: unknown[][];
  /**
   * The rows as the JSON answer writes them, when the read was made elsewhere (a SQL process):
   * the answer is written from it, and `rows` is read from it only when asked for.
   */
  readonly rowsJson?: string;
}

export interface StoreStats {
  /** The rows of the tables that could be counted. */
  totalEntries: number;
  tables: TableCount[];
  sizeBytes: number;
}

/**
 * A table's rows; null with why when SQLite cannot count them (an FTS5 table whose content
 * table is gone): one such table leaves the others' counts standing.
 */
export type TableCount = { name: string; rows: number } | { name: string; rows: null; error: string };

/**
 * The tables whose rows `stats` counts: the client's tables and virtual tables, not SQLite's own
 * (sqlite_*), not a virtual table's shadow tables (an FTS5 table's _data, _idx, _content...: its
 * rows would count several times over), not svc's own (filter by internalTablePrefix).
 */
export const userTablesSql = "SELECT name FROM pragma_table_list WHERE schema = 'main' AND type IN ('table', 'virtual') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name";

/** total_entries: the rows of the tables counted. */
export function totalRows(tables: readonly TableCount[]): number {
  return tables.reduce((sum, t) => sum + (t.rows ?? 0), 0);
}

export interface StoreMeta {
  appliedIndex: number;
  appliedTerm: number;
  membership: Membership;
  clusterId: string;
  writesPaused: boolean;
  /** While writesPaused: when the pause's lease ends (ms since the epoch), 0 for no end. */
  writesPausedUntilMs: number;
  /** Every entry up to here is in the cluster's WAL archive (0: none, or archiving is off). */
  archivedThrough: number;
}

/** Whether writes are paused at `nowMs`: the flag is set and its lease, if any, still runs. */
export function writesPausedAt(meta: Pick<StoreMeta, "writesPaused" | "writesPausedUntilMs">, nowMs: number): boolean {
  return meta.writesPaused && (meta.writesPausedUntilMs === 0 || nowMs < meta.writesPausedUntilMs);
}

const metaTable = `${internalTablePrefix}meta`;
/** Where a table's per-row expressions start: CHECK (…), GENERATED … AS (…) or AS (…), DEFAULT (…). */
const rowExpressionStart = /\b(?:check|as|default)\s*\(/gi;
/** A function call: what can make an expression cost more than its size. */
const functionCall = /\b[a-z_][a-z0-9_$]*\s*\(/i;
/** Comments and quoted text of a table's SQL, set aside first (a column named "check", a string "f("). */
const sqlCommentsAndStrings = /--[^\n]*|\/\*[\s\S]*?(?:\*\/|$)|'(?:[^']|'')*'|"(?:[^"]|"")*"|`(?:[^`]|``)*`|\[[^\]]*\]/g;

/**
 * A foreign key: each row deleted or updated in the parent table looks for its children, a scan
 * of the child table where its column has no index (a DELETE of 20,000 parents with 20,000
 * children ran 15 s in the apply, and stalled the cluster); a cascade changes as many as there are.
 */
const foreignKey = /\breferences\b/i;

/**
 * A virtual table (FTS5, R-Tree) runs its module's code on every write, and may find its own
 * contents broken (SQLITE_CORRUPT_VTAB): such a write is refused before the log, never applied
 * (damage.ts, isDamageAtApply).
 */
const virtualTable = /^\s*create\s+virtual\s+table\b/i;

/**
 * Whether a table's CHECK, generated column or DEFAULT expression calls a function, or it has
 * a foreign key: then a write costs what that function does per row, or what the rows it
 * reaches take, not what the write's text says.
 */
export function tableRunsCode(createSql: string): boolean {
  const sql = createSql.replace(sqlCommentsAndStrings, " ");
  if (foreignKey.test(sql) || virtualTable.test(sql)) return true;
  for (const m of sql.matchAll(rowExpressionStart)) {
    const open = (m.index ?? 0) + m[0].length - 1;
    let depth = 0;
    let close = sql.length;
    for (let i = open; i < sql.length; i++) {
      if (sql[i] === "(") depth++;
      else if (sql[i] === ")" && --depth === 0) {
        close = i;
        break;
      }
    }
    if (functionCall.test(sql.slice(open + 1, close))) return true;
  }
  return false;
}
/**
 * Whether an index's expressions or its WHERE clause (a partial index) call a function: every
 * write of a row computes them, at that function's cost.
 */
export function indexRunsCode(createSql: string): boolean {
  const sql = createSql.replace(sqlCommentsAndStrings, " ");
  const on = /\bon\b[^(]*\(/i.exec(sql);
  return on !== null && functionCall.test(sql.slice(on.index + on[0].length));
}
const statementCacheSizeMax = 512;
const cachedSqlLengthMax = 4096;
/**
 * SQLite's page cache for the applying connection (the reader gets a quarter). Most of the
 * store stays in the OS page cache either way; this bounds what the process itself holds.
 * A node passes its share of max_memory_mb (memory-budget.ts); this is for the tools.
 */
const defaultCacheKib = 16 * 1024;
/** Beside the store file while it is open with unflushed writes: the boot it was opened in. */
const bootMarkSuffix = "-boot";
/** A snapshot image copied beside the store, waiting to be installed (see installImage). */
const stagedSuffix = ".staged-";
const bootIdPath = "/proc/sys/kernel/random/boot_id";
/**
 * A store up to this size is quick_checked at every start (SQLite reads every page: about a
 * second a gigabyte, 50 ms for this much from the page cache). A larger one is checked only when
 * it was open when the machine went down; damage in it is found where a read or a write touches
 * it, and the next start rebuilds it (damage.ts). SVC_TEST_STORE_START_CHECK_BYTES_MAX: tests.
 */
function startCheckBytesMax(): number {
  return startCheckBound(process.env["SVC_TEST_STORE_START_CHECK_BYTES_MAX"]);
}

export class Store implements StateMachine<Entry, ApplyResult> {
  private readonly db: Database;
  private readonly reader: Database;
  private readonly functions = new DeterministicFunctions();
  private readonly statements = new Map<string, SqliteStatement>();
  private readonly readStatements = new Map<string, SqliteStatement>();
  private readonly setMetaStmt: SqliteStatement;
  /** Prepared on first use: only a rowid past 2^53 needs it. */
  private lastRowidStmt: SqliteStatement | null = null;
  private metaValue: StoreMeta;
  private readonly flusher: StoreFlusher | null;
  private readonly inMemory: boolean;
  /** Made on first apply (after the constructor has set the connection up). */
  private guardsValue: ApplyGuards | null = null;
  private readonly requests: RequestLog;
  private checkpointer: StoreCheckpointer | null = null;
  private closed = false;
  /** Entries applied in the open transaction: what losing it takes back. */
  private uncommitted: Entry[] = [];
  private uncommittedBytes = 0;
  /** When the open transaction was first left open (CommitPolicy.nowMs); null when none is. */
  private openedAtMs: number | null = null;
  /** Applied, but their transaction was lost (a full disk): applied again before anything else. */
  private toReapply: Entry[] = [];
  /** The boot the store was open in when the machine went down, if it was (see open). */
  openedInEarlierBoot: string | null = null;
  /** The store was open when its process or machine last stopped (not closed cleanly). */
  leftOpen = false;

  /**
   * `unsynced`: the store runs without fsyncs, under a boot mark (see the top of this file).
   * `memory`: the store lives in memory only (the simulator's twin): one connection serves
   * applies and reads, and nothing touches the disk.
   */
  private constructor(readonly path: string, cacheKib: number, private readonly unsynced: boolean, memory: Database | null = null) {
    this.inMemory = memory !== null;
    this.db = memory ?? new Database(path, { create: true });
    if (memory === null) {
      this.db.run("PRAGMA journal_mode = WAL");
      // Commits never wait for the disk (in WAL mode NORMAL syncs only at a checkpoint), and
      // this connection never checkpoints: checkpoints run off this thread, every
      // snapshot_interval entries (Store.checkpointDurably), and make the store durable up to an
      // applied index. NORMAL keeps the file consistent across a power loss; OFF would not.
      this.db.run("PRAGMA synchronous = NORMAL");
      this.db.run("PRAGMA wal_autocheckpoint = 0");
      // Once a checkpoint copied it all, the next commit starts the SQLite WAL over and cuts the
      // file to nothing: its size is then what the next checkpoint has to copy.
      this.db.run("PRAGMA journal_size_limit = 0");
    }
    this.db.run(`PRAGMA cache_size = -${cacheKib}`);
    this.db.run("PRAGMA foreign_keys = ON");
    this.db.run(`CREATE TABLE IF NOT EXISTS ${metaTable} (key TEXT PRIMARY KEY, value) WITHOUT ROWID`);
    this.functions.install(this.db);
    this.setMetaStmt = this.db.prepare(`INSERT OR REPLACE INTO ${metaTable} (key, value) VALUES (?, ?)`);
    this.metaValue = this.readMeta();
    this.requests = new RequestLog(this.db);
    if (memory === null) {
      this.reader = new Database(path, { readonly: true });
      this.reader.run(`PRAGMA cache_size = -${Math.max(512, Math.floor(cacheKib / 4))}`);
    } else {
      this.reader = memory;
    }
    this.flusher = unsynced ? new StoreFlusher([path, `${path}-wal`]) : null;
  }

  /**
   * A store held in memory only, empty or from an image (`serialize()`'s bytes): the twin
   * the simulator runs the real node on. It applies and answers exactly as a store on disk.
   */
  static openInMemory(image: Uint8Array | null = null): Store {
    const db = image === null ? new Database(":memory:") : Database.deserialize(image);
    return new Store(":memory:", 2048, false, db);
  }

  /**
   * Make the store durable up to what it has applied now (a checkpoint), off this thread;
   * resolves with that applied state. An in-memory store has no disk: it answers at once.
   */
  checkpointDurably(): Promise<CheckpointResult> {
    if (this.inMemory) {
      const m = this.metaValue;
      return Promise.resolve({ appliedIndex: m.appliedIndex, appliedTerm: m.appliedTerm, membership: m.membership });
    }
    // What the checkpoint covers is what is committed: commit first, unless the disk is full.
    this.commitForReader();
    this.checkpointer ??= new StoreCheckpointer(this.path);
    return this.checkpointer.checkpoint();
  }

  /** The size of the store's SQLite WAL (what the next checkpoint copies at most); 0 in memory. */
  walFileBytes(): number {
    if (this.inMemory) return 0;
    try {
      return fs.statSync(`${this.path}-wal`).size;
    } catch {
      return 0;
    }
  }

  /** The database's size (pages in use), cheap enough to ask on every tick. */
  sizeBytes(): number {
    const row = this.db.query("SELECT page_count * page_size AS n FROM pragma_page_count(), pragma_page_size()").get() as { n: number } | null;
    return Number(row?.n ?? 0);
  }

  /** The whole database as one image (an in-memory store's snapshot). */
  serialize(): Uint8Array {
    this.commitApplied();
    return this.db.serialize();
  }

  /**
   * Open (creating if absent) the store. Throws STORE_DAMAGED when the file is not a
   * healthy SQLite database, or was open when the machine last went down; the node then
   * rebuilds it from a snapshot and the WAL. `check`: run SQLite's quick_check (default: only
   * when the store was open when the machine went down).
   */
  static open(path: string, options: { cacheKib?: number; check?: boolean; consistentAfterMachineCrash?: boolean; setAsideDamaged?: boolean } = {}): Store {
    fs.mkdirSync(dirname(path), { recursive: true, mode: 0o750 });
    const setAside = options.setAsideDamaged ?? true;
    // Marked by a run that found SQLite's damage in it: set aside unchecked (a quick_check does
    // not read what an index says of its table, where the damage may be).
    const marked = setAside ? readDamageMark(path) : null;
    if (marked !== null) {
      if (fs.existsSync(path)) throw Store.damaged(path, `a previous run found it damaged (${marked})`, null);
      fs.rmSync(path + damageMarkSuffix, { force: true });
    }
    const bootId = currentBootId();
    const openedIn = readBootMark(path);
    // A store this version wrote (synchronous=NORMAL, checkpoints made durable) is consistent
    // after a power loss and at least at its checkpoint; the caller knows (raft/checkpoint).
    // One from before may be torn: it is rebuilt.
    if (openedIn !== null && openedIn !== bootId && options.consistentAfterMachineCrash !== true) {
      throw new SvcError("STORE_DAMAGED", `the store ${path} was open when the machine went down (boot ${openedIn}): writes it had not flushed to disk may be missing`, {
        hint: "svc rebuilds it from the latest snapshot and the WAL when the file is removed",
      });
    }
    // Another connection may hold the file locked for a moment (a checkpoint closing the last
    // connection takes it exclusively): that is waited out, never taken for damage.
    const busyUntilMs = Date.now() + storeBusyWaitMs;
    for (;;) {
      let store: Store | null = null;
      let markPending = false;
      try {
        // The mark is on disk before the first write that is not. On a full disk it waits for
        // that first write (see ensureBootMark): a node must start and serve reads on a full disk.
        if (bootId !== null && openedIn !== bootId) {
          try {
            writeFileAtomic(path + bootMarkSuffix, `${bootId}\n`);
          } catch (e) {
            if (!isDiskFullError(e)) throw e;
            markPending = true;
          }
        }
        store = new Store(path, options.cacheKib ?? defaultCacheKib, bootId !== null);
        if (markPending) store.bootMarkPending = bootId;
        if (openedIn !== null && openedIn !== bootId) store.openedInEarlierBoot = openedIn;
        store.leftOpen = openedIn !== null;
        // quick_check reads every page: it runs only on a store that was open when its machine
        // went down. A process that stopped, even by kill -9, left SQLite's files whole in the
        // page cache (SQLite's own guarantee), and a 10 GB store would take minutes to read.
        // A small store is checked at every start: damage made while the node was stopped is
        // found before anything reads it (see startCheckBytesMax).
        if (options.check ?? ((openedIn !== null && openedIn !== bootId) || store.sizeBytes() <= startCheckBytesMax())) {
          const problems = store.integrityProblems("quick_check");
          if (problems.length > 0) throw new Error(problems.slice(0, 3).join("; "));
        }
        return store;
      } catch (e) {
        store?.close({ discard: true });
        if (isLocked(e)) {
          if (Date.now() < busyUntilMs) {
            Bun.sleepSync(25);
            continue;
          }
          throw new SvcError("STORAGE_FAILED", `the store ${path} stayed locked by another connection for ${storeBusyWaitMs / 1000} s: ${errorMessage(e)}`, {
            hint: "another process has it open (sqlite3, a second svc on this data directory?): stop that process, then start the node again; the store is left as it is",
            cause: e,
          });
        }
        if (isUnwritable(e)) {
          // A full disk or a read-only one is no reason to throw the store away.
          throw new SvcError("STORAGE_FAILED", `cannot write the store ${path}: ${errorMessage(e)}`, {
            hint: "free space on the data directory's disk or fix its permissions, then start the node again; the store is left as it is",
            cause: e,
          });
        }
        throw setAside ? Store.damaged(path, errorMessage(e), e) : new SvcError("STORE_DAMAGED", `the store ${path} is damaged: ${errorMessage(e)}`, {
          hint: damagedStoreFix(path),
          cause: e,
        });
      }
    }
  }

  /**
   * A store found damaged at open: its files are moved aside (never deleted) and the caller
   * rebuilds it from the newest snapshot and the WAL, as for a missing store.
   */
  private static damaged(path: string, why: string, cause: unknown): SvcError {
    const aside = setStoreAside(path);
    return new SvcError("STORE_DAMAGED", `the store ${path} is damaged (${why}); its files were moved to ${aside}`, {
      hint: `nothing to do: the node rebuilds the store from the newest snapshot and the WAL (a cluster member: and from the leader). ${aside} is kept for a look; remove it once the node is healthy`,
      details: { path, setAsideTo: aside },
      ...(cause === null ? {} : { cause }),
    });
  }

  /**
   * Replace the store file with a snapshot's image (copy, fsync, rename). `staged`: where a
   * durable copy of that image may already wait (stageStoreImage): then only a rename is left.
   * Staged copies are removed either way. Returns whether the staged copy was used.
   */
  static installImage(imagePath: string, storePath: string, staged?: string): boolean {
    const useStaged = Store.prepareImage(imagePath, storePath, staged);
    Store.swapInImage(storePath);
    return useStaged;
  }

  /**
   * The part of installImage that may fail for want of space (a copy of the whole image), done
   * while the store in use stays open: it goes on serving, and a retry starts over. Returns
   * whether the staged copy was used.
   */
  static prepareImage(imagePath: string, storePath: string, staged?: string): boolean {
    fs.mkdirSync(dirname(storePath), { recursive: true, mode: 0o750 });
    const tmp = `${storePath}.installing`;
    const useStaged = staged !== undefined && fs.existsSync(staged);
    try {
      if (useStaged) {
        fs.renameSync(staged, tmp);
      } else {
        fs.copyFileSync(imagePath, tmp);
        fsyncPath(tmp);
      }
    } catch (e) {
      fs.rmSync(tmp, { force: true });
      throw e;
    }
    return useStaged;
  }

  /** The rest of installImage, once the store is closed: the prepared image becomes the store. */
  static swapInImage(storePath: string): void {
    const tmp = `${storePath}.installing`;
    Store.removeStaged(storePath);
    // The old store's SQLite WAL must not meet the new file; its boot mark goes only once the
    // new file is in place (a crash in between makes a rebuild, never a torn store trusted).
    for (const suffix of ["-wal", "-shm"]) fs.rmSync(storePath + suffix, { force: true });
    fs.renameSync(tmp, storePath);
    fsyncPath(dirname(storePath));
    fs.rmSync(storePath + bootMarkSuffix, { force: true });
    // The damage a mark names was in the file just replaced.
    fs.rmSync(storePath + damageMarkSuffix, { force: true });
  }

  /** Where a copy of the snapshot named `snapshotName` waits to become the store. */
  static stagedImagePath(storePath: string, snapshotName: string): string {
    return `${storePath}${stagedSuffix}${snapshotName}`;
  }

  /** Remove staged copies (and unfinished ones), but `keep`. */
  static removeStaged(storePath: string, keep?: string): void {
    const dir = dirname(storePath);
    const prefix = `${basename(storePath)}${stagedSuffix}`;
    let names: string[];
    try {
      names = fs.readdirSync(dir);
    } catch {
      return;
    }
    for (const name of names) {
      const path = join(dir, name);
      if (name.startsWith(prefix) && path !== keep) fs.rmSync(path, { force: true });
    }
  }

  /** Remove the store and every file that goes with it (the node rebuilds it on start). */
  static remove(storePath: string): void {
    for (const suffix of ["", "-wal", "-shm", ".installing", bootMarkSuffix, damageMarkSuffix]) fs.rmSync(storePath + suffix, { force: true });
    Store.removeStaged(storePath);
  }

  /** The index of the last entry applied (StateMachine). */
  get appliedIndex(): number {
    return this.metaValue.appliedIndex;
  }

  get meta(): Readonly<StoreMeta> {
    return this.metaValue;
  }

  /**
   * The boot id still to be written as this store's mark (the disk was full at open); null
   * when the mark is on disk or not needed. Every write checks it first.
   */
  private bootMarkPending: string | null = null;

  private ensureBootMark(): void {
    if (this.bootMarkPending === null) return;
    writeFileAtomic(this.path + bootMarkSuffix, `${this.bootMarkPending}\n`);
    this.bootMarkPending = null;
  }

  /**
   * Apply committed entries, in order. Without `policy` they are committed before this
   * returns; with one, when the policy says so (see the top of this file). Throws when a
   * statement or the commit failed for want of space: nothing of `entries` is applied then.
   */
  apply(entries: readonly Entry[], policy?: CommitPolicy): ApplyResult[] {
    const results: ApplyResult[] = [];
    if (entries.length === 0) return results;
    this.ensureBootMark();
    this.reapply();
    const meta = { ...this.metaValue };
    try {
      this.applyBatch(entries, meta, results);
    } catch (e) {
      if (isDamageAtApply(e)) throw this.damagedAtRun(e);
      if (!(e instanceof TransactionLostAt)) throw e;
      return this.applyAround(entries, e.index, policy);
    }
    let bytes = 0;
    for (const entry of entries) bytes += entry.data.length;
    if (policy === undefined || this.commitDue(policy, entries.length, bytes)) {
      // A commit that fails takes this batch back with the rest (loseTransaction).
      this.commitOpen();
    } else {
      for (const entry of entries) this.uncommitted.push(entry);
      this.uncommittedBytes += bytes;
      this.openedAtMs ??= policy.nowMs;
    }
    this.metaValue = meta;
    return results;
  }

  /**
   * SQLite rolled back the whole open transaction when the entry at `index` needed a rowid none
   * is left for (_rowid-limit.ts). The entries before it are applied again and committed; then
   * that entry alone, in a transaction of its own, so that what SQLite rolls back is that entry
   * only and it fails as a statement error; then the rest. The outcome is the same on every
   * node, however each batched its entries.
   */
  private applyAround(entries: readonly Entry[], index: number, policy: CommitPolicy | undefined): ApplyResult[] {
    this.reapply();
    if (this.db.inTransaction) this.commitOpen();
    const results: ApplyResult[] = [];
    const meta = { ...this.metaValue };
    const before = entries.filter((e) => e.index < index);
    const at = entries.filter((e) => e.index === index);
    if (before.length > 0) {
      this.applyBatch(before, meta, results);
      this.commitOpen();
      this.metaValue = { ...meta };
    }
    this.isolatedIndex = index;
    try {
      this.applyBatch(at, meta, results);
    } finally {
      this.isolatedIndex = null;
    }
    this.commitOpen();
    this.metaValue = { ...meta };
    const after = entries.filter((e) => e.index > index);
    return after.length === 0 ? results : results.concat(this.apply(after, policy));
  }
  /** The store's file, whose file system a SQLITE_FULL is judged by (_rowid-limit.ts); null in memory. */
  private get diskPath(): string | null {
    return this.inMemory ? null : this.path;
  }

  /** The entry applied alone in its transaction by applyAround (null: none). */
  private isolatedIndex: number | null = null;
  /** The entry being applied. */
  private applyingIndex = 0;

  /**
   * Commit the open transaction when `policy` says it is due (a node asks on every tick, so
   * that a quiet node commits its last writes too). Throws as commitApplied does.
   */
  commitIfDue(policy: CommitPolicy): void {
    if (this.uncommitted.length > 0) this.openedAtMs ??= policy.nowMs;
    if (this.toReapply.length > 0 || (this.uncommitted.length > 0 && this.commitDue(policy, 0, 0))) this.commitApplied();
  }

  /**
   * Commit everything applied, for other connections to see it: SQL processes, snapshot
   * images, checkpoints. Throws when the disk is full: what was applied stays applied (it is
   * applied again first, and committed with the next commit that succeeds).
   */
  commitApplied(): void {
    this.reapply();
    if (this.db.inTransaction) this.commitOpen();
  }

  /**
   * A commit (or a batch) failed for want of space and took applied entries back: they wait to
   * be applied again (the node's loop tries once the disk has room; readers, see commitForReaders).
   */
  get commitRefused(): boolean {
    return this.toReapply.length > 0;
  }

  /**
   * commitApplied for those about to read the store through another connection: false when the
   * disk refused the commit (they see only what is committed). After a refusal it is tried again
   * at most every 200 ms (each try applies the refused entries again).
   */
  commitForReaders(): boolean {
    if (this.commitRefused && performance.now() - this.refusedAtMs < readerRetryMs) return false;
    try {
      this.commitApplied();
      return true;
    } catch (e) {
      // An I/O error is not "full": it reaches the caller (and the node's loop fails on it).
      if (!isDiskFullError(e)) throw e;
      return false;
    }
  }
  private refusedAtMs = Number.NEGATIVE_INFINITY;

  /** Entries applied but not yet committed (other connections do not see them yet). */
  get uncommittedCount(): number {
    return this.uncommitted.length + this.toReapply.length;
  }

  private commitDue(policy: CommitPolicy, moreEntries: number, moreBytes: number): boolean {
    if (policy.eager) return true;
    if (this.uncommitted.length + moreEntries >= commitEntriesMax) return true;
    if (this.uncommittedBytes + moreBytes >= commitBytesMax) return true;
    return this.openedAtMs !== null && policy.nowMs - this.openedAtMs >= commitDelayMs;
  }

  private commitOpen(): void {
    try {
      this.db.run("COMMIT");
    } catch (e) {
      this.loseTransaction();
      throw isStoreDamage(e) ? this.damagedAtRun(e) : e;
    }
    this.uncommitted = [];
    this.uncommittedBytes = 0;
    this.openedAtMs = null;
    this.restartWalIfLarge();
  }

  /**
   * The SQLite WAL starts over only when a write transaction begins with every frame in it
   * copied into the file. This connection begins its next transaction right after a commit, so
   * under a bulk load that never happened and the file grew as large as the store (a 10 GB
   * load left a 10 GB WAL until the writes stopped). Past a bound, this connection copies what
   * the checkpoints have not, between its transactions: the next one starts the WAL over.
   * The checkpoints in the worker have copied most of it, so this is the last few commits.
   */
  private restartWalIfLarge(): void {
    if (this.inMemory) return;
    const now = performance.now();
    if (now < this.walRestartCheckAtMs) return;
    this.walRestartCheckAtMs = now + this.walRestart.everyMs;
    if (this.walFileBytes() < this.walRestart.bytes) return;
    try {
      const r = this.db.query("PRAGMA wal_checkpoint(PASSIVE)").get() as { busy: number } | null;
      // The worker's checkpoint holds the checkpointer's lock: try again at the next commit.
      if (r !== null && r.busy !== 0) this.walRestartCheckAtMs = now;
    } catch {
      // A checkpoint the disk refuses here is the worker's to report; the WAL stays as it is.
    }
  }
  private walRestartCheckAtMs = 0;
  /** When the SQLite WAL is made to start over (restartWalIfLarge); tests make it small. */
  walRestart = walRestartDefault;

  /**
   * Apply `entries` after `meta` (advanced as they apply) in a savepoint of the open transaction,
   * their results into `results` (null: dropped). On a throw nothing of them is applied.
   */
  private applyBatch(entries: readonly Entry[], meta: StoreMeta, results: ApplyResult[] | null): void {
    this.beginBatch();
    try {
      for (const entry of entries) {
        assert(entry.index === meta.appliedIndex + 1, () => `entries apply in order (applied ${meta.appliedIndex}, got ${entry.index})`);
        this.applyingIndex = entry.index;
        const result = this.applyOne(entry, meta);
        results?.push(result);
        meta.appliedIndex = entry.index;
        meta.appliedTerm = entry.term;
      }
      this.setMetaStmt.run("applied_index", meta.appliedIndex);
      this.setMetaStmt.run("applied_term", meta.appliedTerm);
      this.db.run("RELEASE batch");
    } catch (e) {
      this.undoBatch();
      throw e;
    }
  }

  /** A batch runs in a savepoint of the open transaction (begun here when none is open). */
  private beginBatch(): void {
    if (!this.db.inTransaction) this.guards.beginImmediate();
    this.db.run("SAVEPOINT batch");
  }

  /** Undo the batch in progress; if SQLite already undid more (a full disk can), the rest is lost too. */
  private undoBatch(): void {
    this.forgetDerived();
    if (this.db.inTransaction) {
      try {
        this.db.run("ROLLBACK TO batch");
        this.db.run("RELEASE batch");
        // Nothing else applied in it: not left open (it would hold the write lock for nothing).
        if (this.uncommitted.length === 0) this.db.run("ROLLBACK");
        return;
      } catch {
        // The transaction itself is in doubt: it goes.
      }
    }
    this.loseTransaction();
  }

  /**
   * What was learnt from the database since the last commit may have been rolled back: the
   * request-id table made by the first entry with an id, a trigger's schema.
   */
  private forgetDerived(): void {
    this.requests.forget();
    this.guards.forget();
    this.rowCodeKnown = null;
  }

  /** Roll the open transaction back; what it had applied is applied again first (reapply). */
  private loseTransaction(): void {
    this.refusedAtMs = performance.now();
    this.forgetDerived();
    if (this.db.inTransaction) {
      try {
        this.db.run("ROLLBACK");
      } catch {
        // SQLite rolled it back already.
      }
    }
    this.toReapply = this.toReapply.concat(this.uncommitted);
    this.uncommitted = [];
    this.uncommittedBytes = 0;
    this.openedAtMs = null;
  }

  /**
   * Apply again, from the committed state, the entries a lost transaction took back. Their
   * results were answered already: they apply alike (the store is deterministic), and are
   * dropped. Throws as apply does, keeping them to apply again.
   */
  private reapply(): void {
    const entries = this.toReapply;
    if (entries.length === 0) return;
    const meta = this.readMeta();
    this.applyBatch(entries, meta, null);
    assert(meta.appliedIndex === this.metaValue.appliedIndex, `applied again up to ${meta.appliedIndex}, as before (${this.metaValue.appliedIndex})`);
    this.toReapply = [];
    this.uncommitted = entries;
    for (const entry of entries) this.uncommittedBytes += entry.data.length;
  }

  /** Set the membership recorded with the data (init-cluster --bootstrap makes a new cluster of it). */
  setMembership(membership: Membership): void {
    this.ensureBootMark();
    this.commitApplied();
    this.setMetaStmt.run("membership", JSON.stringify(membership));
    this.metaValue = { ...this.metaValue, membership };
  }

  /** Member addresses replicated with set_member (members added at run time). */
  memberAddresses(): MemberAddress[] {
    const rows = this.db.query(`SELECT value FROM ${metaTable} WHERE key LIKE 'member:%'`).values() as string[][];
    return rows.map((r) => JSON.parse(r[0] ?? "{}") as MemberAddress);
  }

  /**
   * Record that the WAL archive holds everything up to `index` (init-cluster: the new cluster's
   * log starts after its first snapshot there, and nothing before it is its to archive).
   */
  setArchivedThrough(index: number): void {
    if (index <= this.metaValue.archivedThrough) return;
    this.ensureBootMark();
    this.commitApplied();
    this.setMetaStmt.run("archived_through", index);
    this.metaValue = { ...this.metaValue, archivedThrough: index };
  }

  /** Resume writes paused in this data (init-cluster: a new cluster starts taking writes). */
  clearWritesPause(): void {
    this.ensureBootMark();
    this.commitApplied();
    this.setMetaStmt.run("writes_paused", 0);
    this.setMetaStmt.run("writes_paused_until_ms", 0);
    this.metaValue = { ...this.metaValue, writesPaused: false, writesPausedUntilMs: 0 };
  }

  /**
   * Forget the member addresses replicated with set_member (init-cluster: a new cluster's
   * members are those of its configuration, and the old cluster's rows name the old hosts).
   */
  forgetMemberAddresses(): void {
    this.ensureBootMark();
    this.commitApplied();
    this.db.run(`DELETE FROM ${metaTable} WHERE key LIKE 'member:%'`);
  }

  /** Record the cluster this store's data belongs to (bootstrap, init-cluster). */
  setClusterId(clusterId: string): void {
    this.ensureBootMark();
    this.commitApplied();
    this.setMetaStmt.run("cluster_id", clusterId);
    this.metaValue = { ...this.metaValue, clusterId };
  }

  /**
   * What the write with request id `id` answered, when it was applied within the retry
   * window of `nowMs` (request-ids.ts); null when it was not, or is forgotten.
   */
  rememberedRequest(id: string, nowMs: number): RequestOutcome | null {
    return this.requests.remembered(id, nowMs);
  }

  /** How many request ids the store remembers. */
  rememberedRequestCount(): number {
    return this.requests.count();
  }

  /**
   * Whether the store runs code of its own on a write: a trigger, or a table whose CHECK,
   * generated column or DEFAULT expression calls a function (tableRunsCode: any of these can
   * cost what it likes per row).
   * Then no write is plain (see write-shape.ts): each is tried before it enters the log.
   */
  runsCodeOnWrite(): boolean {
    // Asked on every write: known until an entry may have changed the schema.
    const epoch = this.guards.schemaEpoch;
    if (this.rowCodeKnown?.epoch !== epoch) {
      // On the applying connection: a trigger applied but not yet committed counts.
      const found = this.db.query("SELECT 1 FROM sqlite_schema WHERE type = 'trigger' LIMIT 1").get() !== null ||
        (this.db.query(`SELECT type, sql FROM sqlite_schema WHERE type IN ('table', 'index') AND sql IS NOT NULL AND name NOT LIKE '${internalTablePrefix.replaceAll("_", "\\_")}%' ESCAPE '\\'`).all() as { type: string; sql: string }[])
          .some((t) => (t.type === "table" ? tableRunsCode(t.sql) : indexRunsCode(t.sql)));
      this.rowCodeKnown = { epoch, found };
    }
    return this.rowCodeKnown.found;
  }

  private rowCodeKnown: { epoch: number; found: boolean } | null = null;

  /** A read in this process, of everything applied (unless the disk is full: of what is committed). */
  query(sql: string, params: readonly SqlValue[]): QueryResult {
    checkReadStatement(sql);
    this.commitForReader();
    try {
      return withStatement(this.readStatements, this.reader, sql, true, (stmt) => {
        const rows = stmt.values(...(params as never[])) as unknown[][];
        return { columns: stmt.columnNames, rows: rows.map((r) => r.map(jsonValue)) };
      });
    } catch (e) {
      // The file's damage is the node's, not the statement's: never a client error.
      if (isStoreDamage(e)) throw this.damagedAtRun(e);
      throw new SvcError("SQL_ERROR", errorMessage(e));
    }
  }

  /**
   * SQLite found the file damaged while the node runs: the store is marked (the next start sets
   * it aside and rebuilds it) and the error says so; the node stops on it. In memory: no mark.
   */
  damagedAtRun(e: unknown): SvcError {
    if (e instanceof SvcError && e.code === "STORE_DAMAGED") return e;
    return this.inMemory ? new SvcError("STORE_DAMAGED", `the in-memory store is damaged: ${errorMessage(e)}`, { cause: e }) : storeDamagedError(this.path, e);
  }

  stats(): StoreStats {
    this.commitForReader();
    let tables: TableCount[];
    try {
      tables = this.userTables().map((name): TableCount => {
        try {
          const row = this.reader.query(`SELECT count(*) AS n FROM "${name.replaceAll('"', '""')}"`).get() as { n: number };
          return { name, rows: row.n };
        } catch (e) {
          if (isStoreDamage(e)) throw e;
          return { name, rows: null, error: errorMessage(e) };
        }
      });
    } catch (e) {
      throw isStoreDamage(e) ? this.damagedAtRun(e) : e;
    }
    let sizeBytes = 0;
    for (const suffix of ["", "-wal"]) {
      try {
        sizeBytes += fs.statSync(this.path + suffix).size;
      } catch {
        // absent
      }
    }
    return { totalEntries: totalRows(tables), tables, sizeBytes };
  }

  /** Problems SQLite's integrity check finds; empty when the store is sound. */
  integrityProblems(check: "quick_check" | "integrity_check" = "integrity_check"): string[] {
    const rows = this.db.query(`PRAGMA ${check}`).values() as unknown[][];
    const messages = rows.map((r) => String(r[0]));
    return messages.length === 1 && messages[0] === "ok" ? [] : messages;
  }

  /** Make the store's file self-contained (for copying) by checkpointing its SQLite WAL. */
  checkpoint(): void {
    this.commitApplied();
    this.db.run("PRAGMA wal_checkpoint(TRUNCATE)");
  }

  /**
   * Close the store. It is flushed and its boot mark removed, unless `discard`: the caller
   * replaces or removes the file next, and the mark stays until that is done.
   */
  close(options: { discard?: boolean } = {}): void {
    if (this.closed) return;
    this.closed = true;
    // Uncommitted entries are applied again from the log on the next start if this fails.
    let commitError: unknown = null;
    if (options.discard !== true) {
      try {
        this.commitApplied();
      } catch (e) {
        commitError = e;
      }
    }
    this.flusher?.stop();
    void this.checkpointer?.close();
    for (const cache of [this.statements, this.readStatements]) {
      for (const stmt of cache.values()) stmt.finalize();
      cache.clear();
    }
    this.setMetaStmt.finalize();
    this.lastRowidStmt?.finalize();
    this.requests.close();
    if (!this.inMemory) this.reader.close();
    // Closing the last connection checkpoints the SQLite WAL into the file and removes it.
    this.db.close();
    if (commitError !== null) throw commitError;
    if (!this.unsynced || options.discard === true) return;
    fsyncPath(this.path);
    if (fs.existsSync(`${this.path}-wal`)) fsyncPath(`${this.path}-wal`);
    fs.rmSync(this.path + bootMarkSuffix, { force: true });
    fsyncPath(dirname(this.path));
  }

  /** The reader connection sees what is committed: commit what was applied, unless the disk is full. */
  private commitForReader(): void {
    if (!this.inMemory) this.commitForReaders();
  }

  /**
   * Tables whose definition holds an INITIALLY DEFERRED constraint (made before svc refused
   * them): a write that leaves one violated fails the store's shared commit, on every node.
   */
  deferredConstraintTables(): string[] {
    const rows = this.reader.query("SELECT name, sql FROM sqlite_schema WHERE type = 'table' AND sql LIKE '%deferred%'").all() as { name: string; sql: string }[];
    return rows.filter((r) => lexSql(r.sql).initiallyDeferred).map((r) => r.name);
  }

  private userTables(): string[] {
    const rows = this.reader
      .query(userTablesSql)
      .values() as string[][];
    return rows.map((r) => r[0] ?? "").filter((n) => !n.startsWith(internalTablePrefix));
  }

  private applyOne(entry: Entry, meta: StoreMeta): ApplyResult {
    switch (entry.kind) {
      case "noop":
        return { kind: "noop" };
      case "config": {
        const membership = decodeMembership(entry.data);
        if (membership === null) return { kind: "unreadable" };
        meta.membership = membership;
        this.setMetaStmt.run("membership", JSON.stringify(membership));
        return { kind: "config" };
      }
      case "normal":
        return this.applyCommand(entry, meta);
    }
  }

  private applyCommand(entry: Entry, meta: StoreMeta): ApplyResult {
    const command = decodeCommand(entry.data);
    if (command === null) return { kind: "unreadable" };
    switch (command.op) {
      case "pause_writes":
      case "resume_writes":
        meta.writesPaused = command.op === "pause_writes";
        meta.writesPausedUntilMs = command.op === "pause_writes" ? command.untilMs ?? 0 : 0;
        this.setMetaStmt.run("writes_paused", meta.writesPaused ? 1 : 0);
        this.setMetaStmt.run("writes_paused_until_ms", meta.writesPausedUntilMs);
        return { kind: command.op };
      case "archived_through":
        // Never backwards: a mark proposed by an earlier leader may commit after a later one.
        if (command.index > meta.archivedThrough) {
          meta.archivedThrough = command.index;
          this.setMetaStmt.run("archived_through", command.index);
        }
        return { kind: "archived_through" };
      case "set_member":
        this.setMetaStmt.run(`member:${command.member.id}`, JSON.stringify(command.member));
        return { kind: "set_member" };
      case "init_cluster":
        meta.clusterId = command.clusterId;
        this.setMetaStmt.run("cluster_id", command.clusterId);
        return { kind: "init_cluster" };
      case "execute": {
        const { requestId } = command;
        const id = requestId === undefined ? null : { requestId, bodyHash: requestBodyHash(command.statements) };
        const retried = id === null ? null : this.requests.beforeEntry(id.requestId, entry);
        if (id !== null && retried !== null) {
          // A retry: the first answer, unless the id came with other statements.
          if (reusedFor(retried, id.bodyHash)) {
            return { kind: "execute", ok: false, statementIndex: 0, message: requestIdReusedMessage(id.requestId, retried.firstIndex), firstIndex: retried.firstIndex, requestIdReused: true };
          }
          return { kind: "execute", ...answerOf(retried) };
        }
        if (command.checkedIndex !== undefined && command.checkedIndex !== entry.index) {
          return { kind: "execute", ok: false, statementIndex: 0, message: checkedElsewhereMessage(command.checkedIndex, entry.index) };
        }
        this.guards.beforeEntry(command.statements, requestId !== undefined);
        const result = this.functions.withEntry(entry.term, entry.index, entry.timestampMs, () => this.executeBatch(command.statements));
        if (id !== null && result.kind === "execute") this.requests.remember(id.requestId, entry, result, id.bodyHash);
        return result;
      }
    }
  }

  private executeBatch(statements: readonly { sql: string; params: SqlValue[] }[]): ApplyResult {
    const only = statements[0];
    // A lone statement is atomic in SQLite already, unless its conflict resolution is FAIL
    // (which keeps the rows it changed before failing): it needs no savepoint of its own.
    // One that may create a TEMP object needs one too, to undo it (ApplyGuards.afterStatement).
    const onlyTraits = statements.length === 1 && only !== undefined ? sqlTraits(only.sql) : null;
    if (only !== undefined && onlyTraits !== null && !onlyTraits.fail && !onlyTraits.creates) {
      try {
        const r = this.run(only.sql, only.params);
        return { kind: "execute", ok: true, results: [{ rowsAffected: r.changes, lastInsertId: r.lastInsertId }] };
      } catch (e) {
        if (isRowidsUsedUp(e, this.diskPath)) return this.rowidsUsedUp(0, false);
        throwIfEnvironmental(e);
        assert(this.db.inTransaction, "a failing statement left the batch transaction open (ROLLBACK resolution is refused before the log)");
        return { kind: "execute", ok: false, statementIndex: 0, message: errorMessage(e) };
      }
    }
    this.db.run("SAVEPOINT entry");
    const results: StatementResult[] = [];
    for (let i = 0; i < statements.length; i++) {
      const s = statements[i];
      assert(s !== undefined, "statement in range");
      try {
        const r = this.run(s.sql, s.params);
        this.guards.afterStatement(s.sql);
        results.push({ rowsAffected: r.changes, lastInsertId: r.lastInsertId });
      } catch (e) {
        if (isRowidsUsedUp(e, this.diskPath)) return this.rowidsUsedUp(i, true);
        throwIfEnvironmental(e);
        assert(this.db.inTransaction, "a failing statement left the batch transaction open (ROLLBACK resolution is refused before the log)");
        this.db.run("ROLLBACK TO entry");
        this.db.run("RELEASE entry");
        return { kind: "execute", ok: false, statementIndex: i, message: errorMessage(e) };
      }
    }
    this.db.run("RELEASE entry");
    return { kind: "execute", ok: true, results };
  }

  /**
   * Statement `statementIndex` of the entry being applied needed a rowid none is left for
   * (_rowid-limit.ts). When SQLite rolled back only the statement, the entry fails as any
   * failing statement does (`inEntrySavepoint`: its earlier statements are undone too). When it
   * rolled back the whole transaction, the entry fails here only if it was alone in it
   * (applyAround), and its failure is recorded in a new transaction; otherwise what was lost
   * is applied again around it (TransactionLostAt).
   */
  private rowidsUsedUp(statementIndex: number, inEntrySavepoint: boolean): ApplyResult {
    const failed: ApplyResult = { kind: "execute", ok: false, statementIndex, message: rowidsUsedUpMessage };
    if (this.db.inTransaction) {
      if (inEntrySavepoint) {
        this.db.run("ROLLBACK TO entry");
        this.db.run("RELEASE entry");
      }
      return failed;
    }
    if (this.isolatedIndex !== this.applyingIndex) throw new TransactionLostAt(this.applyingIndex);
    this.forgetDerived();
    this.beginBatch();
    return failed;
  }

  private run(sql: string, params: readonly SqlValue[]): { changes: number; lastInsertId: number | bigint } {
    const traits = sqlTraits(sql);
    const refused = traits.explain ? refusedAtApply(sql) : null;
    if (refused !== null) throw new Error(refused);
    const r = withStatement(this.statements, this.db, sql, false, (stmt) => stmt.run(...(params as never[])));
    // Only the statements SQLite counts rows for answer them: CREATE VIRTUAL TABLE … USING fts5
    // (or rtree) fills its shadow tables as it runs, and the count saw those rows.
    const changes = traits.counted ? Number(r.changes) : 0;
    // SQLite's last_insert_rowid() is the connection's memory of its last insert, whatever the
    // statement: an UPDATE, a DELETE or a CREATE would answer an earlier insert's rowid (one of
    // svc's own tables, even). A statement that inserted nothing answers 0.
    if (changes === 0 || !traits.inserting) return { changes, lastInsertId: 0 };
    const rowid = Number(r.lastInsertRowid);
    // A rowid past 2^53 comes back rounded: read it again, exact (rare enough to ask twice).
    if (Number.isSafeInteger(rowid)) return { changes, lastInsertId: rowid };
    this.lastRowidStmt ??= prepareStatement(this.db, "SELECT last_insert_rowid()", true);
    const exact = (this.lastRowidStmt.values()[0]?.[0] ?? 0) as number | bigint;
    return { changes, lastInsertId: exactInt(exact) };
  }

  private get guards(): ApplyGuards {
    this.guardsValue ??= new ApplyGuards(this.db);
    return this.guardsValue;
  }

  private readMeta(): StoreMeta {
    const rows = this.db.query(`SELECT key, value FROM ${metaTable}`).all() as { key: string; value: unknown }[];
    const map = new Map(rows.map((r) => [r.key, r.value]));
    let membership: Membership = emptyMembership;
    const rawMembership = map.get("membership");
    if (typeof rawMembership === "string") {
      membership = decodeMembership(new TextEncoder().encode(rawMembership)) ?? emptyMembership;
    }
    return {
      appliedIndex: Number(map.get("applied_index") ?? 0),
      appliedTerm: Number(map.get("applied_term") ?? 0),
      membership,
      clusterId: String(map.get("cluster_id") ?? ""),
      writesPaused: Number(map.get("writes_paused") ?? 0) === 1,
      writesPausedUntilMs: Number(map.get("writes_paused_until_ms") ?? 0),
      archivedThrough: Number(map.get("archived_through") ?? 0),
    };
  }
}

/**
 * Run `use` with a prepared statement. Short statements (the parameterised kind) come from a
 * bounded cache, oldest dropped first; long ones (values written inline) are prepared for
 * this use only, since each cached copy would hold the SQL text and its compiled program.
 */
function withStatement<T>(cache: Map<string, SqliteStatement>, db: Database, sql: string, exactIntegers: boolean, use: (stmt: SqliteStatement) => T): T {
  if (sql.length > cachedSqlLengthMax) {
    const stmt = prepareStatement(db, sql, exactIntegers);
    try {
      return use(stmt);
    } finally {
      stmt.finalize();
    }
  }
  return use(cachedStatement(cache, db, sql, exactIntegers));
}

function cachedStatement(cache: Map<string, SqliteStatement>, db: Database, sql: string, exactIntegers: boolean): SqliteStatement {
  let stmt = cache.get(sql);
  if (stmt === undefined) {
    stmt = prepareStatement(db, sql, exactIntegers);
    if (cache.size >= statementCacheSizeMax) {
      const oldest = cache.keys().next().value;
      if (oldest !== undefined) {
        cache.get(oldest)?.finalize();
        cache.delete(oldest);
      }
    }
    cache.set(sql, stmt);
  }
  return stmt;
}

/**
 * `exactIntegers`: the statement's integers come back as BigInt, so that none beyond 2^53 is
 * rounded (reads; writes ask for their rowid again in the rare case that needs it).
 */
function prepareStatement(db: Database, sql: string, exactIntegers: boolean): SqliteStatement {
  const stmt = db.prepare(sql);
  if (exactIntegers) stmt.safeIntegers(true);
  return stmt;
}

const unwritableCodes = new Set([
  "ENOSPC", "EDQUOT", "EROFS", "EACCES", "EPERM", "EIO",
  "SQLITE_FULL", "SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_IOERR",
]);

/** SQLite rolled back the whole open transaction over the entry at `index` (see Store.applyAround). */
class TransactionLostAt extends Error {
  constructor(readonly index: number) {
    super(`SQLite rolled back the open transaction at entry ${index} (a row it could not number)`);
  }
}

/**
 * A statement that failed because of this machine (a full disk, an I/O error), not because
 * of the statement: it must not become the entry's result, which every replica must compute
 * alike. It fails the whole apply instead (rolled back), for the node to retry or stop.
 */
function throwIfEnvironmental(e: unknown): void {
  // A damaged file fails a statement on this node only: never the entry's result (Store.apply).
  if (isDamageAtApply(e)) throw e;
  const code = (e as { code?: unknown } | null)?.code;
  if (typeof code === "string" && (code === "SQLITE_FULL" || code.startsWith("SQLITE_IOERR"))) throw e;
  if (e instanceof Error && /database or disk is full|disk I\/O error/.test(e.message)) throw e;
}

/** How long Store.open waits out a lock another connection holds on the store. */
const storeBusyWaitMs = 10_000;

/** Another connection holds a lock on the store: it is busy, not damaged. */
function isLocked(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === "string" && (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED"));
}

/** The disk or the permissions refused a write: a storage failure, not a damaged store. */
function isUnwritable(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === "string" && (unwritableCodes.has(code) || code.startsWith("SQLITE_IOERR") || code.startsWith("SQLITE_READONLY"));
}

function startCheckBound(fromEnv: string | undefined): number {
  const bytes = Number(fromEnv ?? "");
  return fromEnv !== undefined && fromEnv !== "" && Number.isSafeInteger(bytes) && bytes >= 0 ? bytes : 64 * 1024 * 1024;
}

/** The kernel's id for this boot; null where there is none (not Linux). */
function currentBootId(): string | null {
  try {
    const id = fs.readFileSync(bootIdPath, "utf8").trim();
    return id === "" ? null : id;
  } catch {
    return null;
  }
}

function readBootMark(storePath: string): string | null {
  try {
    return fs.readFileSync(storePath + bootMarkSuffix, "utf8").trim();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw e;
  }
}
