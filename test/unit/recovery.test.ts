// The recovery flow (SPEC §3.1) as a table: every SPEC row is an edge, every state can be
// reached from starting and can reach healthy, and an event a state has no edge for is refused.

import { describe, expect, test } from "bun:test";
import { nextRecoveryState, recoveryEdges, recoveryStates, type RecoveryState } from "../../src/node/index.ts";

describe("recovery flow", () => {
  test("every row of SPEC §3.1 is an allowed transition", () => {
    const spec: [RecoveryState, RecoveryState][] = [
      ["starting", "replaying_wal"],
      ["starting", "requesting_snapshot"],
      ["replaying_wal", "joining"],
      ["requesting_snapshot", "installing_snapshot"],
      ["installing_snapshot", "replaying_after_snapshot"],
      ["replaying_after_snapshot", "joining"],
      ["joining", "healthy"],
    ];
    for (const [from, to] of spec) expect(recoveryEdges.some((e) => e.from === from && e.to === to)).toBe(true);
    // "Replay WAL, node is not caught up → Request Snapshot": the leader's snapshot starts arriving.
    expect(nextRecoveryState("replaying_wal", "snapshot_transfer_started")).toBe("installing_snapshot");
  });

  test("the edges SPEC leaves out are listed: the log sent instead of a snapshot, an empty WAL tail", () => {
    expect(nextRecoveryState("requesting_snapshot", "log_received")).toBe("joining");
    expect(nextRecoveryState("starting", "wal_empty")).toBe("joining");
    expect(nextRecoveryState("installing_snapshot", "snapshot_transfer_abandoned")).toBe("joining");
  });

  test("an event a state has no edge for is refused", () => {
    expect(nextRecoveryState("healthy", "wal_found")).toBeNull();
    expect(nextRecoveryState("starting", "caught_up")).toBeNull();
    expect(nextRecoveryState("requesting_snapshot", "replay_done")).toBeNull();
    expect(nextRecoveryState("healthy", "caught_up")).toBeNull();
  });

  test("every edge says why it exists, and no (state, event) pair has two edges", () => {
    const seen = new Set<string>();
    for (const e of recoveryEdges) {
      expect(e.why.length).toBeGreaterThan(10);
      const key = `${e.from}/${e.on}`;
      expect(seen.has(key)).toBe(false);
      seen.add(key);
    }
  });

  test("every state is reachable from starting and can reach healthy", () => {
    const reach = (from: RecoveryState, forward: boolean): Set<RecoveryState> => {
      const out = new Set<RecoveryState>([from]);
      for (let changed = true; changed;) {
        changed = false;
        for (const e of recoveryEdges) {
          const [a, b] = forward ? [e.from, e.to] : [e.to, e.from];
          if (out.has(a) && !out.has(b)) {
            out.add(b);
            changed = true;
          }
        }
      }
      return out;
    };
    expect([...reach("starting", true)].sort()).toEqual([...recoveryStates].sort());
    expect([...reach("healthy", false)].sort()).toEqual([...recoveryStates].sort());
  });
});
