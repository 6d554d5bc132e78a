// Binary encoding of Raft messages for the peer transport. Layout (big-endian):
//   u8 version | u8 type | str from | str to | u64 term | type-specific fields
// where str is u16 byte length + UTF-8 and u64 is two u32 halves limited to 2^53 - 1.
// decodeMessage() never throws: garbage gives a typed error, and every count or length is
// checked against the bytes that remain before anything is allocated for it.

import type { Message, MessageType } from "./messages.ts";
import type { Entry, EntryKind, Membership, SnapshotMeta } from "./types.ts";

export const codecVersion = 1;
/** A node id longer than this is refused: ids are short names, not payloads. */
export const nodeIdBytesMax = 1024;

const typeCodes: Record<MessageType, number> = {
  pre_vote: 1,
  vote: 2,
  pre_vote_response: 3,
  vote_response: 4,
  append: 5,
  append_response: 6,
  heartbeat: 7,
  heartbeat_response: 8,
  snapshot: 9,
  timeout_now: 10,
  read_index: 11,
  read_index_response: 12,
  // Unknown to nodes before it: they cannot decode it (UNKNOWN_TYPE, counted with malformed messages) and drop it, nothing else.
  not_member: 13,
};
const typesByCode = new Map<number, MessageType>(Object.entries(typeCodes).map(([t, c]) => [c, t as MessageType]));

const kindCodes: Record<EntryKind, number> = { normal: 0, config: 1, noop: 2 };
const kindsByCode: readonly EntryKind[] = ["normal", "config", "noop"];

/** term + index + kind + timestamp + data length: the least an encoded entry takes. */
const entryBytesMin = 8 + 8 + 1 + 8 + 4;

export type DecodeErrorCode = "TRUNCATED" | "BAD_VERSION" | "UNKNOWN_TYPE" | "BAD_VALUE" | "TRAILING_BYTES";

export interface DecodeError {
  readonly code: DecodeErrorCode;
  readonly offset: number;
  readonly detail: string;
}

export type DecodeResult = { readonly ok: true; readonly message: Message } | { readonly ok: false; readonly error: DecodeError };

// ─── encoding ──────────────────────────────────────────────────────────────────────────

class Writer {
  private buf: Uint8Array;
  private view: DataView;
  private pos: number;
  private static readonly utf8 = new TextEncoder();

  /**
   * `capacityBytes`: what the message is expected to need, so that a large one is not grown (and
   * copied) again and again. `headroomBytes`: left unwritten before the message (see encodeMessage).
   */
  constructor(capacityBytes = 256, private readonly headroomBytes = 0) {
    this.buf = new Uint8Array(headroomBytes + capacityBytes);
    this.view = new DataView(this.buf.buffer);
    this.pos = headroomBytes;
  }

  private reserve(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.pos));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }
  u8(v: number): void {
    this.reserve(1);
    this.view.setUint8(this.pos, v);
    this.pos += 1;
  }
  u16(v: number): void {
    this.reserve(2);
    this.view.setUint16(this.pos, v);
    this.pos += 2;
  }
  u32(v: number): void {
    this.reserve(4);
    this.view.setUint32(this.pos, v);
    this.pos += 4;
  }
  u64(v: number): void {
    if (!Number.isSafeInteger(v) || v < 0) throw new RangeError(`not a u53: ${v}`);
    this.u32(Math.floor(v / 0x1_0000_0000));
    this.u32(v >>> 0);
  }
  bool(v: boolean): void {
    this.u8(v ? 1 : 0);
  }
  bytes(b: Uint8Array): void {
    this.u32(b.length);
    this.reserve(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }
  str(s: string): void {
    const b = Writer.utf8.encode(s);
    if (b.length > nodeIdBytesMax) throw new RangeError(`string longer than ${nodeIdBytesMax} bytes`);
    this.u16(b.length);
    this.reserve(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }
  /** The bytes written: a view, not a copy (the writer is not used again). */
  finish(): Uint8Array {
    return this.buf.subarray(this.headroomBytes, this.pos);
  }
}

function writeEntry(w: Writer, e: Entry): void {
  w.u64(e.term);
  w.u64(e.index);
  w.u8(kindCodes[e.kind]);
  w.u64(e.timestampMs);
  w.bytes(e.data);
}

/** Bytes an append of `entries` takes at most: header, ids at their longest, and each entry. */
function appendBytesMax(entries: readonly Entry[]): number {
  let bytes = 64 + 2 * (2 + nodeIdBytesMax);
  for (const e of entries) bytes += entryHeaderBytes + e.data.length;
  return bytes;
}

/** term, index, kind, timestamp, data length (see writeEntry). */
const entryHeaderBytes = 8 + 8 + 1 + 8 + 4;

function writeMembership(w: Writer, m: Membership): void {
  w.u16(m.voters.length);
  for (const id of m.voters) w.str(id);
  w.u16(m.learners.length);
  for (const id of m.learners) w.str(id);
}

/**
 * Encodes a message the core produced. Throws RangeError only for values the core never makes.
 * `headroomBytes`: that many bytes of the returned view's buffer, just before it, are left for
 * the caller (a transport frames the message there, in place, rather than copy it into a frame).
 */
export function encodeMessage(m: Message, headroomBytes = 0): Uint8Array {
  const w = new Writer(m.type === "append" ? appendBytesMax(m.entries) : 256, headroomBytes);
  w.u8(codecVersion);
  w.u8(typeCodes[m.type]);
  w.str(m.from);
  w.str(m.to);
  w.u64(m.term);
  switch (m.type) {
    case "pre_vote":
      w.u64(m.lastIndex);
      w.u64(m.lastTerm);
      break;
    case "vote":
      w.u64(m.lastIndex);
      w.u64(m.lastTerm);
      w.bool(m.transfer);
      break;
    case "pre_vote_response":
    case "vote_response":
      w.bool(m.reject);
      break;
    case "append":
      w.u64(m.prevIndex);
      w.u64(m.prevTerm);
      w.u64(m.commit);
      w.u32(m.entries.length);
      for (const e of m.entries) writeEntry(w, e);
      break;
    case "append_response":
      w.bool(m.reject);
      w.u64(m.index);
      w.u64(m.hintIndex);
      w.u64(m.hintTerm);
      break;
    case "heartbeat":
      w.u64(m.commit);
      w.u64(m.readSeq);
      break;
    case "heartbeat_response":
      w.u64(m.readSeq);
      // Only when set: a node that does not know the flag refuses trailing bytes, and a
      // follower with room must stay readable by it (a rolling upgrade).
      if (m.diskFull === true) w.bool(true);
      break;
    case "snapshot":
      w.u64(m.snapshot.index);
      w.u64(m.snapshot.term);
      writeMembership(w, m.snapshot.membership);
      break;
    case "timeout_now":
      break;
    case "read_index":
      w.u64(m.requestId);
      break;
    case "read_index_response":
      w.u64(m.requestId);
      w.u64(m.index);
      break;
    case "not_member":
      w.u64(m.configIndex);
      break;
  }
  return w.finish();
}

// ─── decoding ──────────────────────────────────────────────────────────────────────────

class DecodeFailure {
  constructor(readonly error: DecodeError) {}
}

class Reader {
  private pos = 0;
  private readonly view: DataView;
  // ignoreBOM: a leading U+FEFF is part of the id, not a mark to drop ("\ufeffn1" is not "n1").
  private static readonly utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

  /** owned: the caller hands buf over (never writes to it again), so bytes() may view into it. */
  constructor(private readonly buf: Uint8Array, private readonly owned = false) {
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }
  remaining(): number {
    return this.buf.length - this.pos;
  }
  offset(): number {
    return this.pos;
  }
  fail(code: DecodeErrorCode, detail: string): never {
    throw new DecodeFailure({ code, offset: this.pos, detail });
  }
  private need(n: number, what: string): void {
    if (this.remaining() < n) this.fail("TRUNCATED", `${what}: need ${n} bytes, ${this.remaining()} left`);
  }
  u8(what: string): number {
    this.need(1, what);
    const v = this.view.getUint8(this.pos);
    this.pos += 1;
    return v;
  }
  u16(what: string): number {
    this.need(2, what);
    const v = this.view.getUint16(this.pos);
    this.pos += 2;
    return v;
  }
  u32(what: string): number {
    this.need(4, what);
    const v = this.view.getUint32(this.pos);
    this.pos += 4;
    return v;
  }
  u64(what: string): number {
    this.need(8, what);
    const hi = this.view.getUint32(this.pos);
    const lo = this.view.getUint32(this.pos + 4);
    if (hi > 0x1f_ffff) this.fail("BAD_VALUE", `${what}: beyond 2^53`);
    this.pos += 8;
    return hi * 0x1_0000_0000 + lo;
  }
  bool(what: string): boolean {
    const v = this.u8(what);
    if (v > 1) this.fail("BAD_VALUE", `${what}: boolean byte ${v}`);
    return v === 1;
  }
  bytes(what: string): Uint8Array {
    const n = this.u32(`${what} length`);
    this.need(n, what);
    // A copy unless the buffer was handed over: a caller may reuse its receive buffer.
    const out = this.owned ? this.buf.subarray(this.pos, this.pos + n) : this.buf.slice(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
  str(what: string): string {
    const n = this.u16(`${what} length`);
    if (n > nodeIdBytesMax) this.fail("BAD_VALUE", `${what}: ${n} bytes is longer than ${nodeIdBytesMax}`);
    this.need(n, what);
    let s: string;
    try {
      s = Reader.utf8.decode(this.buf.subarray(this.pos, this.pos + n));
    } catch {
      return this.fail("BAD_VALUE", `${what}: not UTF-8`);
    }
    this.pos += n;
    return s;
  }
  /** A count of items each taking at least itemBytesMin: bounded by what remains. */
  count(what: string, width: 2 | 4, itemBytesMin: number): number {
    const n = width === 2 ? this.u16(what) : this.u32(what);
    if (n * itemBytesMin > this.remaining()) this.fail("TRUNCATED", `${what}: ${n} items cannot fit in ${this.remaining()} bytes`);
    return n;
  }
}

function readEntry(r: Reader): Entry {
  const term = r.u64("entry term");
  const index = r.u64("entry index");
  const kindCode = r.u8("entry kind");
  const kind = kindsByCode[kindCode];
  if (kind === undefined) r.fail("BAD_VALUE", `entry kind ${kindCode}`);
  const timestampMs = r.u64("entry timestamp");
  const data = r.bytes("entry data");
  return { term, index, kind, timestampMs, data };
}

function readIds(r: Reader, what: string): string[] {
  const n = r.count(what, 2, 2);
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(r.str(what));
  return out;
}

function readSnapshotMeta(r: Reader): SnapshotMeta {
  const index = r.u64("snapshot index");
  const term = r.u64("snapshot term");
  const voters = readIds(r, "voters");
  const learners = readIds(r, "learners");
  return { index, term, membership: { voters, learners } };
}

function readBody(r: Reader, type: MessageType, env: { from: string; to: string; term: number }): Message {
  switch (type) {
    case "pre_vote":
      return { ...env, type, lastIndex: r.u64("lastIndex"), lastTerm: r.u64("lastTerm") };
    case "vote":
      return { ...env, type, lastIndex: r.u64("lastIndex"), lastTerm: r.u64("lastTerm"), transfer: r.bool("transfer") };
    case "pre_vote_response":
    case "vote_response":
      return { ...env, type, reject: r.bool("reject") };
    case "append": {
      const prevIndex = r.u64("prevIndex");
      const prevTerm = r.u64("prevTerm");
      const commit = r.u64("commit");
      const n = r.count("entry count", 4, entryBytesMin);
      const entries: Entry[] = [];
      for (let i = 0; i < n; i++) entries.push(readEntry(r));
      return { ...env, type, prevIndex, prevTerm, commit, entries };
    }
    case "append_response":
      return { ...env, type, reject: r.bool("reject"), index: r.u64("index"), hintIndex: r.u64("hintIndex"), hintTerm: r.u64("hintTerm") };
    case "heartbeat":
      return { ...env, type, commit: r.u64("commit"), readSeq: r.u64("readSeq") };
    case "heartbeat_response": {
      const readSeq = r.u64("readSeq");
      if (r.remaining() === 0) return { ...env, type, readSeq };
      // Sent only when set: a 0 here is no encoding of ours (one message, one form).
      if (!r.bool("diskFull")) r.fail("BAD_VALUE", "diskFull: sent only when true");
      return { ...env, type, readSeq, diskFull: true };
    }
    case "snapshot":
      return { ...env, type, snapshot: readSnapshotMeta(r) };
    case "timeout_now":
      return { ...env, type };
    case "read_index":
      return { ...env, type, requestId: r.u64("requestId") };
    case "read_index_response":
      return { ...env, type, requestId: r.u64("requestId"), index: r.u64("index") };
    case "not_member":
      return { ...env, type, configIndex: r.u64("configIndex") };
  }
}

/**
 * `options.owned`: the caller hands `buf` over and never writes to it again (the transport
 * allocates each message's buffer), so entry data are views into it rather than copies: one
 * copy fewer per entry received.
 */
export function decodeMessage(buf: Uint8Array, options: { owned?: boolean } = {}): DecodeResult {
  const r: Reader = new Reader(buf, options.owned === true);
  try {
    const version = r.u8("version");
    if (version !== codecVersion) r.fail("BAD_VERSION", `version ${version}, expected ${codecVersion}`);
    const code = r.u8("type");
    const type = typesByCode.get(code);
    if (type === undefined) r.fail("UNKNOWN_TYPE", `type code ${code}`);
    const from = r.str("from");
    const to = r.str("to");
    const term = r.u64("term");
    const message = readBody(r, type, { from, to, term });
    if (r.remaining() !== 0) r.fail("TRAILING_BYTES", `${r.remaining()} bytes after the message`);
    return { ok: true, message };
  } catch (e) {
    if (e instanceof DecodeFailure) return { ok: false, error: e.error };
    // Nothing else can be thrown by the reader; report rather than escape, as promised.
    return { ok: false, error: { code: "BAD_VALUE", offset: r.offset(), detail: String(e) } };
  }
}
