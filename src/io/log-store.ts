// The log store the node writes through: log entries (the WAL) and the hard state (term,
// vote, commit, cluster id), plus the mark a member keeps while it lost entries it held.
// Production: storage's FileLogStore (WAL segments, raft/hardstate, raft/LOST_LOG). Twin:
// MemLogStore (mem-log-store.ts), which loses exactly what was not synced at a crash.
//
// Contract: entries appended are durable only once a sync() that began after the append has
// resolved; saveHardState() is durable when it returns. The node acknowledges nothing before.

/** What the log store needs of an entry; the node stores Raft entries. */
export interface LogRecord {
  readonly index: number;
  readonly term: number;
}

export interface HardStateRecord {
  readonly term: number;
  readonly vote: string | null;
  readonly commit: number;
  /** Empty until the node belongs to a cluster. */
  readonly clusterId: string;
}

/** The store was made durable up to `index` (a checkpoint); recorded with the log's own state. */
export interface CheckpointRecord {
  readonly index: number;
  readonly term: number;
  readonly clusterId: string;
}

/** A removal this node learned of from a member's refusal (raft/REMOVED). */
export interface RemovedRecord {
  readonly configIndex: number;
  readonly by: string;
  readonly clusterId: string;
}

export interface LogStoreStats {
  /** Files (or units) the log occupies; compaction removes whole units. */
  readonly segmentCount: number;
  readonly sizeBytes: number;
  /** Index of the first entry held, 0 when empty. */
  readonly firstIndex: number;
}

export interface LogStore<E extends LogRecord> {
  /** Index of the last entry appended (synced or not); the index before the log when empty. */
  readonly lastIndex: number;
  /**
   * Append after the last entry. An entry at or below lastIndex replaces the suffix from its
   * index on (a new leader overwrote uncommitted entries). Not durable until sync().
   */
  append(entries: readonly E[]): void;
  /** Make every entry appended so far durable; rejects on an I/O error (the node stops). */
  sync(): Promise<void>;
  /** The same, blocking: start-up and offline tools only. */
  syncNow(): void;
  /** Replace the hard state, durably, before returning. */
  saveHardState(state: HardStateRecord): void;
  /** Drop every entry and continue at `nextIndex` (the log restarts after a snapshot). */
  resetTo(nextIndex: number): void;
  /** Drop the entries at or below `index` that a snapshot covers; returns the units removed. */
  compact(index: number): Promise<number>;
  /**
   * Committed entries from..through, read
   * without holding the caller's thread for more than a small window of records at a time;
   * null when the store no longer holds `from` (removed behind a snapshot). The first entry is
   * the prevIndex of the append the rest become: the read stops once the entries after it
   * reach bytesMax of data, so it returns at least two when through > from. `reader` names a
   * sequential reader (the member being caught up): a read that goes on where the reader's
   * last one stopped reads only what it returns. Only committed entries may be asked for.
   */
  readCommitted(reader: string, from: number, through: number, bytesMax: number): Promise<E[] | null>;
  /**
   * Record, durably, that the store is durable up to `checkpoint.index` (it vouches for the
   * store at start); resolved once it is. The waits for the disk happen off the node's thread.
   */
  saveCheckpoint(checkpoint: CheckpointRecord): Promise<void>;
  /** Record, durably, whether this member lost log entries it held (see the node's vote gate). */
  setLostLog(lost: boolean): void;
  /**
   * Record, durably, that a member said this node was removed from the cluster (null: forget
   * it; see RaftCore.removalNotice). Throws, changing nothing, when it cannot be written.
   */
  setRemoved(mark: RemovedRecord | null): void;
  stats(): LogStoreStats;
  close(): void;
}
