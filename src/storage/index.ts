export { Wal, listSegments, segmentName, parseSegmentName, type SegmentInfo, type WalOpenResult, type WalFinalFrom } from "./wal.ts";
export { WalReader, walReadWindowBytes, type WalReadStats } from "./wal-reader.ts";
export { readSegment, scanSegment, segmentNameMismatch, type SegmentScan } from "./_segment.ts";
export { readHardState, writeHardState, rebuildHardState, initialHardState, type StoredHardState } from "./hardstate.ts";
export {
  SnapshotStore, verifySnapshot, readSnapshotMeta, snapshotDirName, parseSnapshotDirName,
  snapshotStateFile, snapshotMetaFile, snapshotMetaProblem, snapshotFormatVersion, snapshotHeld,
  type SnapshotEntry, type SnapshotFileMeta,
} from "./snapshots.ts";
export { lockDataDir, lockDataDirIfPresent, type DataDirLock } from "./lock.ts";
export { giveToDataDirOwner } from "./owner.ts";
export { writeFileAtomic, fsyncDir, fsyncPath, fsyncPathAsync, ensureDir } from "../io/durable-file.ts";
export { dataPaths, type DataPaths } from "./paths.ts";
export { linkDataDirAliases, type DataDirAliasOutcome } from "./aliases.ts";
export {
  repairWal, readEntriesLost, clearEntriesLost, highestLostIndex, formatRanges,
  type RepairReport, type EntriesLostRecord, type IndexRange,
} from "./repair.ts";
export { manageBallast, ballastBytes, type BallastOutcome } from "./ballast.ts";
export type { StorageErrorCode } from "./errors.ts";
export { FileLogStore, markLostLog, hasLostLog, readCheckpoint, writeCheckpoint, inspectCheckpoint, checkpointPath, type CheckpointRead } from "./file-log-store.ts";
export {
  archiveSegmentName, parseArchiveSegmentName, encodeArchiveSegment, scanArchiveSegment, checkArchiveSegment, archivedEntries, checkArchiveFile, archiveFileEntries, readWalRange,
  type ArchivedRange, type ArchiveScan, type ArchiveCheck, type WalRangeRead,
} from "./wal-archive.ts";
export { processAlive, removeAtomicWriteLeftovers, removeFilesOfDeadProcesses, removeReplayLeftovers } from "./replay-leftovers.ts";
export { ensureMemberMark, readMemberMark } from "./member-mark.ts";
export { writeRemovedMark, inspectRemovedMark, removedMarkPath, removedMarkFile, type RemovedMark, type RemovedMarkRead } from "./removed-mark.ts";
