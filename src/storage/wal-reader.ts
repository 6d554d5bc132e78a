// Reading committed entries back out of the live WAL, for a leader that sends a member entries
// it no longer holds in memory. A WalReader is a cursor: it keeps the position after the last
// entry it returned (segment and byte offset), so a read that continues where the last one
// stopped reads only the records it returns. Reads are asynchronous and a window at a time,
// so the thread that asks decodes at most a window's worth of records per turn.
//
// Only the stretch of the WAL that no later record rewrites is read (Wal.finalFrom): an older
// record of an index may have been superseded by a rewrite of the suffix (a follower's
// conflicting entries replaced by a new leader's). An index before that stretch is "not held";
// after a restart, that stretch is first learned for the segments start-up skipped.

import * as fs from "node:fs";
import type { Entry } from "../util/log-data.ts";
import { decodeRecordAt, recordHeaderBytes } from "./_record.ts";
import { decodeEntry } from "./_entry-codec.ts";
import { RecordType } from "./_segment.ts";
import type { SegmentInfo, Wal } from "./wal.ts";

/** Bytes read from a segment file per read (a larger record widens one read to fit it). */
export const walReadWindowBytes = 256 * 1024;

interface Position {
  readonly seq: number;
  /** Byte offset of the next record; 0: the segment's first record after its header. */
  readonly offset: number;
}

export interface WalReadStats {
  /** Bytes read from segment files, skipped records included. */
  bytesRead: number;
  /** Reads that had to find their first index by scanning from a segment's start or finalFrom. */
  seeks: number;
}

export class WalReader {
  /** After the last entry returned: where the next one is, and that entry itself. */
  private at: Position | null = null;
  private last: Entry | null = null;
  readonly stats: WalReadStats = { bytesRead: 0, seeks: 0 };

  constructor(private readonly wal: Wal, private readonly windowBytes = walReadWindowBytes) {}

  /**
   * Entries from..through, in order, stopping once the entries after the first reach bytesMax
   * of data (the first is an append's prevIndex: at least two when through > from); null
   * when the WAL no longer holds `from` as a final record (removed, or before a rewrite).
   * Only entries the log can no longer rewrite (committed ones) may be asked for.
   */
  async read(from: number, through: number, bytesMax: number): Promise<Entry[] | null> {
    if (from < 1 || through < from || through > this.wal.lastIndex) return null;
    const out: Entry[] = [];
    let start: Position | null;
    if (this.last !== null && this.at !== null && from === this.last.index && this.holds(this.at.seq)) {
      out.push(this.last); // asked again for the one before the next: the append's prevIndex
      start = this.at;
    } else if (this.last !== null && this.at !== null && from === this.last.index + 1 && this.holds(this.at.seq)) {
      start = this.at;
    } else {
      start = this.seekStart(from);
      if (start === null) {
        // Before the stretch open read: the segments it skipped may hold it (learned once).
        await this.wal.learnSkippedFinalFrom();
        start = this.seekStart(from);
      }
      if (start === null) return null;
      this.stats.seeks++;
    }
    this.at = null;
    this.last = null;
    let bytes = 0;
    const wanted = (): number => from + out.length;
    let pos: Position = start;
    for (;;) {
      const segment = this.segment(pos.seq);
      if (segment === null) return null; // removed while reading
      const got = await this.readSegment(segment, pos.offset, (e, endOffset) => {
        if (e.index < wanted()) return "skip";
        if (e.index !== wanted()) return "broken";
        out.push(e);
        if (out.length > 1) bytes += e.data.length;
        pos = { seq: segment.seq, offset: endOffset };
        return e.index >= through || (out.length > 1 && bytes >= bytesMax) ? "stop" : "more";
      });
      if (got === "broken" || got === "gone") return null;
      if (got === "stop") break;
      // The segment's records ended: continue in the next one.
      const next = this.nextSegment(segment.seq);
      if (next === null) {
        if (out.length === 0 || out.at(-1)!.index < Math.min(through, this.wal.lastIndex)) return null;
        break;
      }
      pos = { seq: next.seq, offset: 0 };
    }
    const lastEntry = out.at(-1);
    if (lastEntry === undefined || out[0]!.index !== from) return null;
    this.at = pos;
    this.last = lastEntry;
    return out;
  }

  /**
   * Where to start looking for `from`: the last start point at or before it within the final
   * stretch, or the WAL's mark nearest before `from` when that lies between the two (records
   * run on in index order there, so `from` is at or after it).
   */
  private seekStart(from: number): Position | null {
    const final = this.wal.finalFrom();
    if (final === null || from < final.index) return null;
    let start: Position | null = null;
    for (const s of this.wal.segments()) {
      if (s.seq < final.seq) continue;
      const firstIndex = s.seq === final.seq ? final.index : s.firstIndex;
      if (firstIndex > from) break;
      start = { seq: s.seq, offset: s.seq === final.seq ? final.offset : 0 };
    }
    const mark = this.wal.markAtOrBefore(from);
    if (start !== null && mark !== null && mark.seq === start.seq && mark.offset >= start.offset && mark.offset > 0) {
      return { seq: mark.seq, offset: mark.offset };
    }
    return start;
  }

  private holds(seq: number): boolean {
    const final = this.wal.finalFrom();
    return final !== null && seq >= final.seq && this.segment(seq) !== null;
  }

  private segment(seq: number): SegmentInfo | null {
    return this.wal.segments().find((s) => s.seq === seq) ?? null;
  }

  private nextSegment(seq: number): SegmentInfo | null {
    return this.wal.segments().find((s) => s.seq > seq) ?? null;
  }

  /**
   * The entry records of a segment from `offset`, a window at a time, each handed to `take`
   * with the offset after it, until take says stop or broken, or the records end ("end").
   * "gone": the file went away (removed behind an image) or a record is damaged.
   */
  private async readSegment(
    segment: SegmentInfo,
    offset: number,
    take: (e: Entry, endOffset: number) => "skip" | "more" | "stop" | "broken",
  ): Promise<"stop" | "broken" | "end" | "gone"> {
    let handle: fs.promises.FileHandle;
    try {
      handle = await fs.promises.open(segment.path, "r");
    } catch {
      return "gone";
    }
    try {
      let at = offset;
      let skipHeader = offset === 0;
      for (;;) {
        let window = await this.readAt(handle, at, this.windowBytes);
        if (window.length < recordHeaderBytes) return "end";
        let pos = 0;
        const view = new DataView(window.buffer, window.byteOffset, window.byteLength);
        while (pos + recordHeaderBytes <= window.length) {
          if (isZeroHeader(window, pos)) return "end"; // the preallocated zeros after the last record
          const decoded = decodeRecordAt(window, pos, view);
          if (decoded.kind === "short") {
            const length = new DataView(window.buffer, window.byteOffset + pos, 4).getUint32(0, true);
            if (pos > 0) break; // read on from this record
            // A record larger than the window: read it whole.
            window = await this.readAt(handle, at, recordHeaderBytes + length);
            if (window.length < recordHeaderBytes + length) return "end";
            continue;
          }
          if (decoded.kind === "bad") return "gone";
          if (skipHeader) {
            if (decoded.type !== RecordType.header) return "gone";
            skipHeader = false;
          } else {
            if (decoded.type !== RecordType.entry) return "gone";
            // Views of the window, not copies: entries read back are encoded into appends and dropped.
            const entry = decodeEntry(decoded.payload, false, view);
            if (entry === null) return "gone";
            const verdict = take(entry, at + decoded.end);
            if (verdict === "stop" || verdict === "broken") return verdict;
          }
          pos = decoded.end;
        }
        if (pos === 0) return "end";
        at += pos;
      }
    } catch {
      return "gone";
    } finally {
      await handle.close().catch(() => undefined);
    }
  }

  private async readAt(handle: fs.promises.FileHandle, at: number, length: number): Promise<Uint8Array> {
    // Not zeroed first (the read fills what is used), and a plain Uint8Array over its own
    // memory: entries decoded from the window are views of it.
    const unfilled = Buffer.allocUnsafeSlow(length);
    const buf = new Uint8Array(unfilled.buffer, unfilled.byteOffset, length);
    let have = 0;
    while (have < length) {
      const { bytesRead } = await handle.read(buf, have, length - have, at + have);
      if (bytesRead === 0) break;
      have += bytesRead;
    }
    this.stats.bytesRead += have;
    return buf.subarray(0, have);
  }
}

function isZeroHeader(buf: Uint8Array, offset: number): boolean {
  for (let i = offset; i < offset + recordHeaderBytes; i++) if (buf[i] !== 0) return false;
  return true;
}
