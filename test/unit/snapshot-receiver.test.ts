// The follower's side of a snapshot transfer, where a peer controls what arrives: a malformed
// chunk is dropped and logged at most once per peer every 10 s, however fast they come.

import { describe, expect, test } from "bun:test";
import type { Clock, PeerNetwork } from "../../src/io/index.ts";
import { SnapshotReceiver } from "../../src/node/snapshot-receiver.ts";
import type { TransferMetrics } from "../../src/node/_snapshot-wire.ts";
import type { SnapshotStore } from "../../src/storage/index.ts";
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
