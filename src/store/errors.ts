// The store module's error codes: refused or failed SQL, and a store that cannot be trusted
// or written.

export type StoreErrorCode =
  /** A statement svc does not accept (admission, before anything runs). */
  | "SQL_REFUSED"
  /** SQLite refused a statement while running it. */
  | "SQL_ERROR"
  /** The store file cannot be written (disk full, I/O error, read-only). */
  | "STORAGE_FAILED"
  /** The store file is not a healthy SQLite database, or was open at a crash. */
  | "STORE_DAMAGED"
  /** Taking or sealing a snapshot image failed. */
  | "SNAPSHOT_FAILED"
  /** Making the store durable up to an applied index failed (retried at the next interval). */
  | "CHECKPOINT_FAILED"
  /** A read passed its time limit and was stopped. */
  | "QUERY_TIMEOUT"
  /** A read's client went away; its work was stopped (nobody hears this one). */
  | "QUERY_CANCELLED"
  /** A read's result (or the memory it took) passed its size limit; nothing is cut short. */
  | "RESULT_TOO_LARGE"
  /** A write did not finish within its budget when tried before the log, and was refused. */
  | "WRITE_TOO_EXPENSIVE"
  /** The process running a statement failed or its lock was busy: retry. */
  | "SQL_PROCESS_FAILED";
