// Retention jobs of SPEC §8, run by systemd timers: old snapshots (daily, 7 days) and old
// archived WAL segments (weekly, 30 days). Both only ever remove what the rules name, report
// every path they remove (or would, in a dry run), and go on past a path they cannot remove.

export { parseDuration, formatDuration, type DurationParse } from "./_duration.ts";
export { cleanupSnapshots } from "./_cleanup-snapshots.ts";
export { cleanupWalArchive, WAL_ARCHIVE_SUFFIX } from "./_cleanup-wal-archive.ts";

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
