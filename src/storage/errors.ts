// The storage module's error codes: damage found on disk, and a data directory another
// process holds.

export type StorageErrorCode =
  /** A WAL segment has a bad record before its end: repair or rebuild the node. */
  | "WAL_CORRUPT"
  /** raft/hardstate cannot be decoded. */
  | "HARDSTATE_CORRUPT"
  /** Another process (a running node, an offline tool) holds the data directory's lock. */
  | "DATA_DIR_LOCKED";
