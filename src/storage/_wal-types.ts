// The WAL's segment and position types, shared by wal.ts and the readers beside it.

export interface SegmentInfo {
  readonly seq: number;
  readonly firstIndex: number;
  readonly path: string;
  readonly name: string;
  /** Highest entry index written to the segment; 0 when it holds none yet. */
  maxIndex: number;
  /** Bytes of records written; the file is preallocated beyond this with zeros. */
  sizeBytes: number;
}

/**
 * Where the stretch of the WAL that no later record rewrites begins: every record from here
 * on is the log's final word for its index, and they run contiguously from `index` to the
 * last index. offset 0 means the segment's first record after its header.
 */
export interface WalFinalFrom {
  readonly seq: number;
  readonly offset: number;
  readonly index: number;
}
