// PeerMessages paces what it encodes: a Ready whose appends carry more than a turn's worth of
// entry bytes is sent over the turns that follow, in order, and messages of later Readies wait
// behind it.

import { describe, expect, test } from "bun:test";
import { ManualClock } from "../../src/io/index.ts";
import { decodeMessage, type Entry, type Message } from "../../src/raft/index.ts";
import type { NodeContext } from "../../src/node/context.ts";
import { PeerMessages, sendEntryBytesPerTurnMax } from "../../src/node/peer-messages.ts";
import type { SnapshotPolicy } from "../../src/node/snapshot-policy.ts";
import { silentLogger } from "../../src/util/index.ts";

function append(firstIndex: number, dataBytes: number): Message {
  const entries: Entry[] = [{ term: 1, index: firstIndex, kind: "normal", timestampMs: 1, data: new Uint8Array(dataBytes) }];
  return { type: "append", from: "n1", to: "n2", term: 1, prevIndex: firstIndex - 1, prevTerm: 1, commit: 0, entries };
}

function heartbeat(): Message {
  return { type: "heartbeat", from: "n1", to: "n2", term: 1, commit: 0, readSeq: 0 };
}

function harness() {
  const clock = new ManualClock();
  const sent: string[] = [];
  let scheduled = 0;
  // Only what PeerMessages.send touches: the clock, the network, the stop flags and the trace logger.
  const ctx = {
    clock,
    raftLogger: silentLogger,
    stopped: false,
    fatalError: null,
    io: {
      network: {
        send: (_to: string, _type: number, payload: Uint8Array) => {
          const d = decodeMessage(payload);
          if (!d.ok) throw new Error("undecodable");
          sent.push(d.message.type === "append" ? `append ${d.message.entries[0]!.index}` : d.message.type);
          return true;
        },
      },
    },
    core: { reportUnreachable: () => {} },
  } as unknown as NodeContext;
  const peers = new PeerMessages(ctx, {} as SnapshotPolicy, () => null, () => scheduled++, () => false);
  return { clock, sent, peers, scheduled: () => scheduled };
}

describe("peer message pacing", () => {
  test("appends beyond a turn's worth of entry bytes go out in the next turns, in order, later messages behind them", () => {
    const { clock, sent, peers, scheduled } = harness();
    const size = Math.floor(sendEntryBytesPerTurnMax * 0.6);
    peers.send([append(1, size), append(2, size), append(3, size), append(4, size), heartbeat()]);
    expect(sent).toEqual(["append 1", "append 2"]);
    peers.send([append(5, 10)]);
    expect(sent).toEqual(["append 1", "append 2"]);
    clock.runSoon();
    expect(sent).toEqual(["append 1", "append 2", "append 3", "append 4"]);
    clock.runSoon();
    expect(sent).toEqual(["append 1", "append 2", "append 3", "append 4", "heartbeat", "append 5"]);
    expect(clock.hasSoon).toBe(false);
    expect(scheduled()).toBe(2);
    // Nothing deferred any more: the next Ready goes out at once.
    peers.send([heartbeat()]);
    expect(sent.at(-1)).toBe("heartbeat");
  });

  test("small messages go out in the same turn however many there are", () => {
    const { clock, sent, peers } = harness();
    peers.send(Array.from({ length: 100 }, () => heartbeat()));
    expect(sent.length).toBe(100);
    expect(clock.hasSoon).toBe(false);
  });
});
