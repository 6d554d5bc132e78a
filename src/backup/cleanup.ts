// Retention jobs of SPEC §8, run by systemd timers: old snapshots (daily, 7 days) and old
// archived WAL segments (weekly, 30 days). Both only ever remove what the rules name, report
// every path they remove (or would, in a dry run), and go on past a path they cannot remove.

export { parseDuration, formatDuration, type DurationParse } from "./_duration.ts";
export { cleanupSnapshots } from "./_cleanup-snapshots.ts";
export { cleanupWalArchive, WAL_ARCHIVE_SUFFIX } from "./_cleanup-wal-archive.ts";
export type { CleanupOptions, CleanupEntry, CleanupProblem, CleanupReport, SnapshotCleanupReport } from "./types.ts";
