// The backup module's error codes: a directory a job cannot read (the job stops), and
// problems a job reports while going on with the rest (CleanupProblem).

import type { CleanupProblem } from "./types.ts";

export type BackupErrorCode = "CLEANUP_DIR_MISSING" | "CLEANUP_DIR_UNREADABLE" | CleanupProblem["code"];
