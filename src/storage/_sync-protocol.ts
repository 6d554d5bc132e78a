// What the WAL's sync thread (sync-worker.ts) and its caller (syncer.ts) share. Kept apart
// from the worker's module: importing that one would run its message handler here too.

/** Slots of the shared Int32Array. */
export const SyncSlot = {
  /** Sequence number of the latest request (never 0, the thread's initial "seen"); the writer stores it last. */
  request: 0,
  /** The descriptor to flush for that request. */
  fd: 1,
  /** 1 once the writer has closed: the thread returns at its next wake-up. */
  stop: 2,
} as const;
export const syncSlotCount = 3;

export interface SyncReply {
  seq: number;
  /** null when the data is on disk. */
  error: { message: string; code: string | null } | null;
}
