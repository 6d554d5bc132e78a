// The backup module's error codes: a directory a job cannot read (the job stops), and
// problems a job reports while going on with the rest (CleanupProblem), object stores, and
// backups that cannot be made, that do not verify, or that would overwrite newer data.

import type { CleanupProblem } from "./types.ts";

export type BackupErrorCode =
  | "CLEANUP_DIR_MISSING" | "CLEANUP_DIR_UNREADABLE" | CleanupProblem["code"]
  | "OBJECT_URL_INVALID" | "OBJECT_STORE_NO_CREDENTIALS" | "OBJECT_STORE_FAILED"
  | "BACKUP_FAILED" | "BACKUP_DAMAGED" | "RESTORE_REFUSED"
  /** The WAL archive (wal-replay): nothing in it, a missing range, a damaged or conflicting segment, unreadable. */
  | "ARCHIVE_EMPTY" | "ARCHIVE_GAP" | "ARCHIVE_DAMAGED" | "ARCHIVE_CONFLICT" | "ARCHIVE_UNREADABLE"
  /** wal-replay will not run on this data directory or to this target (nothing was changed). */
  | "WAL_REPLAY_REFUSED";
