// Backups and their retention: archives, WAL archiving, point-in-time replay and the cleanup
// jobs. The module's public surface; files starting with `_` are private to it.

export * from "./cleanup.ts";
export type { BackupErrorCode } from "./errors.ts";
export { ObjectStore, isObjectUrl, objectUrl, parseObjectUrl, type ObjectInfo, type ObjectLocation } from "./s3.ts";
export { fullBackupName, verifyArchive, extractArchive, type ArchiveCheck } from "./backup-archive.ts";
export { openDestination, applyRetention, newestFullBackup, type Destination } from "./backup-destination.ts";
export { FullBackup, copyOffsite, notCounted, type BackupNodeApi, type FullBackupOptions, type FullBackupResult, type TotalEntries } from "./backup-full.ts";
export { snapshotBackup, type SnapshotBackupResult } from "./backup-snapshot.ts";
export { openArchiveSource, listArchive, readArchived, type ArchiveSource, type ArchivedSegment } from "./archive-source.ts";
export { putArchivedSegment, type PutOutcome } from "./archive-put.ts";
export { parseReplayTarget, replayWalArchive, type ReplayProgress, type ReplayTarget, type WalReplayReport } from "./wal-replay.ts";
export { cleanupWalArchiveObjects } from "./s3-cleanup.ts";
