// The leader's side of a snapshot transfer: one stream per follower, a window of chunks ahead
// of what the follower acknowledged, continued from the bytes it says it holds (a resumed or
// repaired stream), abandoned when it stops making progress (the core then retries).

import * as fs from "node:fs";
import { dirname, join } from "node:path";
import type { PeerNetwork } from "../io/index.ts";
import { SnapshotStore, snapshotDirName, snapshotStateFile, verifySnapshot } from "../storage/index.ts";
import { errorMessage } from "../util/errors.ts";
import { MessageType } from "../transport/index.ts";
import type { Logger } from "../util/logger.ts";
import {
  checksumMismatch, chunkBytes, decodeAck, encodeChunk, resendAfterMs, stallTimeoutMs, windowChunks,
  type ChunkHeader, type SnapshotMessage, type TransferMetrics,
} from "./_snapshot-wire.ts";

/**
 * Each chunk leaves its message and the transport's frames behind, and over loopback an image
 * goes out at hundreds of megabytes a second: a full collection after every `everyBytes` sent
 * (the memory budget's garbage share) keeps that garbage within its share. Measured sending a
 * 410 MB image: the leader's RSS peaked at 183 MB without, 152 MB with one every 32 MiB.
 */
export interface SenderGarbage {
  readonly everyBytes: number;
  collect(): void;
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
  /** The follower's last acknowledgement of any kind: a follower that answers is not stalled. */
  lastProgressMs: number;
  /** When the acknowledged bytes last moved (see resendAfterMs). */
  lastAdvanceMs: number;
  /**
   * When it was last sent again. At most once per resendAfterMs: on a slow link the chunks of a
   * window sent again arrive after the first, each answered with what the follower already
   * acknowledged, and rewinding on each would send every window twice.
   */
  lastRewindMs: number;
}

/** The leader's side: one stream per follower at a time. */
export class SnapshotSender {
  private readonly streams = new Map<string, OutgoingStream>();
  private sentSinceCollect = 0;
  /** What a chunk is read into before it is copied into its message: one buffer for every chunk. */
  private readonly readBuffer = new Uint8Array(chunkBytes);
  /** Checks of this node's own images in progress, by directory (see checkImage). */
  private readonly checks = new Map<string, Promise<void>>();

  constructor(
    private readonly transport: PeerNetwork,
    private readonly snapshots: SnapshotStore,
    private readonly logger: Logger,
    private readonly metrics: TransferMetrics,
    private readonly finished: (peer: string, ok: boolean) => void,
    private readonly nowMs: () => number,
    private readonly garbage: SenderGarbage | null = null,
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
      lastProgressMs: this.nowMs(),
      lastAdvanceMs: this.nowMs(),
      lastRewindMs: Number.NEGATIVE_INFINITY,
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
    stream.lastProgressMs = this.nowMs();
    if (ack.status === "done") {
      this.logger.info("snapshot delivered", { peer: from, index: ack.index });
      this.metrics.progressBytes.set(stream.totalBytes);
      this.metrics.transfers.labels("sent_ok").inc();
      this.close(from, stream);
      this.finished(from, true);
      return;
    }
    if (ack.status === "failed") {
      this.logger.warn("follower rejected the snapshot", { peer: from, reason: ack.reason });
      this.metrics.transfers.labels("sent_failed").inc();
      this.close(from, stream);
      if (ack.reason === checksumMismatch) {
        // The chunks arrived as read (each has its CRC): the image on this node's disk may be
        // what is damaged. Sending it again would fail again, forever.
        void this.checkImage(stream.path).finally(() => this.finished(from, false));
      } else {
        this.finished(from, false);
      }
      return;
    }
    // The follower says what it holds: continue from there (a resumed or repaired stream).
    if (ack.receivedBytes > stream.ackedBytes) {
      stream.lastAdvanceMs = stream.lastProgressMs;
    } else if (ack.receivedBytes < stream.nextOffset && stream.lastProgressMs - stream.lastRewindMs >= resendAfterMs) {
      // No advance while chunks past it are out: the follower got one it could not use (out of
      // order: those before it were lost with a connection, or it restarted). Send again from
      // what it holds, once (see lastRewindMs): the other chunks of the window say the same.
      stream.nextOffset = ack.receivedBytes;
      stream.lastRewindMs = stream.lastProgressMs;
    }
    stream.ackedBytes = ack.receivedBytes;
    if (ack.receivedBytes < stream.nextOffset - windowChunks * chunkBytes || ack.receivedBytes > stream.nextOffset) stream.nextOffset = ack.receivedBytes;
    this.metrics.progressBytes.set(ack.receivedBytes);
    this.pump(from, stream);
  }

  /**
   * Called on every tick: send again what a stream's follower has not acknowledged for a while
   * (resendAfterMs); abandon streams whose follower has not answered at all for stallTimeoutMs.
   */
  checkStalls(nowMs: number): void {
    for (const [peer, stream] of this.streams) {
      if (nowMs - stream.lastProgressMs < stallTimeoutMs) {
        if (nowMs - stream.lastAdvanceMs >= resendAfterMs && nowMs - stream.lastRewindMs >= resendAfterMs) {
          // Chunks lost with a connection, or never queued (no link then): the follower only
          // answers chunks, so nothing else would restart the stream before it is abandoned.
          stream.nextOffset = stream.ackedBytes;
          stream.lastRewindMs = nowMs;
          this.pump(peer, stream);
        }
        continue;
      }
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
      const data = this.readBuffer.subarray(0, Math.max(0, length));
      if (length > 0) fs.readSync(stream.fd, data, 0, length, stream.nextOffset);
      const header: ChunkHeader = {
        from: m.from, to: m.to, term: m.term, meta: m.snapshot, clusterId: stream.clusterId, createdAt: stream.createdAt,
        sha256: stream.sha256, totalBytes: stream.totalBytes, offset: stream.nextOffset, crc32: Bun.hash.crc32(data) >>> 0,
      };
      if (!this.transport.send(peer, MessageType.snapshotChunk, encodeChunk(header, data), { bulk: true })) break;
      this.metrics.sentBytes.inc(length);
      stream.nextOffset += Math.max(length, 1);
      this.sentSinceCollect += length;
      if (this.garbage !== null && this.sentSinceCollect >= this.garbage.everyBytes) {
        this.sentSinceCollect = 0;
        this.garbage.collect();
      }
      if (stream.totalBytes === 0) break;
    }
  }

  /**
   * Hash the image at `statePath` against its meta.json; a damaged one is removed, so that the
   * next attempt sends a new image (made then, when no other covers what the follower needs).
   * Followers that reject the same image at once share one check.
   */
  private checkImage(statePath: string): Promise<void> {
    const dir = dirname(statePath);
    let check = this.checks.get(dir);
    if (check === undefined) {
      check = this.checkImageNow(dir).finally(() => this.checks.delete(dir));
      this.checks.set(dir, check);
    }
    return check;
  }

  private async checkImageNow(dir: string): Promise<void> {
    const entry = this.snapshots.list().find((e) => e.dir === dir);
    if (entry === undefined) return;
    try {
      const stateFile = join(dir, snapshotStateFile);
      const before = fs.statSync(stateFile, { throwIfNoEntry: false });
      const verdict = await verifySnapshot(entry);
      if (verdict.ok) return;
      // Replaced meanwhile by a sound image of the same index (SnapshotStore.commit): that one stays.
      if (before === undefined || fs.statSync(stateFile, { throwIfNoEntry: false })?.ino !== before.ino) return;
      this.logger.error("this node's snapshot image is damaged: removed; a new image is made for the follower", { dir, reason: verdict.reason });
      await this.snapshots.removeWhole(dir);
    } catch (e) {
      this.logger.error("could not check this node's snapshot image", { dir, error: errorMessage(e) });
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
