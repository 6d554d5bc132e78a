// The follower's side of a snapshot transfer, where a peer controls what arrives: a malformed
// chunk is dropped and logged at most once per peer every 10 s, however fast they come.

import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Clock, PeerNetwork } from "../../src/io/index.ts";
import { SnapshotReceiver } from "../../src/node/snapshot-receiver.ts";
import { encodeChunk, type TransferMetrics } from "../../src/node/_snapshot-wire.ts";
import { SnapshotStore } from "../../src/storage/index.ts";
import { silentLogger, type Logger } from "../../src/util/logger.ts";

describe("snapshot receiver", () => {
  test("malformed chunks are dropped, and logged at most once per peer every 10 s", () => {
    let nowMs = 1_000;
    const warnings: { message: string; from: unknown }[] = [];
    const logger: Logger = { ...silentLogger, warn: (message, fields) => warnings.push({ message, from: fields?.["from"] }), child: () => logger };
    const sent: unknown[] = [];
    const network = { send: (...args: unknown[]) => sent.push(args) } as unknown as PeerNetwork;
    const clock = { monotonicMs: () => nowMs } as unknown as Clock;
    let started = 0;
    const receiver = new SnapshotReceiver(network, {} as SnapshotStore, "/nonexistent/state.db", logger, {} as TransferMetrics,
      () => {
        throw new Error("nothing malformed completes");
      },
      () => started++, () => 0, clock);
    const garbage = new Uint8Array(64).fill(0xee);
    for (let i = 0; i < 20_000; i++) receiver.onChunk("node2", garbage);
    receiver.onChunk("node3", new Uint8Array(0));
    expect(warnings.map((w) => w.from)).toEqual(["node2", "node3"]);
    nowMs += 9_999;
    receiver.onChunk("node2", garbage);
    expect(warnings.length).toBe(2);
    nowMs += 1;
    receiver.onChunk("node2", garbage);
    expect(warnings.map((w) => w.from)).toEqual(["node2", "node3", "node2"]);
    expect(warnings[0]?.message).toContain("malformed snapshot chunk");
    // Nothing was answered, started or written for them.
    expect(sent).toEqual([]);
    expect(started).toBe(0);
    expect(receiver.busy(0)).toBe(false);
  });
});

describe("snapshot receiver, a stream resumed whole", () => {
  test("an image every byte of which arrived before a restart is verified and installed at the leader's next chunk, not left waiting", async () => {
    const dir = fs.mkdtempSync(join(tmpdir(), "svc-recv-"));
    try {
      const snapshotsDir = join(dir, "raft", "snapshots");
      fs.mkdirSync(snapshotsDir, { recursive: true });
      const storePath = join(dir, "store", "state.db");
      fs.mkdirSync(join(dir, "store"), { recursive: true });
      // A real image (a store file), as the leader would stream it.
      const imagePath = join(dir, "image.db");
      const db = new Database(imagePath, { create: true });
      db.run("CREATE TABLE t (x)");
      db.run("INSERT INTO t VALUES (1)");
      db.close();
      const image = new Uint8Array(fs.readFileSync(imagePath));
      const meta = { index: 42, term: 3, membership: { voters: ["node1", "node2"], learners: [] } };
      const header = {
        from: "node1", to: "node2", term: 3, meta, clusterId: "c-1", createdAt: new Date().toISOString(),
        sha256: new Bun.CryptoHasher("sha256").update(image).digest("hex"), totalBytes: image.length,
      };
      // What a node killed just after the last chunk was written leaves behind.
      fs.mkdirSync(join(snapshotsDir, ".recv-3-42"), { recursive: true });
      fs.writeFileSync(join(snapshotsDir, ".recv-3-42", "state.db"), image);

      const acks: string[] = [];
      const network = { send: (_to: string, _type: number, payload: Uint8Array) => acks.push(JSON.parse(new TextDecoder().decode(payload)).status) } as unknown as PeerNetwork;
      const clock = { monotonicMs: () => 0, every: () => ({ cancel: () => undefined }) } as unknown as Clock;
      const counter = { inc: () => undefined, labels: () => counter };
      const gauge = { set: () => undefined };
      const metrics = { receivedBytes: counter, transfers: counter, progressBytes: gauge, totalBytes: gauge } as unknown as TransferMetrics;
      const completed: number[] = [];
      const receiver = new SnapshotReceiver(network, new SnapshotStore(snapshotsDir), storePath, silentLogger, metrics,
        (m) => completed.push(m.snapshot.index), () => undefined, () => 0, clock);
      // The leader resumes from where it last heard: the first chunk again.
      const first = image.subarray(0, Math.min(image.length, 4096));
      receiver.onChunk("node1", encodeChunk({ ...header, offset: 0, crc32: Bun.hash.crc32(first) >>> 0 }, first));
      await waitUntil(() => completed.length > 0 || acks.includes("failed"));
      expect(completed).toEqual([42]);
      expect(acks.at(-1)).toBe("done");
      expect(new SnapshotStore(snapshotsDir).list().map((e) => e.meta?.index)).toEqual([42]);
      expect(receiver.busy(0)).toBe(false);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

async function waitUntil(done: () => boolean): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!done()) {
    if (Date.now() > deadline) throw new Error("gave up waiting");
    await Bun.sleep(10);
  }
}
