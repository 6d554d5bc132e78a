// Binary form of a Raft log entry inside a WAL record:
//   u64 term | u64 index | u64 timestampMs | u8 kind | data
// u64 values are written as two u32 halves; svc never uses values above 2^53, and a record
// holding one is malformed (read as a double it would silently become another number).

import type { Entry, EntryKind } from "../util/log-data.ts";
import { recordCrcAt, recordHeaderBytes } from "./_record.ts";

export const entryHeaderBytes = 25;

const kindCodes: Record<EntryKind, number> = { normal: 1, config: 2, noop: 3 };
const kindsByCode: Record<number, EntryKind | undefined> = { 1: "normal", 2: "config", 3: "noop" };

export function writeU64(view: DataView, offset: number, value: number): void {
  view.setUint32(offset, Math.floor(value / 0x1_0000_0000), true);
  view.setUint32(offset + 4, value >>> 0, true);
}

export function readU64(view: DataView, offset: number): number {
  return view.getUint32(offset, true) * 0x1_0000_0000 + view.getUint32(offset + 4, true);
}

/** The highest high half a u64 below 2^53 has. */
const u53HighMax = 0x1f_ffff;

function fitsU53(view: DataView, offset: number): boolean {
  return view.getUint32(offset, true) <= u53HighMax;
}

export function encodeEntry(entry: Entry): Uint8Array {
  const out = new Uint8Array(entryHeaderBytes + entry.data.length);
  const view = new DataView(out.buffer);
  writeU64(view, 0, entry.term);
  writeU64(view, 8, entry.index);
  writeU64(view, 16, entry.timestampMs);
  out[24] = kindCodes[entry.kind];
  out.set(entry.data, entryHeaderBytes);
  return out;
}

/**
 * Decode an entry payload; null when it is not a well-formed entry. `copy: false` leaves the
 * entry's data a view of `payload` (which then stays alive as long as the entry). `view`: a
 * DataView over the whole buffer `payload` lies in, when the caller decodes many entries of
 * one buffer (so that none is made per entry).
 */
export function decodeEntry(payload: Uint8Array, copy = true, view?: DataView): Entry | null {
  if (payload.length < entryHeaderBytes) return null;
  const v = view ?? new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
  // Offsets into v: 0 when v is the payload's own view, else where the payload starts in v's buffer.
  const at = view === undefined ? 0 : payload.byteOffset - view.byteOffset;
  const kind = kindsByCode[payload[24] ?? 0];
  if (kind === undefined) return null;
  if (!fitsU53(v, at) || !fitsU53(v, at + 8) || !fitsU53(v, at + 16)) return null;
  const term = readU64(v, at);
  const index = readU64(v, at + 8);
  if (index < 1 || term < 1) return null;
  return {
    term,
    index,
    timestampMs: readU64(v, at + 16),
    kind,
    // A copy by default: the segment buffer it came from is not kept.
    data: copy ? payload.slice(entryHeaderBytes) : payload.subarray(entryHeaderBytes),
  };
}

/**
 * Write `entry` as a whole framed WAL record (see _record.ts) straight into `out` at `offset`,
 * with no intermediate copy of its data; returns the offset after it. The CRC is the same
 * streaming CRC of length, type and payload that decodeRecordAt checks.
 */
export function writeEntryRecord(out: Uint8Array, view: DataView, offset: number, type: number, entry: Entry): number {
  const payloadBytes = entryHeaderBytes + entry.data.length;
  const payloadAt = offset + recordHeaderBytes;
  view.setUint32(offset, payloadBytes, true);
  out[offset + 8] = type;
  writeU64(view, payloadAt, entry.term);
  writeU64(view, payloadAt + 8, entry.index);
  writeU64(view, payloadAt + 16, entry.timestampMs);
  out[payloadAt + 24] = kindCodes[entry.kind];
  out.set(entry.data, payloadAt + entryHeaderBytes);
  view.setUint32(offset + 4, recordCrcAt(out, view, offset, payloadAt + payloadBytes), true);
  return payloadAt + payloadBytes;
}
