// What the WAL's sync thread (sync-worker.ts) and its caller (syncer.ts) share. Kept apart
// from the worker's module: importing that one would run its message handler here too.

/** Slots of the shared Int32Array. */
export const SyncSlot = {
  /** Sequence number of the latest request; the writer stores it last. -1 tells the thread to stop. */
  request: 0,
  /** The descriptor to flush for that request. */
  fd: 1,
} as const;
export const syncSlotCount = 2;
export const syncStop = -1;

export interface SyncReply {
  seq: number;
  /** null when the data is on disk. */
  error: { message: string; code: string | null } | null;
}
