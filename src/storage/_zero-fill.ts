// Filling a WAL segment with zeros, one page per write.
//
// The page cache of Linux 6.x file systems (ext4, xfs) holds a large write in large folios:
// written in 1 MiB calls, a segment's zeros sit in folios of hundreds of kilobytes. Every
// fdatasync leaves the folio at the log's tail clean, and the next append dirties it again; the
// kernel accounts (and with some file systems writes back) the whole folio for a few hundred
// bytes of records. Zeros written a page at a time stay in single-page folios, so an append
// dirties only the pages it touches: measured with `bun run bench -- --scale`, a node's
// write_bytes fell from about 85 to about 8 times the data written.

import * as fs from "node:fs";

export const zeroPageBytes = 4096;
const zeroPage = new Uint8Array(zeroPageBytes);

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
