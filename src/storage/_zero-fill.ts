// Making a WAL segment's space ahead of the records: reserved as zeros by the file system
// (fallocate) where it can, else written as zeros one page per write.
//
// Reserved, the space costs no writes: a 64 MiB segment written as zeros was as many bytes of
// disk writes as the records that later fill it (1.4× the rows written, of a node's 6.3×;
// measured with `bun run bench -- --scale`, it falls to 4.8×). The price is that an append into
// reserved space changes file metadata (ext4 marks the extent written), so each fdatasync
// commits the file system's journal too: measured on ext4 here, 4 MiB segments so that every
// append landed in reserved space, 32 writers: 4-5% fewer writes/s, p99 unchanged.
//
// Written zeros stay the way where fallocate is missing (a file system without it, a libc
// that cannot be loaded), and for zeroing bytes a file already holds (undoing a partial
// append, cutting a torn tail). They go a page per write: the page cache of Linux 6.x file
// systems holds a large write in large folios, and every fdatasync would leave the folio at the
// log's tail clean for the next append to dirty whole again (a few hundred bytes of records
// accounted, and with some file systems written back, as hundreds of kilobytes).

import { dlopen, FFIType } from "bun:ffi";
import * as fs from "node:fs";

export const zeroPageBytes = 4096;
const zeroPage = new Uint8Array(zeroPageBytes);

type Fallocate = (fd: number, offset: number, length: number) => number;
// undefined: not loaded yet; null: not available here.
let fallocateFn: Fallocate | null | undefined;

function loadFallocate(): Fallocate | null {
  if (process.platform !== "linux" || process.env.SVC_WAL_WRITE_ZEROS === "1") return null;
  try {
    const lib = dlopen("libc.so.6", { fallocate: { args: [FFIType.i32, FFIType.i32, FFIType.i64, FFIType.i64], returns: FFIType.i32 } });
    return (fd, offset, length) => lib.symbols.fallocate(fd, 0, offset, length);
  } catch {
    return null;
  }
}

/**
 * Make [fromBytes, toBytes) of `fd`, space past what the file holds, read as zeros: reserved
 * by the file system when it can, else written (see writeZeroPages). A failure to reserve (no
 * space, no support) falls back to writing, which raises a full disk as the errno error
 * (ENOSPC) that callers look for.
 */
export function reserveZeros(fd: number, fromBytes: number, toBytes: number, syncEveryBytes = 0): void {
  if (toBytes <= fromBytes) return;
  if (fallocateFn === undefined) fallocateFn = loadFallocate();
  if (fallocateFn !== null && fallocateFn(fd, fromBytes, toBytes - fromBytes) === 0) return;
  writeZeroPages(fd, fromBytes, toBytes, syncEveryBytes);
}

/**
 * Write zeros over [fromBytes, toBytes) of `fd`, a page (or what is left of one) per call.
 * `syncEveryBytes`: fdatasync after each such stretch, so that tens of megabytes of zeros are
 * not written back at once, queueing the WAL's own syncs behind them (0: never).
 */
export function writeZeroPages(fd: number, fromBytes: number, toBytes: number, syncEveryBytes = 0): void {
  let sinceSync = 0;
  for (let at = fromBytes; at < toBytes; ) {
    // Up to the next page boundary first: every later write then covers exactly one page.
    const length = Math.min(zeroPageBytes - (at % zeroPageBytes), toBytes - at);
    let written = 0;
    while (written < length) written += fs.writeSync(fd, zeroPage, written, length - written, at + written);
    at += length;
    sinceSync += length;
    if (syncEveryBytes > 0 && sinceSync >= syncEveryBytes) {
      fs.fdatasyncSync(fd);
      sinceSync = 0;
    }
  }
}
