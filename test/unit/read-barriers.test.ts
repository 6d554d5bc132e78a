// Linearizable reads wait for a confirmed read index to be applied; a node that stops applying
// (cut off from its leader, or removed from the cluster) must still answer them, in bounded time.

import { describe, expect, test } from "bun:test";
import type { RaftCore } from "../../src/raft/index.ts";
import { ReadBarriers } from "../../src/node/reads.ts";
import { SvcError } from "../../src/util/errors.ts";

function barriers(clock: { ms: number }, applyTimeoutMs: number): ReadBarriers {
  const core = { readIndex: () => ({ ok: true }) } as unknown as RaftCore;
  return new ReadBarriers(core, {
    notLeader: () => new SvcError("NOT_LEADER", "not the leader", { hint: "retry" }),
    started: () => undefined,
  }, 2_000, () => clock.ms, applyTimeoutMs);
}

describe("read barriers", () => {
  test("a confirmed read this node never applies fails with READ_TIMEOUT after query_timeout_ms, naming the indexes", async () => {
    const clock = { ms: 0 };
    const reads = barriers(clock, 5_000);
    const read = reads.wait();
    reads.confirmed(1, 10);
    clock.ms = 4_999;
    reads.expire(clock.ms, "n1", 7);
    reads.applied(7);
    clock.ms = 5_000;
    reads.expire(clock.ms, "n1", 7);
    const error = await read.then(() => null, (e: unknown) => e);
    expect(error).toBeInstanceOf(SvcError);
    expect((error as SvcError).code).toBe("READ_TIMEOUT");
    expect((error as SvcError).message).toContain("commit index 10");
    expect((error as SvcError).message).toContain("it is at 7");
  });

  test("an unbounded wait (the catch-up probe) outlives the apply time-out; a client read does not", async () => {
    const clock = { ms: 0 };
    const reads = barriers(clock, 5_000);
    const probe = reads.wait({ unbounded: true }).then(() => "served");
    const client = reads.wait().then(() => "served", (e: unknown) => (e as SvcError).code);
    reads.confirmed(1, 10);
    reads.applied(7); // starts the client's round
    reads.confirmed(2, 11);
    clock.ms = 60_000;
    reads.expire(clock.ms, "n1", 7);
    expect(await client).toBe("READ_TIMEOUT");
    reads.applied(10);
    expect(await probe).toBe("served");
  });

  test("a confirmed read is served once applied, before its time runs out", async () => {
    const clock = { ms: 0 };
    const reads = barriers(clock, 5_000);
    const read = reads.wait();
    reads.confirmed(1, 10);
    clock.ms = 1_000;
    reads.applied(10);
    expect(await read.then(() => "served")).toBe("served");
  });
});
