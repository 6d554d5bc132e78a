// The state machine the node applies committed entries to, and the snapshots of it. The two
// belong together: a snapshot is an image of the state machine, made from it and installed
// into it. Production: the SQLite store on disk with snapshot directories under
// raft/snapshots/ (the node's FileSnapshots). Twin: the same store held in memory with images
// kept as bytes (store's MemSnapshots), so the simulator applies real SQL.

import type { LogRecord } from "./log-store.ts";

export interface StateMachine<E extends LogRecord, R> {
  /** The index of the last entry applied (0 before any). */
  readonly appliedIndex: number;
  /** Apply committed entries in order, atomically each; one result per entry. */
  apply(entries: readonly E[]): R[];
}

/** A snapshot filed in the snapshot store. */
export interface SnapshotRecord<M> {
  readonly term: number;
  readonly index: number;
  readonly membership: M;
  readonly clusterId: string;
  readonly sizeBytes: number;
  /** Where it is: a directory in production, a name in the twin. */
  readonly location: string;
}

/** How an install went, for the log. */
export type InstallMethod = "staged" | "copied" | "in_memory";

/**
 * Snapshots of the state machine `S`. Taking one reads the state machine's applied state
 * while it goes on applying; installing one replaces the state machine (the old one is
 * closed) and returns the new.
 */
export interface SnapshotStore<M, S> {
  /** The newest filed snapshot, null when none. */
  latest(): SnapshotRecord<M> | null;
  find(term: number, index: number): SnapshotRecord<M> | null;
  count(): number;
  /**
   * Make an image of `state`'s applied state and file it. Resolves to null, filing nothing,
   * when the image would not be newer than `afterIndex`.
   */
  take(state: S, clusterId: string, afterIndex: number): Promise<SnapshotRecord<M> | null>;
  /** Replace `state` with the image of `record`, which must be filed. */
  install(state: S, record: SnapshotRecord<M>): { state: S; method: InstallMethod };
  /** Remove all but the newest `keepCount` snapshots; resolves once that is durable. */
  prune(keepCount: number): Promise<number>;
}
