// Flushing a large file without stalling the WAL. On a virtual disk an fdatasync waits until
// the host has made durable everything the machine wrote before it, whichever file it came
// from: a snapshot image of a few hundred megabytes flushed in one call held the WAL's
// fdatasync for 30-60 ms (measured here, against under 5 ms without it), and every write
// waiting on that sync with it. Written back a slice at a time with a pause between slices,
// each WAL sync carries at most a slice of someone else's data.
//
// For threads that may block (the snapshot worker): every call here waits on the disk.

import { dlopen, FFIType } from "bun:ffi";
import * as fs from "node:fs";

const sliceBytes = 1024 * 1024;
const pauseMs = 4;

// sync_file_range(2) flags: start writing the range, then wait for it.
const SYNC_FILE_RANGE_WRITE = 2;
const SYNC_FILE_RANGE_WAIT_AFTER = 4;

type SyncFileRange = (fd: number, offset: number, nbytes: number, flags: number) => number;

// undefined: not tried yet; null: not available (not Linux, or no libc to call).
let syncFileRangeFn: SyncFileRange | null | undefined;

function loadSyncFileRange(): SyncFileRange | null {
  if (process.platform !== "linux") return null;
  try {
    const lib = dlopen("libc.so.6", {
      sync_file_range: { args: [FFIType.i32, FFIType.i64, FFIType.i64, FFIType.u32], returns: FFIType.i32 },
    });
    return (fd, offset, nbytes, flags) => lib.symbols.sync_file_range(fd, offset, nbytes, flags);
  } catch {
    return null;
  }
}

/**
 * Make the file at `path` durable (fsync), writing its dirty pages back a slice at a time
 * first. Where sync_file_range cannot be called this is a plain fsync.
 */
export function fsyncGradually(path: string): void {
  if (syncFileRangeFn === undefined) syncFileRangeFn = loadSyncFileRange();
  const fd = fs.openSync(path, "r");
  try {
    const sync = syncFileRangeFn;
    if (sync !== null) {
      const sizeBytes = fs.fstatSync(fd).size;
      for (let offset = 0; offset < sizeBytes; offset += sliceBytes) {
        // A failure here is left to the fsync below, which reports it with its errno.
        if (sync(fd, offset, sliceBytes, SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER) !== 0) break;
        Bun.sleepSync(pauseMs);
      }
    }
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
