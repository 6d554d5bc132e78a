export { Store, type ApplyResult, type StatementResult, type QueryResult, type StoreStats, type StoreMeta } from "./store.ts";
export { encodeCommand, decodeCommand, type Command, type Statement, type SqlValue, type MemberAddress } from "./command.ts";
export { checkWriteStatement, checkReadStatement, abbreviate, type StatementShape } from "./_sql.ts";
export { createSnapshotImage, sealReceivedImage, stageStoreImage, StoreCheckpointer, type CheckpointResult, type SnapshotImage } from "./snapshot-image.ts";
export { formatSqliteTime } from "./determinism.ts";
export type { StoreErrorCode } from "./errors.ts";
export { MemSnapshots, type MemSnapshot } from "./mem-snapshots.ts";
