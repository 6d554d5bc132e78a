// The process's contact with the machine, below storage, store and node: the small
// interfaces the node depends on (clock, log store, state machine and snapshots, peer
// network), each with a production implementation and an in-memory twin the simulator runs
// the real node on; durable file primitives (real fsyncs; Bun.write never syncs), file hashing
// off the main thread, gradual write-back of large files, and sd_notify for systemd.

export { systemClock, type Clock, type Timer } from "./clock.ts";
export { ManualClock } from "./manual-clock.ts";
export type { CheckpointRecord, HardStateRecord, LogRecord, LogStore, LogStoreStats, RemovedRecord } from "./log-store.ts";
export { MemLogStore, type MemLogImage } from "./mem-log-store.ts";
export type { InstallMethod, SnapshotRecord, SnapshotStore, StateMachine } from "./state-machine.ts";
export type { PeerNetwork, PeerLinkStatus } from "./peer-network.ts";
export { writeFileAtomic, fsyncDir, fsyncPath, fsyncPathAsync, ensureDir, writeFully } from "./durable-file.ts";
export { DiskFullError, freeBytes, isDiskFullError } from "./disk-space.ts";
export { sha256File, sha256FileSync } from "./file-hash.ts";
export { fsyncGradually } from "./writeback.ts";
export { sdNotify } from "./sdnotify.ts";
