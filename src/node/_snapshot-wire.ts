// The snapshot transfer's wire format: chunks (a JSON header with the snapshot's identity,
// total size, offset and CRC32, then the bytes) and acknowledgements (the bytes held). Shared
// by the sending and receiving sides; private to this folder. Decoding checks every field: a
// chunk's term and index name a directory, its membership reaches the Raft core.

import type { Message } from "../raft/index.ts";
import type { SnapshotMeta } from "../raft/types.ts";
import type { Counter, Gauge } from "../metrics/index.ts";
import { membershipOf } from "../util/log-data.ts";

export type SnapshotMessage = Extract<Message, { type: "snapshot" }>;

export interface TransferMetrics {
  sentBytes: Counter;
  receivedBytes: Counter;
  transfers: Counter;
  inProgress: Gauge;
  progressBytes: Gauge;
  totalBytes: Gauge;
}

export const chunkBytes = 1024 * 1024;
/** The reason a follower gives when a whole image it received does not match its SHA-256. */
export const checksumMismatch = "checksum mismatch";
export const windowChunks = 4;
/** A stream with no acknowledged progress for this long is abandoned (the core retries). */
export const stallTimeoutMs = 15_000;
/**
 * A stream whose acknowledged bytes have not moved for this long is sent again from them: the
 * chunks in flight were lost with a connection (the follower restarted, or the link dropped
 * and came back), and the follower acknowledges only the chunks it gets.
 */
export const resendAfterMs = 2_000;
/**
 * While a received image is flushed, hashed and staged (seconds for a large one, written back
 * at a bounded rate), the follower tells the leader it is still there this often.
 */
export const finishKeepAliveMs = 3_000;

export interface ChunkHeader {
  from: string;
  to: string;
  term: number;
  meta: SnapshotMeta;
  clusterId: string;
  createdAt: string;
  sha256: string;
  totalBytes: number;
  offset: number;
  crc32: number;
}

export interface Ack {
  term: number;
  index: number;
  receivedBytes: number;
  status: "progress" | "done" | "failed";
  reason?: string;
}

export const encoder = new TextEncoder();
export const decoder = new TextDecoder();

export function encodeChunk(header: ChunkHeader, data: Uint8Array): Uint8Array {
  const h = encoder.encode(JSON.stringify(header));
  const out = new Uint8Array(4 + h.length + data.length);
  new DataView(out.buffer).setUint32(0, h.length, true);
  out.set(h, 4);
  out.set(data, 4 + h.length);
  return out;
}

/** A chunk, or null when it is not one: every header field is checked before anything uses it. */
export function decodeChunk(payload: Uint8Array): { header: ChunkHeader; data: Uint8Array } | null {
  if (payload.length < 4) return null;
  const length = new DataView(payload.buffer, payload.byteOffset, payload.byteLength).getUint32(0, true);
  if (4 + length > payload.length) return null;
  const header = chunkHeaderOf(parseJson(payload.subarray(4, 4 + length)));
  if (header === null) return null;
  const data = payload.subarray(4 + length);
  // The bytes lie inside the snapshot they belong to.
  if (header.offset > header.totalBytes || data.length > header.totalBytes - header.offset) return null;
  return { header, data };
}

/** An acknowledgement, or null when it is not one. */
export function decodeAck(payload: Uint8Array): Ack | null {
  const v = parseJson(payload);
  if (!isRecord(v)) return null;
  const { term, index, receivedBytes, status, reason } = v;
  if (!isCount(term) || !isCount(index) || !isCount(receivedBytes)) return null;
  if (status !== "progress" && status !== "done" && status !== "failed") return null;
  if (reason !== undefined && typeof reason !== "string") return null;
  return { term, index, receivedBytes, status, ...(reason === undefined ? {} : { reason }) };
}

function chunkHeaderOf(v: unknown): ChunkHeader | null {
  if (!isRecord(v) || !isRecord(v["meta"])) return null;
  const { from, to, term, clusterId, createdAt, sha256, totalBytes, offset, crc32 } = v;
  const { index: metaIndex, term: metaTerm, membership: rawMembership } = v["meta"];
  const membership = membershipOf(rawMembership);
  if (typeof from !== "string" || typeof to !== "string" || typeof clusterId !== "string" || typeof createdAt !== "string" || typeof sha256 !== "string") return null;
  if (!isCount(term) || !isCount(totalBytes) || !isCount(offset) || !isCount(metaIndex) || !isCount(metaTerm) || membership === null) return null;
  if (typeof crc32 !== "number" || !Number.isInteger(crc32) || crc32 < 0 || crc32 > 0xffff_ffff) return null;
  return { from, to, term, meta: { index: metaIndex, term: metaTerm, membership }, clusterId, createdAt, sha256, totalBytes, offset, crc32 };
}

function parseJson(bytes: Uint8Array): unknown {
  try {
    return JSON.parse(decoder.decode(bytes));
  } catch {
    return undefined;
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** A whole number from 0 to 2^53: an index, a term, a size or an offset. */
function isCount(v: unknown): v is number {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
}
