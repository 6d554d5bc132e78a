// Proposing a command to the Raft core and waiting until its entry is applied: the write
// path's one door. Errors say whether the write can have happened (NOT_LEADER, OVERLOADED:
// it did not) or not known (WRITE_TIMEOUT), and are counted by code.

import { SvcError } from "../util/errors.ts";
import type { ApplyResult } from "../store/index.ts";
import type { NodeContext } from "./context.ts";

export class Proposer {
  constructor(private readonly ctx: NodeContext, private readonly schedule: () => void) {}

  /** `timestampMs`: the entry's time, when it was fixed before (a checked write); else now. */
  async propose(data: Uint8Array, timestampMs?: number): Promise<{ applyResult: ApplyResult; index: number }> {
    const { ctx } = this;
    const startedMs = ctx.clock.monotonicMs();
    const r = ctx.core.propose(data, timestampMs ?? ctx.clock.nowMs());
    if (!r.ok) throw this.proposeError(r);
    this.schedule();
    try {
      const applyResult = await ctx.waiters.wait(r.index, r.term, ctx.clock.nowMs());
      ctx.metrics.writeLatency.observe((ctx.clock.monotonicMs() - startedMs) / 1000);
      return { applyResult, index: r.index };
    } catch (e) {
      if (e instanceof SvcError) ctx.metrics.writeErrorsTotal.labels(e.code).inc();
      throw e;
    }
  }

  /** The core has work (a transfer, a membership change): run the loop. */
  scheduled(): void {
    this.schedule();
  }

  proposeError(r: { readonly code: "NOT_LEADER"; readonly leaderId: string | null } | { readonly code: "PROPOSALS_FULL" }): SvcError {
    if (r.code === "NOT_LEADER") return this.ctx.notLeader(r.leaderId);
    return new SvcError("OVERLOADED", "too many writes are waiting to commit", { hint: "retry after a short wait; add back-pressure in the client" });
  }
}
