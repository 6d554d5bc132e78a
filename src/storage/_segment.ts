// Reading one WAL segment file: a header record, then entry records. Reading stops at
// the first damaged record and reports whether any valid record follows it: damage
// followed by nothing valid is a torn tail (a crash mid-write), damage with valid
// records after it is corruption.

import * as fs from "node:fs";
import { dataEndOfFile } from "../io/file-extents.ts";
import type { Entry } from "../util/log-data.ts";
import { decodeRecordAt, recordHeaderBytes } from "./_record.ts";
import { decodeEntry } from "./_entry-codec.ts";

export const RecordType = {
  entry: 1,
  header: 0x10,
} as const;

export const walFormatVersion = 1;

export interface SegmentDamage {
  offset: number;
  reason: string;
  /** A well-formed record starts somewhere after the damage. */
  validRecordAfter: boolean;
  /** Index of the last good entry before the damage, 0 when none. */
  afterIndex: number;
}

export interface SegmentScan {
  entries: Entry[];
  /** Byte offset of each entry's record in the segment, parallel to entries. */
  offsets: number[];
  damage: SegmentDamage | null;
  /** Where the records end: the damage, or the zero-filled preallocated space, or the file's end. */
  dataEndBytes: number;
  sizeBytes: number;
  /** What the segment's header record says it is; null when it has none that reads. */
  header?: SegmentHeader | null;
}

/** A segment's header record: the WAL format, and the sequence number and first index its file name carries. */
export interface SegmentHeader {
  format: number;
  seq?: number;
  firstIndex?: number;
  /** The cluster whose log it holds: written in archived segments (none in older ones, nor in a node's own). */
  clusterId?: string;
}

export function segmentHeaderPayload(seq: number, firstIndex: number, clusterId = ""): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(clusterId === "" ? { format: walFormatVersion, seq, firstIndex } : { format: walFormatVersion, seq, firstIndex, clusterId }));
}

/**
 * Read and scan one segment file. Only the bytes before its zero-filled tail are read into
 * memory: the tail (most of a segment a restart finds new) is checked to be zeros a chunk at a
 * time through one small buffer. (Reading a whole 64 MiB segment into fresh memory cost a
 * restarted node 40–120 ms of page faults before its first entry, however few records it held.)
 * A segment with damage in it is read whole, and judged as before.
 * Entries at or below `viewsThrough` (default: none) keep their data as views into the bytes
 * read rather than copies: a caller that drops them (WAL open, for what the store already
 * holds) pays for no copy; one that keeps them keeps the bytes read with them.
 */
export function readSegment(path: string, options: { viewsThrough?: number } = {}): SegmentScan {
  const fd = fs.openSync(path, "r");
  let prefix: Uint8Array;
  let sizeBytes: number;
  try {
    sizeBytes = fs.fstatSync(fd).size;
    prefix = readPrefix(fd, nonZeroEndOfFile(fd, sizeBytes));
  } finally {
    fs.closeSync(fd);
  }
  const scan = scanSegment(prefix, options.viewsThrough ?? 0);
  // Damage is judged on the whole file: a record whose own last bytes are zeros ends past the
  // prefix, so the prefix reads it as cut short, or, after damage, misses it as a valid record
  // that follows (corruption taken for a torn tail). A damaged segment (a torn tail after a
  // crash included) is therefore scanned again whole, as every segment was before.
  if (scan.damage !== null && prefix.length < sizeBytes) return scanSegment(readWholeFile(path), options.viewsThrough ?? 0);
  return { ...scan, sizeBytes };
}

/** Chunks a segment's zero-filled tail is compared in, through one buffer. */
const tailChunkBytes = 1024 * 1024;
let tailChunk: Buffer | null = null;

/**
 * One past the file's last non-zero byte (0 when it holds only zeros), read from the end
 * backwards, from where the file system says its data ends (a segment's space reserved ahead
 * of its records is not read at all: see dataEndOfFile).
 */
export function nonZeroEndOfFile(fd: number, sizeBytes: number): number {
  tailChunk ??= Buffer.alloc(tailChunkBytes);
  const chunk = tailChunk;
  let end = dataEndOfFile(fd, sizeBytes);
  while (end > 0) {
    const from = Math.max(0, end - tailChunkBytes);
    const length = end - from;
    let got = 0;
    while (got < length) {
      const n = fs.readSync(fd, chunk, got, length - got, from + got);
      if (n === 0) throw new Error(`the file ended at ${from + got} bytes while its size said ${sizeBytes}`);
      got += n;
    }
    const within = nonZeroEndBytes(chunk.subarray(0, length));
    if (within > 0) return from + within;
    end = from;
  }
  return 0;
}

/** The first `bytes` of the file, in memory of its own (entries sliced from it do not share a larger buffer). */
function readPrefix(fd: number, bytes: number): Uint8Array {
  const out = new Uint8Array(bytes);
  let got = 0;
  while (got < bytes) {
    const n = fs.readSync(fd, out, got, bytes - got, got);
    if (n === 0) throw new Error(`the file ended at ${got} bytes, before its last non-zero byte at ${bytes}`);
    got += n;
  }
  return out;
}

/**
 * A file's bytes as a plain Uint8Array over the buffer read, not a copy of it (a segment is
 * tens of megabytes), and not a Buffer: its slice() would share the segment's memory with
 * every entry sliced from it.
 */
export function readWholeFile(path: string): Uint8Array {
  const read = fs.readFileSync(path);
  return new Uint8Array(read.buffer, read.byteOffset, read.byteLength);
}

/**
 * Scan a segment's bytes (all of them, or all before a zero-filled tail). Entries at or below
 * `viewsThrough` keep their data as views into `buf` (see readSegment); the rest are copies.
 */
export function scanSegment(buf: Uint8Array, viewsThrough = 0): SegmentScan {
  const entries: Entry[] = [];
  const offsets: number[] = [];
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  let offset = 0;
  let sawHeader = false;
  let header: SegmentHeader | null = null;
  const damageAt = (at: number, reason: string): SegmentScan => ({
    entries,
    offsets,
    dataEndBytes: at,
    sizeBytes: buf.length,
    damage: { offset: at, reason, validRecordAfter: validRecordAfter(buf, at), afterIndex: entries.at(-1)?.index ?? 0 },
    header,
  });
  while (offset < buf.length) {
    if (isZeroHeader(buf, offset)) {
      // Segments are preallocated with zeros: an all-zero header is where the records end,
      // provided nothing but zeros follows.
      if (!sawHeader) return damageAt(offset, "segment has no WAL header (its creation was cut short)");
      if (isZeroFrom(buf, offset)) return { entries, offsets, damage: null, dataEndBytes: offset, sizeBytes: buf.length, header };
      return damageAt(offset, "a zeroed record header with data after it");
    }
    const decoded = decodeRecordAt(buf, offset, view);
    if (decoded.kind === "short") return damageAt(offset, "record cut short (incomplete write)");
    if (decoded.kind === "bad") return damageAt(offset, decoded.reason);
    if (!sawHeader) {
      if (decoded.type !== RecordType.header) return damageAt(offset, "segment does not start with a WAL header");
      const read = parseHeader(decoded.payload);
      if (read === null) return damageAt(offset, "unreadable WAL segment header");
      if (read.format !== walFormatVersion) {
        return damageAt(offset, `WAL format ${read.format} is not supported by this version (expects ${walFormatVersion})`);
      }
      header = read;
      sawHeader = true;
    } else if (decoded.type === RecordType.entry) {
      let entry = decodeEntry(decoded.payload, false, view);
      if (entry === null) return damageAt(offset, "malformed entry record");
      if (entry.index > viewsThrough) entry = decodeEntry(decoded.payload, true, view)!;
      entries.push(entry);
      offsets.push(offset);
    } else {
      return damageAt(offset, `unknown record type ${decoded.type}`);
    }
    offset = decoded.end;
  }
  if (!sawHeader) return damageAt(0, "segment has no WAL header (its creation was cut short)");
  return { entries, offsets, damage: null, dataEndBytes: buf.length, sizeBytes: buf.length, header };
}

function isZeroHeader(buf: Uint8Array, offset: number): boolean {
  if (offset + recordHeaderBytes > buf.length) return isZeroFrom(buf, offset);
  for (let i = offset; i < offset + recordHeaderBytes; i++) if (buf[i] !== 0) return false;
  return true;
}

function isZeroFrom(buf: Uint8Array, offset: number): boolean {
  return nonZeroEndBytes(buf) <= offset;
}

/** Compared against a segment's tail a chunk at a time (memcmp). */
const zeroChunk = Buffer.alloc(64 * 1024);

/** The length of `buf` without its trailing zeros: one past the last non-zero byte, 0 when all are zero. */
export function nonZeroEndBytes(buf: Uint8Array): number {
  // The preallocated tail is megabytes of zeros: whole chunks are compared natively, which
  // reading it word by word in JavaScript took a fifth of a restarted follower's CPU.
  let end = buf.length;
  while (end >= zeroChunk.length && Buffer.from(buf.buffer, buf.byteOffset + end - zeroChunk.length, zeroChunk.length).equals(zeroChunk)) {
    end -= zeroChunk.length;
  }
  while (end > 0) {
    if (buf[end - 1] !== 0) return end;
    end--;
  }
  return 0;
}

export function parseHeader(payload: Uint8Array): SegmentHeader | null {
  try {
    const v: unknown = JSON.parse(new TextDecoder().decode(payload));
    if (typeof v === "object" && v !== null && typeof (v as { format?: unknown }).format === "number") {
      const { format, seq, firstIndex, clusterId } = v as { format: number; seq?: unknown; firstIndex?: unknown; clusterId?: unknown };
      return {
        format,
        ...(typeof seq === "number" ? { seq } : {}),
        ...(typeof firstIndex === "number" ? { firstIndex } : {}),
        ...(typeof clusterId === "string" && clusterId !== "" ? { clusterId } : {}),
      };
    }
  } catch {
    // fall through: unreadable
  }
  return null;
}

/**
 * Whether a valid entry record starts anywhere after `from`. Only the damaged case pays
 * for this scan; candidates are filtered by type byte and bounded length before the CRC.
 */
export function validRecordAfter(buf: Uint8Array, from: number): boolean {
  return nextValidRecord(buf, from + 1) !== null;
}

/** Offset of the next valid entry record at or after `from`, or null. */
function nextValidRecord(buf: Uint8Array, from: number): number | null {
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  for (let at = from; at + recordHeaderBytes <= buf.length; at++) {
    if (buf[at + 8] !== RecordType.entry) continue;
    const length = view.getUint32(at, true);
    if (at + recordHeaderBytes + length > buf.length) continue;
    const decoded = decodeRecordAt(buf, at);
    if (decoded.kind === "record" && decodeEntry(decoded.payload) !== null) return at;
  }
  return null;
}

/** A damaged stretch of a segment: where it starts, why, and where the next valid record resumes. */
export interface DamagedSpan {
  offset: number;
  reason: string;
  /** Index of the last good entry before it, 0 when none. */
  afterIndex: number;
  /** Offset of the next valid entry record, null when none follows. */
  resumeOffset: number | null;
}

/**
 * Read every valid record of a segment, stepping over damage instead of stopping at it (for
 * wal-repair, which keeps every intact entry). Damage followed by nothing valid ends the scan.
 */
export function scanSegmentSkippingDamage(buf: Uint8Array): { entries: Entry[]; offsets: number[]; damages: DamagedSpan[] } {
  const entries: Entry[] = [];
  const offsets: number[] = [];
  const damages: DamagedSpan[] = [];
  let offset = 0;
  let sawHeader = false;
  while (offset < buf.length) {
    let reason: string | null = null;
    let end = offset;
    if (isZeroHeader(buf, offset)) {
      if (sawHeader && isZeroFrom(buf, offset)) break;
      reason = sawHeader ? "a zeroed record header with data after it" : "segment has no WAL header";
    } else {
      const decoded = decodeRecordAt(buf, offset);
      if (decoded.kind === "short") reason = "record cut short (incomplete write)";
      else if (decoded.kind === "bad") reason = decoded.reason;
      else if (!sawHeader) {
        const header = decoded.type === RecordType.header ? parseHeader(decoded.payload) : null;
        if (header === null) reason = "segment does not start with a readable WAL header";
        else if (header.format !== walFormatVersion) reason = `WAL format ${header.format} is not supported by this version`;
        sawHeader = true;
        end = decoded.end;
      } else if (decoded.type === RecordType.entry) {
        const entry = decodeEntry(decoded.payload);
        if (entry === null) reason = "malformed entry record";
        else {
          entries.push(entry);
          offsets.push(offset);
        }
        end = decoded.end;
      } else {
        reason = `unknown record type ${decoded.type}`;
      }
    }
    if (reason === null) {
      offset = end;
      continue;
    }
    const resumeOffset = nextValidRecord(buf, offset + 1);
    damages.push({ offset, reason, afterIndex: entries.at(-1)?.index ?? 0, resumeOffset });
    if (resumeOffset === null) break;
    // What follows the damage is read as records even when the header itself was the damage.
    sawHeader = true;
    offset = resumeOffset;
  }
  return { entries, offsets, damages };
}

/**
 * The header of the segment file at `path`, read from its first record alone (a segment start-up
 * skips is not read whole); null when it has none that reads (damage is readSegment's to judge).
 */
export function readSegmentHeader(path: string): SegmentHeader | null {
  const fd = fs.openSync(path, "r");
  try {
    const head = new Uint8Array(4096);
    const n = fs.readSync(fd, head, 0, head.length, 0);
    const decoded = decodeRecordAt(head.subarray(0, n), 0);
    if (decoded.kind !== "record" || decoded.type !== RecordType.header) return null;
    return parseHeader(decoded.payload);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Why the segment file `name` is not the segment its header says it is (a copy or a renamed
 * file: the WAL would take it for part of its log, a rewrite of entries it holds); null when
 * the two agree, or the header does not say.
 */
export function segmentNameMismatch(name: { seq: number; firstIndex: number }, header: SegmentHeader | null | undefined): string | null {
  if (header?.seq === undefined || header.firstIndex === undefined) return null;
  if (header.seq === name.seq && header.firstIndex === name.firstIndex) return null;
  return `its header says it is segment ${header.seq} starting at entry ${header.firstIndex}, its name segment ${name.seq} starting at entry ${name.firstIndex} ` +
    "(a copied or renamed file)";
}
