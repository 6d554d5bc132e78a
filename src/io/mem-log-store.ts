// The in-memory twin of LogStore for the simulator. It keeps two views: what was appended
// and what a sync made durable. crash() returns the durable view, optionally with the first
// unsynced entry torn off (a write that reached the disk only in part is cut on open, as the
// WAL does with a torn tail); failNextSync() makes the next sync reject, as an fsync error does.

import type { CheckpointRecord, HardStateRecord, LogRecord, LogStore, LogStoreStats, RemovedRecord } from "./log-store.ts";

export interface MemLogImage<E extends LogRecord> {
  readonly entries: readonly E[];
  /** Index the log starts after (a reset or compaction moved it). */
  readonly offset: number;
  readonly hardState: HardStateRecord | null;
  readonly lostLog: boolean;
  readonly checkpoint?: CheckpointRecord | null;
  readonly removed?: RemovedRecord | null;
}

export class MemLogStore<E extends LogRecord> implements LogStore<E> {
  private entries: E[];
  private offset: number;
  /** How many of `entries` are durable; everything after is lost by a crash. */
  private durableCount: number;
  private hardState: HardStateRecord | null;
  private lostLog: boolean;
  private checkpoint: CheckpointRecord | null;
  private removed: RemovedRecord | null;
  private failSync: Error | null = null;
  /** Changes when entries are replaced (a reset, a truncated suffix): a sync begun before covers none of the new ones. */
  private generation = 0;
  private closed = false;
  /** Entries handed out by readCommitted (the simulator counts catch-ups from the log store). */
  readCount = 0;
  /** Called with entries once a sync made them durable (the simulator checks them). */
  onDurable: ((entries: readonly E[]) => void) | null = null;
  /**
   * When set, sync() completes only when the simulator runs the callback it is handed (a
   * disk whose fsync takes time); a crash before that loses what it would have synced.
   */
  deferSync: ((complete: () => void) => void) | null = null;

  constructor(image: MemLogImage<E> = { entries: [], offset: 0, hardState: null, lostLog: false }) {
    this.entries = [...image.entries];
    this.offset = image.offset;
    this.durableCount = this.entries.length;
    this.hardState = image.hardState;
    this.lostLog = image.lostLog;
    this.checkpoint = image.checkpoint ?? null;
    this.removed = image.removed ?? null;
  }

  get lastIndex(): number {
    return this.offset + this.entries.length;
  }

  /** Entries held, synced or not. */
  all(): readonly E[] {
    return this.entries;
  }

  savedHardState(): HardStateRecord | null {
    return this.hardState;
  }

  get lostLogMarked(): boolean {
    return this.lostLog;
  }

  append(entries: readonly E[]): void {
    this.checkOpen();
    for (const e of entries) {
      const at = e.index - this.offset - 1;
      if (at < 0) throw new Error(`log store: append of index ${e.index} before the log start ${this.offset + 1}`);
      if (at > this.entries.length) throw new Error(`log store: append of index ${e.index} leaves a gap after ${this.lastIndex}`);
      if (at < this.entries.length) {
        this.generation++;
        this.entries.length = at;
        this.durableCount = Math.min(this.durableCount, at);
      }
      this.entries.push(e);
    }
  }

  sync(): Promise<void> {
    const defer = this.deferSync;
    if (defer === null) {
      try {
        this.syncNow();
        return Promise.resolve();
      } catch (e) {
        return Promise.reject(e);
      }
    }
    // A sync covers the entries appended before it began, not those appended while it runs.
    const upToIndex = this.lastIndex;
    const generation = this.generation;
    return new Promise((resolve, reject) => {
      defer(() => {
        if (this.closed) return; // crashed meanwhile: never settles, as a killed process never hears back
        if (this.failSync !== null) {
          const error = this.failSync;
          this.failSync = null;
          reject(error);
          return;
        }
        if (this.generation === generation) this.markDurable(Math.min(this.entries.length, upToIndex - this.offset));
        resolve();
      });
    });
  }

  syncNow(): void {
    this.checkOpen();
    if (this.failSync !== null) {
      const error = this.failSync;
      this.failSync = null;
      throw error;
    }
    this.markDurable(this.entries.length);
  }

  private markDurable(count: number): void {
    if (count <= this.durableCount) return;
    const fresh = this.entries.slice(this.durableCount, count);
    this.durableCount = count;
    this.onDurable?.(fresh);
  }

  saveHardState(state: HardStateRecord): void {
    this.checkOpen();
    this.hardState = state;
  }

  resetTo(nextIndex: number): void {
    this.checkOpen();
    // Durable at once, as the WAL's new segment is synced and its directory entry too.
    this.generation++;
    this.entries = [];
    this.durableCount = 0;
    this.offset = nextIndex - 1;
  }

  compact(index: number): Promise<number> {
    this.checkOpen();
    const drop = Math.min(this.entries.length, Math.max(0, index - this.offset));
    if (drop === 0) return Promise.resolve(0);
    // Removing covered entries is safe whenever it lands: nothing after them is touched.
    this.entries = this.entries.slice(drop);
    this.durableCount = Math.max(0, this.durableCount - drop);
    this.offset += drop;
    return Promise.resolve(1);
  }

  readCommitted(_reader: string, from: number, through: number, bytesMax: number): Promise<E[] | null> {
    this.checkOpen();
    if (from <= this.offset || through < from || through > this.lastIndex) return Promise.resolve(null);
    const out: E[] = [];
    let bytes = 0;
    for (let i = from; i <= through && (out.length <= 1 || bytes < bytesMax); i++) {
      const e = this.entries[i - this.offset - 1]!;
      out.push(e);
      if (out.length > 1) bytes += entryBytes(e) - 32;
    }
    this.readCount += out.length;
    return Promise.resolve(out);
  }

  saveCheckpoint(checkpoint: CheckpointRecord): Promise<void> {
    this.checkOpen();
    this.checkpoint = checkpoint;
    return Promise.resolve();
  }

  setLostLog(lost: boolean): void {
    this.checkOpen();
    this.lostLog = lost;
  }

  setRemoved(mark: RemovedRecord | null): void {
    this.checkOpen();
    this.removed = mark;
  }

  /** What setRemoved last recorded (durable when it returned). */
  get removedMark(): RemovedRecord | null {
    return this.removed;
  }

  stats(): LogStoreStats {
    let sizeBytes = 0;
    for (const e of this.entries) sizeBytes += entryBytes(e);
    return { segmentCount: this.entries.length > 0 ? 1 : 0, sizeBytes, firstIndex: this.entries.length > 0 ? this.offset + 1 : 0 };
  }

  close(): void {
    this.closed = true;
  }

  /** The next sync rejects with `error` (an fsync that failed). */
  failNextSync(error: Error): void {
    this.failSync = error;
  }

  /**
   * What survives a crash now: the durable entries and the hard state. A torn write of the
   * first unsynced entry is cut on open by the WAL, so it leaves the same image.
   */
  crashImage(): MemLogImage<E> {
    this.closed = true;
    return { entries: this.entries.slice(0, this.durableCount), offset: this.offset, hardState: this.hardState, lostLog: this.lostLog, checkpoint: this.checkpoint, removed: this.removed };
  }

  private checkOpen(): void {
    if (this.closed) throw new Error("log store: closed");
  }
}

/** An entry's size as the WAL would hold it, roughly: its data plus a record's framing. */
function entryBytes(e: LogRecord): number {
  const data = (e as { data?: Uint8Array }).data;
  return 32 + (data?.length ?? 0);
}
