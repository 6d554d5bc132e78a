// The node module's error codes: what a client or an operator sees from a running node
// (not the leader, overloaded, timed out, shutting down, a failed disk) and what loading a
// data directory can find wrong with it.

export type NodeErrorCode =
  | "NOT_LEADER"
  | "WRITES_PAUSED"
  | "OVERLOADED"
  | "SHUTTING_DOWN"
  /** A write was committed but could not be read back when applied. */
  | "APPLY_FAILED"
  /** A write's statement failed in SQLite; nothing of its batch was applied. */
  | "SQL_ERROR"
  /** A write's request_id was used before for other statements; nothing was applied. */
  | "REQUEST_ID_REUSED"
  /** The disk failed under the node; it stops serving and replays its WAL on restart. */
  | "STORAGE_FAILED"
  /**
   * The data directory's disk has no room for the log or the store: writes are refused, reads
   * served, and writing resumes by itself once space is freed.
   */
  | "DISK_FULL"
  /** A waiting write's log position was taken by another leader's entry. */
  | "ENTRY_REPLACED"
  | "WRITE_TIMEOUT"
  /** A waiting write's node stopped or failed: the write may or may not be applied. */
  | "OUTCOME_UNKNOWN"
  | "READ_TIMEOUT"
  /** A stale read on a node that waits for the leader's snapshot: it holds none of the cluster's data yet. */
  | "RECOVERING"
  /** A leader's entries differ from ones this node committed: its log is of another history; it stops. */
  | "HISTORY_DIVERGED"
  /** A client's request on a node removed from the cluster: not served, nothing applied. */
  | "NOT_A_MEMBER"
  | "CHANGE_IN_PROGRESS"
  | "INVALID_CHANGE"
  | "INVALID_TRANSFER"
  | "TRANSFER_TIMEOUT"
  | "CATCH_UP_TIMEOUT"
  /** Taking a snapshot failed (the image, the disk); the node goes on with its log. */
  | "SNAPSHOT_FAILED"
  /** At start: a path below the data directory is not of the kind svc keeps there. */
  | "DATA_DIR_INVALID"
  /** At start: the data directory cannot be written, or belongs to another user. */
  | "DATA_DIR_NOT_WRITABLE"
  | "DATA_DIR_WRONG_OWNER"
  /** At start: entries between the newest snapshot and the WAL are missing. */
  | "LOG_GAP"
  /** At start: a lone node's store is damaged and nothing can rebuild it (no image, no WAL). */
  | "STORE_UNRECOVERABLE"
  /** At start: a lone node that belonged to a cluster (MEMBER) holds nothing of it any more. */
  | "DATA_GONE"
  /** At start: a file of the peer port's mutual TLS ([tls] with peer_ca_file) cannot be used. */
  | "PEER_TLS_INVALID"
  /** At start: the gossip key file ([gossip] key_file) cannot be read or holds no valid key. */
  | "GOSSIP_KEY_INVALID";
