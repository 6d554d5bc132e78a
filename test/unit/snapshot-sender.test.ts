// The leader's side of a snapshot transfer: chunks lost with a connection (the follower
// restarted mid-stream, or the link dropped and came back) are sent again from what the
// follower holds within seconds, not after the stream is abandoned as stalled.

import { describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { PeerNetwork } from "../../src/io/index.ts";
import { SnapshotSender } from "../../src/node/snapshot-sender.ts";
import { chunkBytes, decodeChunk, resendAfterMs, stallTimeoutMs, windowChunks, type Ack, type SnapshotMessage, type TransferMetrics } from "../../src/node/_snapshot-wire.ts";
import { snapshotDirName, snapshotStateFile, type SnapshotStore } from "../../src/storage/index.ts";
import { silentLogger } from "../../src/util/logger.ts";

const meta = { index: 42, term: 3, membership: { voters: ["node1", "node2"], learners: [] } };

function setUp() {
  const dir = fs.mkdtempSync(join(tmpdir(), "svc-send-"));
  const imageDir = join(dir, snapshotDirName(meta.term, meta.index));
  fs.mkdirSync(imageDir);
  const totalBytes = 10 * chunkBytes + 123;
  fs.writeFileSync(join(imageDir, snapshotStateFile), new Uint8Array(totalBytes).fill(7));
  const snapshots = {
    dir,
    list: () => [{ dir: imageDir, index: meta.index, term: meta.term, meta: { stateSha256: "00", clusterId: "c-1", createdAt: new Date(0).toISOString() } }],
  } as unknown as SnapshotStore;
  /** Offsets of the chunks sent, in order. */
  const sent: number[] = [];
  let linkUp = true;
  const network = {
    send: (_to: string, _type: number, payload: Uint8Array) => {
      if (!linkUp) return false;
      sent.push(decodeChunk(payload)?.header.offset ?? -1);
      return true;
    },
  } as unknown as PeerNetwork;
  const counter = { inc: () => undefined, labels: () => counter };
  const gauge = { set: () => undefined };
  const metrics = { sentBytes: counter, transfers: counter, inProgress: gauge, progressBytes: gauge, totalBytes: gauge } as unknown as TransferMetrics;
  let nowMs = 1_000;
  const finished: boolean[] = [];
  const sender = new SnapshotSender(network, snapshots, silentLogger, metrics, (_peer, ok) => finished.push(ok), () => nowMs);
  const message = { type: "snapshot", from: "node1", to: "node2", term: 3, snapshot: meta } as SnapshotMessage;
  const ack = (receivedBytes: number): void =>
    sender.onAck("node2", new TextEncoder().encode(JSON.stringify({ term: meta.term, index: meta.index, receivedBytes, status: "progress" } satisfies Ack)));
  return {
    sender, message, sent, finished, totalBytes, ack,
    advance: (ms: number) => {
      nowMs += ms;
      sender.checkStalls(nowMs);
    },
    setLink: (up: boolean) => {
      linkUp = up;
    },
    cleanUp: () => {
      sender.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

describe("snapshot sender", () => {
  test("a follower restarted mid-stream is sent the rest from what it holds within seconds, not after the stall timeout", async () => {
    const s = setUp();
    try {
      await s.sender.start(s.message);
      expect(s.sent).toEqual([0, 1, 2, 3].map((i) => i * chunkBytes));
      // Two chunks arrive and are acknowledged; the window moves on.
      s.ack(chunkBytes);
      s.ack(2 * chunkBytes);
      expect(s.sent.slice(4)).toEqual([4, 5].map((i) => i * chunkBytes));
      // The follower restarts: what was in flight (chunks 2..5) is lost, and it answers nothing.
      s.sent.length = 0;
      s.advance(resendAfterMs - 1);
      expect(s.sent).toEqual([]);
      s.advance(1);
      expect(s.sent).toEqual([2, 3, 4, 5].map((i) => i * chunkBytes));
      expect(s.finished).toEqual([]);
      // A slow link, not a lost one: the first sending's chunks arrive late, each answered with
      // what the follower holds. The window just sent again is not sent a third time.
      s.ack(2 * chunkBytes);
      s.ack(2 * chunkBytes);
      expect(s.sent.length).toBe(4);
    } finally {
      s.cleanUp();
    }
  });

  test("a follower that answers a chunk it cannot use (those before it were lost) is sent the stream again from what it holds, once per window", async () => {
    const s = setUp();
    try {
      await s.sender.start(s.message);
      s.ack(chunkBytes);
      s.sent.length = 0;
      // Chunk 1 was lost with a connection; chunks 2, 3 and 4 arrive and each is answered with
      // what the follower holds: 1 MiB.
      s.ack(chunkBytes);
      expect(s.sent).toEqual([1, 2, 3, 4].map((i) => i * chunkBytes));
      s.ack(chunkBytes);
      s.ack(chunkBytes);
      expect(s.sent.length).toBe(windowChunks);
      // The resent chunks arrive: the stream goes on.
      s.ack(2 * chunkBytes);
      expect(s.sent.at(-1)).toBe(5 * chunkBytes);
    } finally {
      s.cleanUp();
    }
  });

  test("chunks that could not be queued (no link) go out once the link is back; a follower that never answers is abandoned after the stall timeout", async () => {
    const s = setUp();
    try {
      s.setLink(false);
      await s.sender.start(s.message);
      expect(s.sent).toEqual([]);
      s.setLink(true);
      s.advance(resendAfterMs);
      expect(s.sent).toEqual([0, 1, 2, 3].map((i) => i * chunkBytes));
      for (let waited = resendAfterMs; waited < stallTimeoutMs; waited += resendAfterMs) s.advance(resendAfterMs);
      expect(s.finished).toEqual([false]);
    } finally {
      s.cleanUp();
    }
  });
});
