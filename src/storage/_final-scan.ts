// Finding where the WAL's final stretch begins within segments that start-up skipped (see
// Wal.learnSkippedFinalFrom): their records are read in order, a window per read, off the
// caller's turn; only each record's frame, checksum and index are looked at. A record whose
// index does not follow the one before it (a rewrite of a suffix, a start over) begins a new
// stretch, exactly as Wal.open decides for the segments it reads.

import * as fs from "node:fs";
import { decodeRecordAt, recordHeaderBytes } from "./_record.ts";
import { readU64 } from "./_entry-codec.ts";
import { RecordType } from "./_segment.ts";
import type { SegmentInfo, WalFinalFrom } from "./_wal-types.ts";

/** Bytes read from a segment file per read: one turn checks at most this much. */
export const finalScanWindowBytes = 256 * 1024;

/**
 * Where the last stretch of contiguous records in `segments` (in order) begins, provided the
 * records open read next, from `nextIndex` on, continue it; null when they do not (the
 * stretch begins where open began reading), when the segments hold no entry, or when a record
 * is damaged.
 */
export async function findFinalFrom(segments: readonly SegmentInfo[], nextIndex: number, windowBytes = finalScanWindowBytes): Promise<WalFinalFrom | null> {
  let found: WalFinalFrom | null = null;
  let prevIndex = -1;
  for (const segment of segments) {
    let entriesCount = 0;
    const ok = await eachEntryIndex(segment.path, windowBytes, (index, offset) => {
      entriesCount++;
      if (index !== prevIndex + 1) found = { seq: segment.seq, offset, index };
      prevIndex = index;
    });
    if (ok === "damaged") return null;
    if (ok === "gone") {
      // Removed behind an image while this read: the records after it are final up to the
      // next break, as if it had never been there.
      found = null;
      prevIndex = -1;
      continue;
    }
    if (entriesCount === 0 && segment.firstIndex !== prevIndex + 1) {
      // A segment that starts the log over (resetTo) and holds nothing.
      found = { seq: segment.seq, offset: 0, index: segment.firstIndex };
      prevIndex = segment.firstIndex - 1;
    }
  }
  return nextIndex === prevIndex + 1 ? found : null;
}

type ScanResult = "ok" | "gone" | "damaged";

/** Each entry record's index and offset, in order. */
async function eachEntryIndex(path: string, windowBytes: number, take: (index: number, offset: number) => void): Promise<ScanResult> {
  let handle: fs.promises.FileHandle;
  try {
    handle = await fs.promises.open(path, "r");
  } catch {
    return "gone";
  }
  try {
    let at = 0;
    let sawHeader = false;
    for (;;) {
      let window = await readAt(handle, at, windowBytes);
      let pos = 0;
      const view = new DataView(window.buffer, window.byteOffset, window.byteLength);
      while (pos + recordHeaderBytes <= window.length) {
        if (isZeroHeader(window, pos)) return "ok"; // the preallocated zeros after the last record
        const decoded = decodeRecordAt(window, pos, view);
        if (decoded.kind === "short") {
          if (pos > 0) break; // read on from this record
          const length = new DataView(window.buffer, window.byteOffset, 4).getUint32(0, true);
          // A record larger than the window: read it whole.
          window = await readAt(handle, at, recordHeaderBytes + length);
          if (window.length < recordHeaderBytes + length) return "ok"; // a torn tail: the records end
          continue;
        }
        if (decoded.kind === "bad") return "damaged";
        if (!sawHeader) {
          if (decoded.type !== RecordType.header) return "damaged";
          sawHeader = true;
        } else {
          if (decoded.type !== RecordType.entry || decoded.payload.length < 16) return "damaged";
          take(readU64(view, decoded.payload.byteOffset - window.byteOffset + 8), at + pos);
        }
        pos = decoded.end;
      }
      if (pos === 0) return "ok";
      at += pos;
    }
  } catch {
    return "damaged";
  } finally {
    await handle.close().catch(() => undefined);
  }
}

async function readAt(handle: fs.promises.FileHandle, at: number, length: number): Promise<Uint8Array> {
  const buf = new Uint8Array(length);
  let have = 0;
  while (have < length) {
    const { bytesRead } = await handle.read(buf, have, length - have, at + have);
    if (bytesRead === 0) break;
    have += bytesRead;
  }
  return buf.subarray(0, have);
}

function isZeroHeader(buf: Uint8Array, offset: number): boolean {
  for (let i = offset; i < offset + recordHeaderBytes; i++) if (buf[i] !== 0) return false;
  return true;
}
