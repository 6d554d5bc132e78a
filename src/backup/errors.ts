// The backup module's error codes: a directory a job cannot read (the job stops), and
// problems a job reports while going on with the rest (CleanupProblem), object stores, and
// backups that cannot be made, that do not verify, or that would overwrite newer data.

import type { CleanupProblem } from "./types.ts";

export type BackupErrorCode =
  | "CLEANUP_DIR_MISSING" | "CLEANUP_DIR_UNREADABLE" | CleanupProblem["code"]
  | "OBJECT_URL_INVALID" | "OBJECT_STORE_NO_CREDENTIALS" | "OBJECT_STORE_FAILED"
  | "BACKUP_FAILED" | "BACKUP_DAMAGED" | "RESTORE_REFUSED";
