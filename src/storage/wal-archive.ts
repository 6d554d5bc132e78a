// Archived WAL segments: committed log entries in the WAL's own record format, one file per
// contiguous index range, named `<first_index>-<last_index>-<term>.wal` (16 hex digits each;
// the term is the last entry's). The name is a function of the entries and the bytes are a
// function of the entries, so two leaders that archive the same committed range write the
// same name with the same bytes (Raft's log matching), and a name that exists already is not
// a conflict when its bytes are equal.
//
// readWalRange reads committed entries back out of a node's own WAL directory, which keeps
// every segment until it is archived (see node/wal-archiver.ts).

import * as fs from "node:fs";
import type { Entry } from "../util/log-data.ts";
import { assert } from "../util/assert.ts";
import { decodeRecordAt, recordCrcAt, recordHeaderBytes, recordPayloadBytesMax, encodeRecord } from "./_record.ts";
import { entryHeaderBytes, readU64, writeEntryRecord } from "./_entry-codec.ts";
import { RecordType, parseHeader, scanSegment, segmentHeaderPayload } from "./_segment.ts";
import { listSegments } from "./wal.ts";

const hex16 = (n: number): string => n.toString(16).padStart(16, "0");

export interface ArchivedRange {
  readonly firstIndex: number;
  readonly lastIndex: number;
  /** Term of the last entry. */
  readonly term: number;
}

export function archiveSegmentName(range: ArchivedRange): string {
  return `${hex16(range.firstIndex)}-${hex16(range.lastIndex)}-${hex16(range.term)}.wal`;
}

/** The range an archived segment's name gives; null for any other name (a local WAL segment, a temp file). */
export function parseArchiveSegmentName(name: string): ArchivedRange | null {
  const m = /^([0-9a-f]{16})-([0-9a-f]{16})-([0-9a-f]{16})\.wal$/.exec(name);
  if (m === null) return null;
  const range = { firstIndex: Number.parseInt(m[1] ?? "", 16), lastIndex: Number.parseInt(m[2] ?? "", 16), term: Number.parseInt(m[3] ?? "", 16) };
  if (range.firstIndex < 1 || range.lastIndex < range.firstIndex || range.term < 1) return null;
  return range;
}

/**
 * The bytes of an archived segment: a WAL header naming the cluster whose log it is, then one
 * record per entry, nothing after. Every leader of a cluster writes the same bytes for a range.
 */
export function encodeArchiveSegment(entries: readonly Entry[], clusterId = ""): Uint8Array {
  const first = entries[0];
  assert(first !== undefined, "an archived segment holds at least one entry");
  const header = encodeRecord(RecordType.header, segmentHeaderPayload(0, first.index, clusterId));
  let total = header.length;
  for (const e of entries) total += recordHeaderBytes + entryHeaderBytes + e.data.length;
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  out.set(header, 0);
  let offset = header.length;
  let expected = first.index;
  for (const e of entries) {
    assert(e.index === expected, "archived entries are contiguous");
    expected++;
    offset = writeEntryRecord(out, view, offset, RecordType.entry, e);
  }
  assert(offset === total, "archived segment fills its buffer exactly");
  return out;
}

export type ArchiveScan =
  | { ok: true; entries: Entry[] }
  | { ok: false; offset: number; reason: string };

export type ArchiveCheck =
  /** clusterId: the cluster its header names; null for a segment archived before headers named one. */
  | { ok: true; entryCount: number; clusterId: string | null }
  | {
    ok: false; offset: number; reason: string;
    /**
     * Set by checkArchiveFile: the last entry of the records before the damage, each whole,
     * checked and in order (the name's first index − 1 when none is), and the cluster the
     * header names. A copy cut short still holds those entries intact.
     */
    intact?: { lastIndex: number; clusterId: string | null };
  };

const kindsByCode: Record<number, Entry["kind"] | undefined> = { 1: "normal", 2: "config", 3: "noop" };

/**
 * Check an archived segment against its name without decoding its entries into objects (a
 * segment holds hundreds of thousands): every record whole, a WAL header first, the entries
 * contiguous from the name's first index to its last, the last one of the name's term.
 */
export function checkArchiveSegment(name: string, buf: Uint8Array): ArchiveCheck {
  const range = parseArchiveSegmentName(name);
  if (range === null) return { ok: false, offset: 0, reason: "the name is not <first>-<last>-<term>.wal" };
  const header = decodeRecordAt(buf, 0);
  if (header.kind !== "record") return { ok: false, offset: 0, reason: header.kind === "bad" ? header.reason : "record cut short (an incomplete copy)" };
  if (header.type !== RecordType.header) return { ok: false, offset: 0, reason: "does not start with a WAL header" };
  const clusterId = parseHeader(header.payload)?.clusterId ?? null;
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  let offset = header.end;
  let expected = range.firstIndex;
  let lastTerm = 0;
  while (offset < buf.length) {
    if (buf.length - offset < recordHeaderBytes) return { ok: false, offset, reason: "record cut short (an incomplete copy)" };
    const length = view.getUint32(offset, true);
    const end = offset + recordHeaderBytes + length;
    if (end > buf.length) return { ok: false, offset, reason: "record cut short (an incomplete copy)" };
    // The record's CRC (see _record.ts) over length, type and payload, with no copy.
    if (recordCrcAt(buf, view, offset, end) !== view.getUint32(offset + 4, true)) return { ok: false, offset, reason: "checksum mismatch" };
    const at = offset + recordHeaderBytes;
    if (buf[offset + 8] !== RecordType.entry || length < entryHeaderBytes || kindsByCode[buf[at + 24] ?? 0] === undefined) {
      return { ok: false, offset, reason: "malformed entry record" };
    }
    const index = readU64(view, at + 8);
    if (index !== expected) return { ok: false, offset, reason: `holds entry ${index} where ${expected} was due` };
    lastTerm = readU64(view, at);
    expected++;
    offset = end;
    // Each record leaves two small views behind: collected as it goes, not at the end of a
    // segment of hundreds of thousands.
    if ((expected & 0x7fff) === 0) Bun.gc(false);
  }
  if (expected - 1 !== range.lastIndex) return { ok: false, offset: buf.length, reason: `ends at entry ${expected - 1}, its name says ${range.lastIndex}` };
  if (lastTerm !== range.term) return { ok: false, offset: 0, reason: `its last entry is of term ${lastTerm}, its name says ${range.term}` };
  return { ok: true, entryCount: expected - range.firstIndex, clusterId };
}

/**
 * The entries of a segment checkArchiveSegment accepted, one at a time; each entry's data is
 * a view into `buf` (copy it to keep it past `buf`).
 */
export function* archivedEntries(buf: Uint8Array): Generator<Entry> {
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  let offset = 0;
  let first = true;
  while (offset < buf.length) {
    const length = view.getUint32(offset, true);
    const at = offset + recordHeaderBytes;
    offset = at + length;
    if (first) {
      first = false;
      continue;
    }
    yield {
      term: readU64(view, at),
      index: readU64(view, at + 8),
      timestampMs: readU64(view, at + 16),
      kind: kindsByCode[buf[at + 24] ?? 0] ?? "normal",
      data: buf.subarray(at + entryHeaderBytes, offset),
    };
  }
}

/** Check an archived segment and decode all of it (small segments: tests, the snapshot's own entry). */
export function scanArchiveSegment(name: string, buf: Uint8Array): ArchiveScan {
  const check = checkArchiveSegment(name, buf);
  if (!check.ok) return check;
  return { ok: true, entries: [...archivedEntries(buf)].map((e) => ({ ...e, data: e.data.slice() })) };
}

export type WalRangeRead =
  | { ok: true; entries: Entry[] }
  /** The WAL holds no record of `from` (removed before archiving was enabled, or never written here). */
  | { ok: false; firstHeld: number | null; reason: string };

/**
 * Committed entries `from`…`to` (at most `bytesMax` of entry data, at least one entry) from
 * the WAL segments in `walDir`, in order. Records are taken as the WAL replays them: a later
 * record for an index replaces the earlier one and everything after it. Committed entries are
 * never rewritten, but a segment may hold records of them that never were committed (a
 * follower's, replaced by a new leader's), and the records that replaced them are written
 * where the WAL then was: in a later segment, named after a later index. So the read goes on
 * through segment `rewritesThroughSeq` (the one of the WAL's last rewrite, Wal.finalFrom: none
 * comes after it) before it stops at a segment that completes the range. A torn tail past the
 * range (an append in progress) is no concern: only the bytes before it are needed.
 */
export async function readWalRange(walDir: string, from: number, to: number, bytesMax: number, rewritesThroughSeq: number | null): Promise<WalRangeRead> {
  assert(from >= 1 && to >= from, "a non-empty range is read");
  const segments = listSegments(walDir);
  let start = -1;
  for (let i = 0; i < segments.length; i++) if ((segments[i]?.firstIndex ?? Infinity) <= from) start = i;
  if (start < 0) {
    return { ok: false, firstHeld: segments[0]?.firstIndex ?? null, reason: `the WAL in ${walDir} holds no segment with entry ${from}` };
  }
  const got: Entry[] = [];
  let bytes = 0;
  let last = to;
  for (let i = start; i < segments.length; i++) {
    const segment = segments[i];
    assert(segment !== undefined, "segment index in range");
    const buf = new Uint8Array(await fs.promises.readFile(segment.path));
    const scan = scanSegment(buf);
    for (const e of scan.entries) {
      if (e.index > last) continue;
      const nextIndex = from + got.length;
      if (e.index < from) {
        // A rewrite below the range: whatever was collected came after it and is replaced.
        got.length = 0;
        bytes = 0;
        continue;
      }
      if (e.index > nextIndex) {
        // The log started over after a snapshot here: nothing before it continues into it.
        got.length = 0;
        bytes = 0;
        continue;
      }
      if (e.index < nextIndex) {
        got.length = e.index - from;
        bytes = 0;
        for (const x of got) bytes += x.data.length;
      }
      got.push(e);
      bytes += e.data.length;
      if (bytes >= bytesMax && e.index < last) last = e.index;
    }
    if (got.length === last - from + 1 && segment.seq >= (rewritesThroughSeq ?? 0)) return { ok: true, entries: got };
  }
  if (got.length === last - from + 1) return { ok: true, entries: got };
  return {
    ok: false, firstHeld: segments[0]?.firstIndex ?? null,
    reason: `the WAL in ${walDir} holds entries ${from}…${from + got.length - 1} of ${from}…${last}`,
  };
}

/** How much of an archived segment file is in memory at once (a record larger than this widens it). */
const readWindowBytes = 8 * 1024 * 1024;

type FileRecord =
  | { kind: "record"; buf: Uint8Array; view: DataView; at: number; end: number; fileOffset: number }
  | { kind: "short"; fileOffset: number }
  | { kind: "bad"; fileOffset: number; reason: string };

/**
 * The records of a segment file, read a window at a time: each record's bytes are a view into
 * a window that stays valid after the next is read (a window is never reused). A record is
 * framed but not yet checked.
 */
async function* fileRecords(path: string): AsyncGenerator<FileRecord> {
  const handle = await fs.promises.open(path, "r");
  try {
    let buf = new Uint8Array(0);
    let view = new DataView(buf.buffer);
    let bufFileOffset = 0;
    let pos = 0;
    let filePos = 0;
    let eof = false;
    const fill = async (need: number): Promise<void> => {
      const keep = buf.subarray(pos);
      const size = Math.max(readWindowBytes, need);
      const next = new Uint8Array(size);
      next.set(keep, 0);
      let have = keep.length;
      while (have < size) {
        const { bytesRead } = await handle.read(next, have, size - have, filePos);
        if (bytesRead === 0) {
          eof = true;
          break;
        }
        have += bytesRead;
        filePos += bytesRead;
      }
      bufFileOffset += pos;
      buf = next.subarray(0, have);
      view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
      pos = 0;
    };
    for (;;) {
      if (buf.length - pos < recordHeaderBytes && !eof) await fill(recordHeaderBytes);
      if (buf.length === pos) return;
      if (buf.length - pos < recordHeaderBytes) {
        yield { kind: "short", fileOffset: bufFileOffset + pos };
        return;
      }
      const length = view.getUint32(pos, true);
      if (length > recordPayloadBytesMax) {
        yield { kind: "bad", fileOffset: bufFileOffset + pos, reason: `record length ${length} exceeds the limit` };
        return;
      }
      const end = pos + recordHeaderBytes + length;
      if (end > buf.length) {
        if (!eof) {
          await fill(recordHeaderBytes + length);
          continue;
        }
        yield { kind: "short", fileOffset: bufFileOffset + pos };
        return;
      }
      yield { kind: "record", buf, view, at: pos, end, fileOffset: bufFileOffset + pos };
      pos = end;
    }
  } finally {
    await handle.close();
  }
}

/**
 * checkArchiveSegment for a file, read a window at a time: memory stays at a window
 * whatever the segment's size.
 */
export async function checkArchiveFile(name: string, path: string): Promise<ArchiveCheck> {
  const range = parseArchiveSegmentName(name);
  if (range === null) return { ok: false, offset: 0, reason: "the name is not <first>-<last>-<term>.wal" };
  let expected = range.firstIndex;
  let lastTerm = 0;
  let sawHeader = false;
  let clusterId: string | null = null;
  let count = 0;
  const damaged = (offset: number, reason: string): ArchiveCheck => ({ ok: false, offset, reason, intact: { lastIndex: expected - 1, clusterId } });
  for await (const r of fileRecords(path)) {
    if (r.kind === "short") return damaged(r.fileOffset, "record cut short (an incomplete copy)");
    if (r.kind === "bad") return damaged(r.fileOffset, r.reason);
    const { buf, view, at, end } = r;
    if (recordCrcAt(buf, view, at, end) !== view.getUint32(at + 4, true)) return damaged(r.fileOffset, "checksum mismatch");
    if (!sawHeader) {
      if (buf[at + 8] !== RecordType.header) return damaged(0, "does not start with a WAL header");
      clusterId = parseHeader(buf.subarray(at + recordHeaderBytes, end))?.clusterId ?? null;
      sawHeader = true;
      continue;
    }
    const p = at + recordHeaderBytes;
    if (buf[at + 8] !== RecordType.entry || end - p < entryHeaderBytes || kindsByCode[buf[p + 24] ?? 0] === undefined) {
      return damaged(r.fileOffset, "malformed entry record");
    }
    const index = readU64(view, p + 8);
    if (index !== expected) return damaged(r.fileOffset, `holds entry ${index} where ${expected} was due`);
    lastTerm = readU64(view, p);
    expected++;
    if ((++count & 0x7fff) === 0) Bun.gc(false);
  }
  if (!sawHeader) return { ok: false, offset: 0, reason: "empty file" };
  if (expected - 1 !== range.lastIndex) return damaged(0, `ends at entry ${expected - 1}, its name says ${range.lastIndex}`);
  // Whole records that do not end as the name says: nothing in it is vouched for.
  if (lastTerm !== range.term) return { ok: false, offset: 0, reason: `its last entry is of term ${lastTerm}, its name says ${range.term}` };
  return { ok: true, entryCount: expected - range.firstIndex, clusterId };
}

/** The entries of a file checkArchiveFile accepted, a window at a time; data are views (copy to keep). */
export async function* archiveFileEntries(path: string): AsyncGenerator<Entry> {
  let first = true;
  for await (const r of fileRecords(path)) {
    if (r.kind !== "record") return;
    if (first) {
      first = false;
      continue;
    }
    const p = r.at + recordHeaderBytes;
    yield {
      term: readU64(r.view, p),
      index: readU64(r.view, p + 8),
      timestampMs: readU64(r.view, p + 16),
      kind: kindsByCode[r.buf[p + 24] ?? 0] ?? "normal",
      data: r.buf.subarray(p + entryHeaderBytes, r.end),
    };
  }
}
