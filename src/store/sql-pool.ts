// SQL processes (sql-process.ts) kept ready by the node, each running one request at a time.
// A request that passes its time limit, whose caller went away (its AbortSignal), or whose
// process grows past its memory limit has its process killed (SIGKILL: SQLite cannot be asked)
// and replaced; the caller gets a typed error. Requests wait in a bounded queue while every
// process is busy; a read's time limit runs from when it was asked, a write check's from when a
// running process takes it (checks go before waiting reads when one pool serves both).
// A pool with idleMs starts its processes when asked and stops them when idle.
//
// The store file may be replaced under the processes (a snapshot installed): reopen() makes
// every later request run in a process started after that.

import type { Subprocess } from "bun";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { assert } from "../util/assert.ts";
import { SvcError } from "../util/errors.ts";
import type { SqlValue, Statement } from "./command.ts";
import { storeDamagedError } from "./damage.ts";
import { sqlProcessCacheEnvKey, sqlProcessEnvKey, type CheckFailure, type SqlProcessReply, type SqlProcessRequest } from "./sql-process.ts";

export interface SqlPoolOptions {
  /** Processes kept; each runs one request at a time. */
  readonly processesCount: number;
  /** A process whose resident memory passes this is killed with its request. */
  readonly processMemoryBytesMax: number;
  /**
   * A process that still holds more than this once its request is answered is replaced: the
   * runtime keeps what a large request grew its heap to, and the next request (a small read)
   * would start near processMemoryBytesMax and be killed for what the one before it left.
   */
  readonly restartAboveBytes?: number;
  /** SQLite's page cache on each process's connections. */
  readonly cacheBytes?: number;
  /** The setting the limits are shares of, for messages. */
  readonly maxMemoryMb?: number;
  /** A process idle this long is stopped (not in a warm pool); the next request starts one. */
  readonly idleMs?: number;
  /** Requests waiting for a process beyond this are refused (OVERLOADED). */
  readonly queuedMax?: number;
  /** What the errors call a read ("query" unless told); a write check is a "write check". */
  readonly label?: string;
  /**
   * Keep the processes started, not only when asked: a request then never waits for a
   * process to start, which a time budget measured on the work wants (write checks).
   */
  readonly warm?: boolean;
}

export interface SqlRows {
  columns: string[];
  /** The rows as the JSON answer writes them (_json-rows.ts). */
  rowsJson: string;
}

export type CheckVerdict =
  /** The batch finished; `failed` says which statement fails (as it would when applied). */
  | { finished: true; failed: CheckFailure | null };

type Payload = { kind: "query"; sql: string; params: SqlValue[]; resultBytesMax: number }
  | { kind: "check"; statements: Statement[]; term: number; index: number; timestampMs: number };

interface Job {
  /** Set when a process takes the job: its reply carries it. */
  id: number;
  payload: Payload;
  deadlineMs: number;
  timeoutMs: number;
  signal: AbortSignal | undefined;
  resolve: (reply: SqlProcessReply) => void;
  reject: (e: SvcError) => void;
  onAbort: (() => void) | null;
}

interface Slot {
  proc: Subprocess;
  /** The store generation the process was started for. */
  generation: number;
  job: Job | null;
  timer: ReturnType<typeof setTimeout> | null;
  /** Stops the idle process (idleMs). */
  idleTimer: ReturnType<typeof setTimeout> | null;
  /** The process said it is ready (its runtime started). */
  ready: boolean;
  /** A write check given to a process not ready yet: its time left, counted from when it is. */
  leftMsAtReady: number | null;
  exited: boolean;
  /**
   * Killed by the pool (retire): it keeps its place among the slots until it has exited, so
   * that its replacement does not start while it still holds its memory (a process killed for
   * passing its cap, beside the one started for the next request, made twice the cap).
   */
  retired: boolean;
}

const statmPath = (pid: number): string => `/proc/${pid}/statm`;
const pageBytes = 4096;
const memoryWatchIntervalMs = 50;
const respawnPauseMs = 1000;
/** A killed process that has not exited by then (stuck in the kernel) gives up its place anyway. */
const retiredExitWaitMs = 2000;
/** An answer past this (as JSON) makes the pool look at its process's memory afterwards. */
const largeAnswerBytes = 256 * 1024;
/** A process started for a write check that has not said it is ready by then is given up. */
const processStartMsMax = 10_000;

export class SqlProcessPool {
  private readonly slots: Slot[] = [];
  private readonly queue: Job[] = [];
  private nextId = 1;
  private generation = 0;
  private closed = false;
  private memoryWatch: ReturnType<typeof setInterval> | null = null;
  /** What errors call a read. */
  private readonly label: string;

  constructor(private path: string, private readonly options: SqlPoolOptions) {
    assert(options.processesCount >= 1, "a pool has a process");
    this.label = options.label ?? "query";
    this.replenish();
  }

  /** A read, answered from the store file as it is when the process starts the read. */
  async query(sql: string, params: SqlValue[], limits: { timeoutMs: number; resultBytesMax: number; signal?: AbortSignal }): Promise<SqlRows> {
    const reply = await this.run({ kind: "query", sql, params, resultBytesMax: limits.resultBytesMax }, limits.timeoutMs, limits.signal);
    if (reply.kind === "rows") return { columns: reply.columns, rowsJson: reply.rowsJson };
    if (reply.kind === "error" && reply.tooLarge === true) {
      throw new SvcError("RESULT_TOO_LARGE", `the ${this.label}'s ${reply.message}${this.shareOfSetting()}`, {
        hint: "select fewer rows or columns (LIMIT, a narrower WHERE), or page through the result",
      });
    }
    throw replyError(reply, this.path);
  }

  /** Run a write batch as the entry (term, index, timestampMs) would apply, and roll it back. */
  async check(statements: Statement[], entry: { term: number; index: number; timestampMs: number }, timeoutMs: number): Promise<CheckVerdict> {
    const reply = await this.run({ kind: "check", statements, ...entry }, timeoutMs, undefined);
    if (reply.kind === "checked") return { finished: true, failed: reply.failed };
    throw replyError(reply, this.path);
  }

  /** The store file was replaced: later requests run in processes that open the new one. */
  reopen(path: string): void {
    this.path = path;
    this.generation++;
    for (const slot of [...this.slots]) if (slot.job === null) this.retire(slot);
    this.replenish();
  }

  close(): void {
    this.closed = true;
    const error = new SvcError("SHUTTING_DOWN", "the node is shutting down", { hint: "retry against another node" });
    for (const job of this.queue.splice(0)) this.settle(job, () => job.reject(error));
    for (const slot of [...this.slots]) {
      const job = slot.job;
      this.retire(slot);
      if (job !== null) this.settle(job, () => job.reject(error));
    }
    this.stopMemoryWatch();
  }

  /** Processes alive now (for tests and metrics). */
  get processIds(): number[] {
    return this.slots.filter((s) => !s.exited).map((s) => s.proc.pid);
  }

  private labelOf(payload: Payload): string {
    return payload.kind === "check" ? "write check" : this.label;
  }

  /** ", its share of max_memory_mb (N MB)" when the pool knows the setting. */
  private shareOfSetting(): string {
    const mb = this.options.maxMemoryMb;
    return mb === undefined ? "" : `, its share of max_memory_mb (${mb} MB)`;
  }

  private run(payload: Payload, timeoutMs: number, signal: AbortSignal | undefined): Promise<SqlProcessReply> {
    if (this.closed) return Promise.reject(new SvcError("SHUTTING_DOWN", "the node is shutting down", { hint: "retry against another node" }));
    const label = this.labelOf(payload);
    if (signal?.aborted === true) return Promise.reject(cancelled(label));
    if (this.queue.length >= (this.options.queuedMax ?? 1024)) {
      return Promise.reject(new SvcError("OVERLOADED", `too many ${label}s are waiting`, { hint: "retry after a short wait" }));
    }
    return new Promise<SqlProcessReply>((resolve, reject) => {
      const job: Job = { id: 0, payload, deadlineMs: performance.now() + timeoutMs, timeoutMs, signal, resolve, reject, onAbort: null };
      if (signal !== undefined) {
        job.onAbort = () => this.abandon(job, cancelled(label));
        signal.addEventListener("abort", job.onAbort, { once: true });
      }
      // A write check holds back every other write: it goes before the reads waiting.
      if (payload.kind === "check") this.queue.unshift(job);
      else this.queue.push(job);
      this.pump();
    });
  }

  private pump(): void {
    while (this.queue.length > 0) {
      let slot = this.slots.find((s) => s.job === null && !s.exited && s.generation === this.generation);
      if (slot === undefined) {
        if (this.slots.length >= this.options.processesCount) return;
        slot = this.spawn();
      }
      const job = this.queue.shift();
      if (job === undefined) return;
      // A write check's limit is for the write's own work: it runs from here (from when the
      // process is ready, if it is starting), not from when it was asked.
      const leftMs = job.payload.kind === "check" ? job.timeoutMs : job.deadlineMs - performance.now();
      if (leftMs <= 0) {
        this.settle(job, () => job.reject(timedOut(job, this.labelOf(job.payload))));
        continue;
      }
      this.start(slot, job, leftMs);
    }
  }

  private spawn(): Slot {
    const slot: Slot = { proc: null as unknown as Subprocess, generation: this.generation, job: null, timer: null, idleTimer: null, ready: false, leftMsAtReady: null, exited: false, retired: false };
    const env: Record<string, string | undefined> = { ...process.env, [sqlProcessEnvKey]: "1" };
    if (this.options.cacheBytes !== undefined) env[sqlProcessCacheEnvKey] = String(Math.ceil(this.options.cacheBytes / 1024));
    // The process's garbage collector sizes its heap against what it is told the machine has:
    // told its own cap, it collects before growing past it (a JavaScriptCore option).
    env["BUN_JSC_forceRAMSize"] = String(this.options.processMemoryBytesMax);
    slot.proc = Bun.spawn({
      cmd: sqlProcessCommand(),
      env,
      stdio: ["ignore", "ignore", "inherit"],
      serialization: "advanced",
      ipc: (message: SqlProcessReply) => this.onReply(slot, message),
      onExit: () => this.onExit(slot),
    });
    this.slots.push(slot);
    return slot;
  }

  private start(slot: Slot, job: Job, leftMs: number): void {
    if (slot.idleTimer !== null) clearTimeout(slot.idleTimer);
    slot.idleTimer = null;
    slot.job = job;
    job.id = this.nextId++;
    const request = { id: job.id, path: this.path, ...job.payload } as SqlProcessRequest;
    slot.proc.send(request);
    if (!slot.ready && job.payload.kind === "check") {
      // A write check's time limit is for the write: it starts once the process runs.
      slot.leftMsAtReady = leftMs;
      slot.timer = setTimeout(() => this.abandon(job, notStarted(this.labelOf(job.payload))), processStartMsMax);
    } else {
      slot.timer = setTimeout(() => this.abandon(job, timedOut(job, this.labelOf(job.payload))), leftMs);
    }
    this.startMemoryWatch();
  }

  private onReply(slot: Slot, reply: SqlProcessReply): void {
    if (reply.kind === "ready") return this.onReady(slot);
    const job = slot.job;
    if (job === null || job.id !== reply.id) return;
    this.finish(slot);
    this.settle(job, () => job.resolve(reply));
    if (slot.generation !== this.generation || this.keptTooMuch(slot, reply)) this.retire(slot);
    this.pump();
    this.stopWhenIdle(slot);
  }

  private keptTooMuch(slot: Slot, reply: SqlProcessReply): boolean {
    const limit = this.options.restartAboveBytes;
    // Looked at after what can grow a process (a write check, a large answer, a failure), not
    // after every small read: reading /proc costs the node's thread more than such a read does.
    if (limit === undefined || (reply.kind === "rows" && (reply.bytes ?? 0) < largeAnswerBytes)) return false;
    const rss = residentBytes(slot.proc.pid);
    return rss !== null && rss > limit;
  }

  private onReady(slot: Slot): void {
    slot.ready = true;
    const job = slot.job;
    const leftMs = slot.leftMsAtReady;
    slot.leftMsAtReady = null;
    if (job === null || leftMs === null) return;
    if (slot.timer !== null) clearTimeout(slot.timer);
    slot.timer = setTimeout(() => this.abandon(job, timedOut(job, this.labelOf(job.payload))), leftMs);
  }

  /** A process of a pool with idleMs that has no request is stopped after that long. */
  private stopWhenIdle(slot: Slot): void {
    const idleMs = this.options.idleMs;
    if (idleMs === undefined || this.options.warm === true || slot.exited || slot.job !== null || slot.idleTimer !== null) return;
    slot.idleTimer = setTimeout(() => {
      slot.idleTimer = null;
      if (slot.job === null && !slot.exited) this.retire(slot);
    }, idleMs);
    slot.idleTimer.unref();
  }

  private onExit(slot: Slot): void {
    slot.exited = true;
    if (slot.idleTimer !== null) clearTimeout(slot.idleTimer);
    slot.idleTimer = null;
    const i = this.slots.indexOf(slot);
    if (i < 0) return; // retired, and its place already given up (retiredExitWaitMs)
    this.slots.splice(i, 1);
    const job = slot.job;
    this.finish(slot);
    if (job !== null) {
      this.settle(job, () => job.reject(new SvcError("SQL_PROCESS_FAILED", `the process running the ${this.labelOf(job.payload)} exited`, {
        hint: "retry; if it happens again, the node's log says why",
      })));
    }
    if (this.closed) return;
    this.pump();
    // A process that dies by itself is replaced after a pause, never in a tight loop.
    if (this.options.warm === true) {
      if (slot.retired) this.replenish();
      else setTimeout(() => this.replenish(), respawnPauseMs);
    }
  }

  /** A warm pool starts processes up to its count (those of the current store file). */
  private replenish(): void {
    if (this.options.warm !== true || this.closed) return;
    while (this.slots.filter((s) => s.generation === this.generation).length < this.options.processesCount) this.spawn();
  }

  /** Give up on a job: kill its process if it runs, or take it off the queue. */
  private abandon(job: Job, error: SvcError): void {
    const slot = this.slots.find((s) => s.job === job);
    if (slot !== undefined) {
      this.finish(slot);
      this.retire(slot);
    } else {
      const i = this.queue.indexOf(job);
      if (i < 0) return;
      this.queue.splice(i, 1);
    }
    this.settle(job, () => job.reject(error));
    this.pump();
  }

  private finish(slot: Slot): void {
    if (slot.timer !== null) clearTimeout(slot.timer);
    slot.timer = null;
    slot.leftMsAtReady = null;
    slot.job = null;
    if (!this.slots.some((s) => s.job !== null)) this.stopMemoryWatch();
  }

  /** Kill a slot's process; its place is given up when it has exited (onExit), and then refilled. */
  private retire(slot: Slot): void {
    if (slot.idleTimer !== null) clearTimeout(slot.idleTimer);
    slot.idleTimer = null;
    if (slot.retired) return;
    slot.exited = true;
    slot.retired = true;
    slot.proc.kill("SIGKILL");
    setTimeout(() => this.onExit(slot), retiredExitWaitMs).unref();
  }

  private settle(job: Job, answer: () => void): void {
    if (job.onAbort !== null) job.signal?.removeEventListener("abort", job.onAbort);
    job.onAbort = null;
    answer();
  }

  private startMemoryWatch(): void {
    if (this.memoryWatch !== null) return;
    this.memoryWatch = setInterval(() => {
      for (const slot of [...this.slots]) {
        const job = slot.job;
        if (job === null) continue;
        const rss = residentBytes(slot.proc.pid);
        if (rss !== null && rss > this.options.processMemoryBytesMax) {
          this.abandon(job, new SvcError(job.payload.kind === "query" ? "RESULT_TOO_LARGE" : "WRITE_TOO_EXPENSIVE",
            `the ${this.labelOf(job.payload)} needed more than ${Math.round(this.options.processMemoryBytesMax / 2 ** 20)} MiB of memory${this.shareOfSetting()}, and was stopped`, {
              hint: job.payload.kind === "query" ? "select fewer rows or smaller values" : "split the write into smaller batches",
            }));
        }
      }
    }, memoryWatchIntervalMs);
  }

  private stopMemoryWatch(): void {
    if (this.memoryWatch !== null) clearInterval(this.memoryWatch);
    this.memoryWatch = null;
  }
}

function replyError(reply: SqlProcessReply, storePath: string): SvcError {
  // The file's damage, found by the process: the node's, never the statement's.
  if (reply.kind === "error" && reply.damaged === true) return storeDamagedError(storePath, reply.message);
  if (reply.kind === "error" && reply.environmental === true) {
    return new SvcError("SQL_PROCESS_FAILED", `the statement could not run: ${reply.message}`, { hint: "retry after a short wait" });
  }
  const message = reply.kind === "error" ? reply.message : `unexpected answer ${reply.kind}`;
  return new SvcError("SQL_ERROR", message);
}

function timedOut(job: Job, label: string): SvcError {
  if (job.payload.kind === "check") {
    return new SvcError("WRITE_TOO_EXPENSIVE", `the write did not finish within ${job.timeoutMs} ms when tried before entering the log, and was refused; nothing was applied`, {
      hint: "make the statements cheaper or split the batch; a statement that never ends (a recursive CTE or trigger without a bound) cannot be written. [limits] write_check_timeout_ms sets the limit",
    });
  }
  return new SvcError("QUERY_TIMEOUT", `the ${label} did not finish within ${job.timeoutMs} ms and was stopped`, {
    hint: "make the query cheaper (an index, a narrower WHERE, a LIMIT); [limits] query_timeout_ms sets the limit (admin_query_timeout_ms for /admin/query and stats)",
  });
}

function notStarted(label: string): SvcError {
  return new SvcError("SQL_PROCESS_FAILED", `the process for the ${label} did not start within ${processStartMsMax} ms`, {
    hint: "retry; if it happens again, the node's log says why (a machine short of memory or CPU)",
  });
}

function cancelled(label: string): SvcError {
  return new SvcError("QUERY_CANCELLED", `the client went away; the ${label} was stopped`);
}

function residentBytes(pid: number): number | null {
  try {
    const fields = readFileSync(statmPath(pid), "utf8").split(" ");
    return Number(fields[1]) * pageBytes;
  } catch {
    return null;
  }
}

/**
 * How to start a SQL process: the compiled binary itself (told by its environment), or bun with
 * the entry file. On Linux the binary is named by the running process's own inode: a package
 * upgrade replaces the file at execPath while the node runs, and the SQL process must be the
 * node's own version (or the file is gone, and a spawn by path fails with ENOENT).
 */
function sqlProcessCommand(): string[] {
  if (import.meta.url.includes("$bunfs")) return [runningExecutable()];
  return [process.execPath, join(import.meta.dir, "sql-process-main.ts")];
}

function runningExecutable(): string {
  const self = `/proc/${process.pid}/exe`;
  return process.platform === "linux" && existsSync(self) ? self : process.execPath;
}
