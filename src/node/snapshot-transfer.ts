// Streaming a snapshot from the leader to a follower that needs entries the leader has
// compacted. The leader sends state.db in CRC-checked chunks on the transport's bulk lane,
// at most a window ahead of what the follower acknowledged (backpressure). The follower
// writes chunks in order to a `.recv-` directory that survives restarts, so a stream cut
// by a dropped connection resumes where it stopped: every ack carries the bytes held, and
// the leader continues from there. Once all bytes are in and the SHA-256 matches, the
// follower files it as a snapshot and hands the Raft core the snapshot message.

import * as fs from "node:fs";
import { join } from "node:path";
import type { Message } from "../raft/index.ts";
import type { SnapshotMeta } from "../raft/types.ts";
import { SnapshotStore, snapshotDirName, snapshotStateFile } from "../storage/index.ts";
import { Store, sealReceivedImage, stageStoreImage } from "../store/index.ts";
import { MessageType } from "../transport/index.ts";
import type { PeerNetwork } from "../io/index.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/logger.ts";
import type { Counter, Gauge } from "../metrics/index.ts";

export type SnapshotMessage = Extract<Message, { type: "snapshot" }>;

/**
 * Moving snapshots between members, as the effect loop uses it. Production: the chunked,
 * resumable streams below (fileSnapshotTransfer). The simulator has a twin that moves a
 * filed image in one message over its network.
 */
export interface SnapshotTransfer {
  /** The core asked to send a snapshot to m.to. */
  send(m: SnapshotMessage): Promise<void>;
  onChunk(from: string, payload: Uint8Array): void;
  onAck(from: string, payload: Uint8Array): void;
  /** On every tick: abandon outgoing transfers that stopped making progress. */
  checkStalls(nowMs: number): void;
  /** A snapshot is arriving or being verified (see SnapshotReceiver.busy). */
  busy(appliedIndex: number): boolean;
  stop(): void;
}

export interface SnapshotTransferHooks {
  /** An outgoing transfer ended (the core is told: reportSnapshot). */
  sent(peer: string, ok: boolean): void;
  /** A snapshot arrived, verified and filed: step `message` into the core. */
  received(message: SnapshotMessage, clusterId: string): void;
  /** The first chunk of a snapshot arrived. */
  started(meta: SnapshotMeta): void;
  appliedIndex(): number;
}

/** The production transfer: snapshot directories streamed over the peer transport's bulk lane. */
export function fileSnapshotTransfer(
  network: PeerNetwork, dirs: SnapshotStore, storePath: string, logger: Logger, metrics: TransferMetrics, hooks: SnapshotTransferHooks,
): SnapshotTransfer {
  const sender = new SnapshotSender(network, dirs, logger, metrics, hooks.sent);
  const receiver = new SnapshotReceiver(network, dirs, storePath, logger, metrics, hooks.received, hooks.started, hooks.appliedIndex);
  return {
    send: (m) => sender.start(m),
    onChunk: (from, payload) => receiver.onChunk(from, payload),
    onAck: (from, payload) => sender.onAck(from, payload),
    checkStalls: (nowMs) => sender.checkStalls(nowMs),
    busy: (appliedIndex) => receiver.busy(appliedIndex),
    stop: () => sender.stop(),
  };
}

const chunkBytes = 1024 * 1024;
const windowChunks = 4;
/** A stream with no acknowledged progress for this long is abandoned (the core retries). */
const stallTimeoutMs = 15_000;
/**
 * While a received image is flushed, hashed and staged (seconds for a large one, written back
 * at a bounded rate), the follower tells the leader it is still there this often.
 */
const finishKeepAliveMs = 3_000;

interface ChunkHeader {
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

interface Ack {
  term: number;
  index: number;
  receivedBytes: number;
  status: "progress" | "done" | "failed";
  reason?: string;
}

export interface TransferMetrics {
  sentBytes: Counter;
  receivedBytes: Counter;
  transfers: Counter;
  inProgress: Gauge;
  progressBytes: Gauge;
  totalBytes: Gauge;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function encodeChunk(header: ChunkHeader, data: Uint8Array): Uint8Array {
  const h = encoder.encode(JSON.stringify(header));
  const out = new Uint8Array(4 + h.length + data.length);
  new DataView(out.buffer).setUint32(0, h.length, true);
  out.set(h, 4);
  out.set(data, 4 + h.length);
  return out;
}

function decodeChunk(payload: Uint8Array): { header: ChunkHeader; data: Uint8Array } | null {
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

function decodeAck(payload: Uint8Array): Ack | null {
  try {
    const ack = JSON.parse(decoder.decode(payload)) as Ack;
    return typeof ack.receivedBytes === "number" && typeof ack.index === "number" ? ack : null;
  } catch {
    return null;
  }
}

interface OutgoingStream {
  message: SnapshotMessage;
  path: string;
  fd: number;
  totalBytes: number;
  sha256: string;
  clusterId: string;
  createdAt: string;
  nextOffset: number;
  ackedBytes: number;
  lastProgressMs: number;
}

/** The leader's side: one stream per follower at a time. */
export class SnapshotSender {
  private readonly streams = new Map<string, OutgoingStream>();

  constructor(
    private readonly transport: PeerNetwork,
    private readonly snapshots: SnapshotStore,
    private readonly logger: Logger,
    private readonly metrics: TransferMetrics,
    private readonly finished: (peer: string, ok: boolean) => void,
  ) {}

  /** The core asked to send a snapshot to m.to. */
  async start(m: SnapshotMessage): Promise<void> {
    const current = this.streams.get(m.to);
    if (current !== undefined && current.message.snapshot.index === m.snapshot.index && current.message.snapshot.term === m.snapshot.term) return;
    if (current !== undefined) this.close(m.to, current);
    const dir = join(this.snapshots.dir, snapshotDirName(m.snapshot.term, m.snapshot.index));
    const entry = this.snapshots.list().find((e) => e.index === m.snapshot.index && e.term === m.snapshot.term);
    if (entry?.meta == null) {
      this.logger.error("snapshot requested by a follower is missing on disk", { peer: m.to, dir });
      this.finished(m.to, false);
      return;
    }
    const path = join(dir, snapshotStateFile);
    const stream: OutgoingStream = {
      message: m,
      path,
      fd: fs.openSync(path, "r"),
      totalBytes: fs.statSync(path).size,
      sha256: entry.meta.stateSha256,
      clusterId: entry.meta.clusterId,
      createdAt: entry.meta.createdAt,
      nextOffset: 0,
      ackedBytes: 0,
      lastProgressMs: Date.now(),
    };
    this.streams.set(m.to, stream);
    this.metrics.inProgress.set(this.streams.size);
    this.metrics.totalBytes.set(stream.totalBytes);
    this.logger.info("sending snapshot", { peer: m.to, index: m.snapshot.index, term: m.snapshot.term, bytes: stream.totalBytes });
    this.pump(m.to, stream);
  }

  onAck(from: string, payload: Uint8Array): void {
    const ack = decodeAck(payload);
    const stream = this.streams.get(from);
    if (ack === null || stream === undefined || ack.index !== stream.message.snapshot.index || ack.term !== stream.message.snapshot.term) return;
    stream.lastProgressMs = Date.now();
    if (ack.status === "done") {
      this.logger.info("snapshot delivered", { peer: from, index: ack.index });
      this.metrics.transfers.labels("sent_ok").inc();
      this.close(from, stream);
      this.finished(from, true);
      return;
    }
    if (ack.status === "failed") {
      this.logger.warn("follower rejected the snapshot", { peer: from, reason: ack.reason });
      this.metrics.transfers.labels("sent_failed").inc();
      this.close(from, stream);
      this.finished(from, false);
      return;
    }
    // The follower says what it holds: continue from there (a resumed or repaired stream).
    stream.ackedBytes = ack.receivedBytes;
    if (ack.receivedBytes < stream.nextOffset - windowChunks * chunkBytes || ack.receivedBytes > stream.nextOffset) stream.nextOffset = ack.receivedBytes;
    this.metrics.progressBytes.set(ack.receivedBytes);
    this.pump(from, stream);
  }

  /** Called on every tick: abandon streams that stopped making progress. */
  checkStalls(nowMs: number): void {
    for (const [peer, stream] of this.streams) {
      if (nowMs - stream.lastProgressMs < stallTimeoutMs) continue;
      this.logger.warn("snapshot transfer stalled; the leader will retry", { peer, sentBytes: stream.ackedBytes, totalBytes: stream.totalBytes });
      this.metrics.transfers.labels("sent_stalled").inc();
      this.close(peer, stream);
      this.finished(peer, false);
    }
  }

  stop(): void {
    for (const [peer, stream] of this.streams) this.close(peer, stream);
  }

  private pump(peer: string, stream: OutgoingStream): void {
    const m = stream.message;
    while (stream.nextOffset - stream.ackedBytes < windowChunks * chunkBytes) {
      const length = Math.min(chunkBytes, stream.totalBytes - stream.nextOffset);
      // An empty final chunk still goes out when the file is empty, so the follower finishes.
      if (length <= 0 && !(stream.totalBytes === 0 && stream.nextOffset === 0)) break;
      const data = new Uint8Array(Math.max(0, length));
      if (length > 0) fs.readSync(stream.fd, data, 0, length, stream.nextOffset);
      const header: ChunkHeader = {
        from: m.from, to: m.to, term: m.term, meta: m.snapshot, clusterId: stream.clusterId, createdAt: stream.createdAt,
        sha256: stream.sha256, totalBytes: stream.totalBytes, offset: stream.nextOffset, crc32: Bun.hash.crc32(data) >>> 0,
      };
      if (!this.transport.send(peer, MessageType.snapshotChunk, encodeChunk(header, data), { bulk: true })) break;
      this.metrics.sentBytes.inc(length);
      stream.nextOffset += Math.max(length, 1);
      if (stream.totalBytes === 0) break;
    }
  }

  private close(peer: string, stream: OutgoingStream): void {
    try {
      fs.closeSync(stream.fd);
    } catch {
      // already closed
    }
    this.streams.delete(peer);
    this.metrics.inProgress.set(this.streams.size);
  }
}

interface IncomingStream {
  key: string;
  index: number;
  dir: string;
  path: string;
  receivedBytes: number;
}

/** The follower's side. */
export class SnapshotReceiver {
  private current: IncomingStream | null = null;
  private verifying = false;

  /**
   * A snapshot is arriving or being verified. A partial stream that the log has overtaken
   * (its sender died and the next leader sent entries instead) is dropped here.
   */
  busy(appliedIndex: number): boolean {
    const stream = this.current;
    if (stream !== null && !this.verifying && stream.index <= appliedIndex) {
      this.logger.info("dropping a partial snapshot the log has overtaken", { index: stream.index, appliedIndex });
      fs.rmSync(stream.dir, { recursive: true, force: true });
      this.current = null;
    }
    return this.current !== null || this.verifying;
  }

  constructor(
    private readonly transport: PeerNetwork,
    private readonly snapshots: SnapshotStore,
    /** The store file: a received image is copied beside it, ready to be installed. */
    private readonly storePath: string,
    private readonly logger: Logger,
    private readonly metrics: TransferMetrics,
    /** Called with the verified snapshot, filed and staged; the node steps `message`. */
    private readonly complete: (message: SnapshotMessage, clusterId: string) => void,
    private readonly onStart: (meta: SnapshotMeta) => void,
    /** The highest index this node's store has applied: a snapshot at or below it is not needed. */
    private readonly appliedIndex: () => number,
  ) {}

  onChunk(from: string, payload: Uint8Array): void {
    const chunk = decodeChunk(payload);
    if (chunk === null) {
      this.logger.warn("dropped a malformed snapshot chunk", { from });
      return;
    }
    const { header, data } = chunk;
    const key = `${header.meta.term}-${header.meta.index}`;
    const ack = (status: Ack["status"], receivedBytes: number, reason?: string): void => {
      const body: Ack = { term: header.meta.term, index: header.meta.index, receivedBytes, status, ...(reason === undefined ? {} : { reason }) };
      this.transport.send(from, MessageType.snapshotAck, encoder.encode(JSON.stringify(body)));
    };
    if (this.verifying) return;
    if (header.meta.index <= this.appliedIndex()) {
      // A snapshot sent again (the leader retried after a lost acknowledgement) or one this
      // node has passed: nothing to transfer; the core answers the leader with what it holds.
      ack("done", header.totalBytes);
      this.complete({ type: "snapshot", from: header.from, to: header.to, term: header.term, snapshot: header.meta }, header.clusterId);
      return;
    }
    let stream = this.current;
    if (stream === null || stream.key !== key) {
      stream = this.open(key, header);
      this.current = stream;
      this.onStart(header.meta);
    }
    if (header.offset !== stream.receivedBytes || (Bun.hash.crc32(data) >>> 0) !== header.crc32) {
      // Out of order (a resumed stream) or damaged in flight: say what we hold.
      ack("progress", stream.receivedBytes);
      return;
    }
    try {
      const fd = fs.openSync(stream.path, "r+");
      try {
        if (data.length > 0) fs.writeSync(fd, data, 0, data.length, stream.receivedBytes);
      } finally {
        fs.closeSync(fd);
      }
    } catch (e) {
      this.logger.error("cannot write a received snapshot chunk", { error: errorMessage(e), path: stream.path });
      ack("failed", stream.receivedBytes, errorMessage(e));
      return;
    }
    stream.receivedBytes += data.length;
    this.metrics.receivedBytes.inc(data.length);
    this.metrics.progressBytes.set(stream.receivedBytes);
    this.metrics.totalBytes.set(header.totalBytes);
    if (stream.receivedBytes < header.totalBytes) {
      ack("progress", stream.receivedBytes);
      return;
    }
    void this.finish(stream, header, ack);
  }

  /**
   * Copy the image beside the store, off this thread, so that installing it is a rename. If
   * that fails the install copies it itself: slower, but nothing is lost.
   */
  private async stage(snapshotDir: string, snapshotName: string): Promise<void> {
    const staged = Store.stagedImagePath(this.storePath, snapshotName);
    Store.removeStaged(this.storePath);
    try {
      await stageStoreImage(join(snapshotDir, snapshotStateFile), staged);
    } catch (e) {
      Store.removeStaged(this.storePath);
      this.logger.warn("could not copy the received snapshot beside the store; it is installed by a copy", { error: errorMessage(e) });
    }
  }

  private open(key: string, header: ChunkHeader): IncomingStream {
    const dir = join(this.snapshots.dir, `.recv-${key}`);
    const path = join(dir, snapshotStateFile);
    fs.mkdirSync(dir, { recursive: true, mode: 0o750 });
    if (!fs.existsSync(path)) fs.writeFileSync(path, new Uint8Array(0), { mode: 0o640 });
    const receivedBytes = Math.min(fs.statSync(path).size, header.totalBytes);
    if (receivedBytes > 0) this.logger.info("resuming a snapshot transfer", { index: header.meta.index, receivedBytes, totalBytes: header.totalBytes });
    else this.logger.info("receiving a snapshot", { index: header.meta.index, term: header.meta.term, bytes: header.totalBytes, from: header.from });
    // Streams for other snapshots are stale: the leader moved on.
    for (const name of fs.readdirSync(this.snapshots.dir)) {
      if (name.startsWith(".recv-") && name !== `.recv-${key}`) fs.rmSync(join(this.snapshots.dir, name), { recursive: true, force: true });
    }
    return { key, index: header.meta.index, dir, path, receivedBytes };
  }

  private async finish(stream: IncomingStream, header: ChunkHeader, ack: (s: Ack["status"], n: number, reason?: string) => void): Promise<void> {
    this.verifying = true;
    const keepAlive = setInterval(() => ack("progress", header.totalBytes), finishKeepAliveMs);
    try {
      fs.truncateSync(stream.path, header.totalBytes);
      // Flushed a slice at a time and hashed off this thread: a large image flushed or hashed
      // here at once would hold up this node's own WAL syncs and writes.
      const sha = await sealReceivedImage(stream.path);
      if (sha !== header.sha256) {
        this.logger.warn("received snapshot failed verification; fetching it again", { expected: header.sha256, got: sha });
        fs.rmSync(stream.dir, { recursive: true, force: true });
        this.current = null;
        this.metrics.transfers.labels("received_bad").inc();
        ack("failed", 0, "checksum mismatch");
        return;
      }
      const tempDir = this.snapshots.beginTemp();
      fs.renameSync(stream.path, join(tempDir, snapshotStateFile));
      fs.rmSync(stream.dir, { recursive: true, force: true });
      const entry = await this.snapshots.commit(tempDir, {
        clusterId: header.clusterId, index: header.meta.index, term: header.meta.term, membership: header.meta.membership, createdAt: header.createdAt,
        stateSha256: sha,
      });
      await this.stage(entry.dir, entry.name);
      this.current = null;
      this.metrics.transfers.labels("received_ok").inc();
      this.logger.info("snapshot received and verified", { index: header.meta.index, term: header.meta.term });
      ack("done", header.totalBytes);
      this.complete({ type: "snapshot", from: header.from, to: header.to, term: header.term, snapshot: header.meta }, header.clusterId);
    } catch (e) {
      this.logger.error("could not file the received snapshot", { error: errorMessage(e) });
      ack("failed", 0, errorMessage(e));
      this.current = null;
    } finally {
      clearInterval(keepAlive);
      this.verifying = false;
    }
  }
}
