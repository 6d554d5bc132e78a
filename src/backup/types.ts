// The shapes the retention jobs take and report. A file of its own, below the jobs and the
// module's surface, so that the jobs (which fill these in) and cleanup.ts (which re-exports
// them) import it and not each other: no cycle, not even a type-only one.

export interface CleanupOptions {
  /** Remove entries whose age is greater than this. */
  readonly olderThanMs: number;
  /** Wall-clock time the ages are measured from (a parameter so that tests need no clock). */
  readonly nowMs: number;
  /** Report what would be removed and remove nothing. */
  readonly dryRun: boolean;
}

export interface CleanupEntry {
  readonly path: string;
  /** Why it was (or, in a dry run, would be) removed, or why it was kept. */
  readonly reason: string;
  /** null when the age could not be read. */
  readonly ageMs: number | null;
  readonly sizeBytes: number;
}

/** Something that makes the job's outcome a failure, though it went on with the rest. */
export interface CleanupProblem {
  readonly code: "REMOVE_FAILED" | "NO_VALID_SNAPSHOT";
  readonly path: string;
  readonly message: string;
}

export interface CleanupReport {
  readonly dir: string;
  readonly dryRun: boolean;
  readonly olderThanMs: number;
  /** Removed entries; in a dry run, the entries that would be removed. */
  readonly removed: CleanupEntry[];
  readonly kept: CleanupEntry[];
  /** Entries the rules do not cover, left alone. */
  readonly ignored: string[];
  readonly problems: CleanupProblem[];
}

export interface SnapshotCleanupReport extends CleanupReport {
  /** Directory name of the newest snapshot that verified; it is never removed. */
  readonly newestValid: string | null;
}
