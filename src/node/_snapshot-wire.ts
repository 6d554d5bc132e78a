// The snapshot transfer's wire format: chunks (a JSON header with the snapshot's identity,
// total size, offset and CRC32, then the bytes) and acknowledgements (the bytes held). Shared
// by the sending and receiving sides; private to this folder.

import type { Message } from "../raft/index.ts";
import type { SnapshotMeta } from "../raft/types.ts";
import type { Counter, Gauge } from "../metrics/index.ts";

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
export const windowChunks = 4;
/** A stream with no acknowledged progress for this long is abandoned (the core retries). */
export const stallTimeoutMs = 15_000;
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

export function decodeChunk(payload: Uint8Array): { header: ChunkHeader; data: Uint8Array } | null {
  if (payload.length < 4) return null;
  const length = new DataView(payload.buffer, payload.byteOffset, payload.byteLength).getUint32(0, true);
  if (4 + length > payload.length) return null;
  try {
    const header = JSON.parse(decoder.decode(payload.subarray(4, 4 + length))) as ChunkHeader;
    if (typeof header.offset !== "number" || typeof header.totalBytes !== "number" || typeof header.meta?.index !== "number") return null;
    return { header, data: payload.subarray(4 + length) };
  } catch {
    return null;
  }
}

export function decodeAck(payload: Uint8Array): Ack | null {
  try {
    const ack = JSON.parse(decoder.decode(payload)) as Ack;
    return typeof ack.receivedBytes === "number" && typeof ack.index === "number" ? ack : null;
  } catch {
    return null;
  }
}
