// The follower's side of a snapshot transfer: chunks written in order to a `.recv-` directory
// that survives restarts (a cut stream resumes where it stopped), flushed and hashed off this
// thread once whole, checked against the leader's SHA-256, filed as a snapshot and copied beside
// the store so that installing it is a rename; then the core is handed the snapshot message.

import * as fs from "node:fs";
import { join } from "node:path";
import type { Clock, PeerNetwork } from "../io/index.ts";
import type { SnapshotMeta } from "../raft/types.ts";
import { SnapshotStore, snapshotStateFile } from "../storage/index.ts";
import { Store, sealReceivedImage, stageStoreImage } from "../store/index.ts";
import { MessageType } from "../transport/index.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/logger.ts";
import {
  checksumMismatch, decodeChunk, encoder, finishKeepAliveMs,
  type Ack, type ChunkHeader, type SnapshotMessage, type TransferMetrics,
} from "./_snapshot-wire.ts";

/** A malformed chunk from one peer is logged at most this often (each is dropped). */
const malformedLogEveryMs = 10_000;

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
    private readonly clock: Clock,
  ) {}

  /** When a malformed chunk from each peer was last logged (monotonic ms). */
  private readonly malformedLoggedAtMs = new Map<string, number>();

  onChunk(from: string, payload: Uint8Array): void {
    const chunk = decodeChunk(payload);
    if (chunk === null) {
      // Once every 10 s per peer at most: a peer can send them as fast as it likes.
      const nowMs = this.clock.monotonicMs();
      const last = this.malformedLoggedAtMs.get(from);
      if (last === undefined || nowMs - last >= malformedLogEveryMs) {
        this.malformedLoggedAtMs.set(from, nowMs);
        this.logger.warn("dropped a malformed snapshot chunk (at most one such line per peer every 10 s)", { from });
      }
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
    if (stream.receivedBytes >= header.totalBytes) {
      // Every byte arrived before this node stopped (a stream resumed whole): no chunk is left
      // to write, and a finish that waited for one never came. Verify and install it now; a
      // file that does not match the leader's hash is fetched again.
      void this.finish(stream, header, ack);
      return;
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
    const keepAlive = this.clock.every(finishKeepAliveMs, () => ack("progress", header.totalBytes));
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
        ack("failed", 0, checksumMismatch);
        return;
      }
      const tempDir = this.snapshots.beginTemp();
      fs.renameSync(stream.path, join(tempDir, snapshotStateFile));
      fs.rmSync(stream.dir, { recursive: true, force: true });
      const entry = await this.snapshots.commit(tempDir, {
        clusterId: header.clusterId, index: header.meta.index, term: header.meta.term, membership: header.meta.membership, createdAt: header.createdAt,
        stateSha256: sha,
      });
      if (entry.replacedDamaged !== undefined) this.logger.warn("the snapshot this node held at that index was damaged; replaced by the one received", { dir: entry.dir, reason: entry.replacedDamaged });
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
      keepAlive.cancel();
      this.verifying = false;
    }
  }
}
