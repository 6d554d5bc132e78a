// Record framing shared by every svc file that holds records (WAL segments, hard state):
//   u32 payload length | u32 crc32(length ‖ type ‖ payload) | u8 type | payload
// The CRC covers the length too, so a flipped bit in a length field is caught rather
// than silently misframing everything after it.

export const recordHeaderBytes = 9;
/** A record larger than this is damage, not data: decoding never trusts a bigger length. */
export const recordPayloadBytesMax = 256 * 1024 * 1024;

/** CRC-32 (IEEE, as Bun.hash.crc32) one byte at a time, for the four bytes of a record's length. */
const crcTable = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb8_8320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** Bun.hash.crc32 of `value`'s four little-endian bytes, with no buffer to make (a native call costs more than these four steps). */
export function crc32OfU32LE(value: number): number {
  let c = 0xffff_ffff;
  c = crcTable[(c ^ value) & 0xff]! ^ (c >>> 8);
  c = crcTable[(c ^ (value >>> 8)) & 0xff]! ^ (c >>> 8);
  c = crcTable[(c ^ (value >>> 16)) & 0xff]! ^ (c >>> 8);
  c = crcTable[(c ^ (value >>> 24)) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffff_ffff) >>> 0;
}

/**
 * The CRC of the record at `offset` of `buf` that ends at `end`: of its length, then of the
 * bytes from its type on (the type byte sits just before the payload, so no copy is needed).
 * `view` is a DataView over all of `buf`.
 */
export function recordCrcAt(buf: Uint8Array, view: DataView, offset: number, end: number): number {
  return Bun.hash.crc32(buf.subarray(offset + 8, end), crc32OfU32LE(view.getUint32(offset, true))) >>> 0;
}

export function crc32Record(lengthAndType: Uint8Array, payload: Uint8Array): number {
  let crc = Bun.hash.crc32(lengthAndType);
  crc = Bun.hash.crc32(payload, crc);
  return crc >>> 0;
}

/** Encode one record into `out` at `offset`; returns the offset after it. */
export function encodeRecordInto(out: Uint8Array, offset: number, type: number, payload: Uint8Array): number {
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
  view.setUint32(offset, payload.length, true);
  out[offset + 8] = type;
  const lengthAndType = new Uint8Array(5);
  lengthAndType.set(out.subarray(offset, offset + 4), 0);
  lengthAndType[4] = type;
  view.setUint32(offset + 4, crc32Record(lengthAndType, payload), true);
  out.set(payload, offset + recordHeaderBytes);
  return offset + recordHeaderBytes + payload.length;
}

export function encodeRecord(type: number, payload: Uint8Array): Uint8Array {
  const out = new Uint8Array(recordHeaderBytes + payload.length);
  encodeRecordInto(out, 0, type, payload);
  return out;
}

export type DecodedRecord =
  | { kind: "record"; type: number; payload: Uint8Array; end: number }
  /** Fewer bytes remain than the header or the payload needs. */
  | { kind: "short" }
  /** The bytes at this offset are not a valid record. */
  | { kind: "bad"; reason: string };

/**
 * Decode the record at `offset`. `view`: a DataView over all of `buf`, when the caller decodes
 * many records of one buffer (so that none is made per record).
 */
export function decodeRecordAt(buf: Uint8Array, offset: number, view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength)): DecodedRecord {
  if (buf.length - offset < recordHeaderBytes) return { kind: "short" };
  const length = view.getUint32(offset, true);
  if (length > recordPayloadBytesMax) return { kind: "bad", reason: `record length ${length} exceeds the limit` };
  const end = offset + recordHeaderBytes + length;
  if (end > buf.length) return { kind: "short" };
  const type = buf[offset + 8] ?? 0;
  const expected = view.getUint32(offset + 4, true);
  if (recordCrcAt(buf, view, offset, end) !== expected) return { kind: "bad", reason: "checksum mismatch" };
  return { kind: "record", type, payload: buf.subarray(offset + recordHeaderBytes, end), end };
}
