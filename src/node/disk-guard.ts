// A full disk stops the effect loop, not the node. The free space is compared with a reserve
// every few ticks; below it the node is in the disk-full state (writes refused, reads served,
// no campaigning when another voter could lead, a leader hands over). A Ready whose append,
// hard state or apply failed for want of space is kept and retried every second from the step
// that failed (the WAL and the store undo a failed write, so a retry starts from the same
// state); nothing after it happens until it succeeds.

import type { Timer } from "../io/index.ts";
import type { Ready } from "../raft/index.ts";
import { errorMessage } from "../util/errors.ts";
import { diskReserveBytes, type NodeContext } from "./context.ts";

/** Where a Ready's effects start again: its persisting, or its applying. */
export type Stage = "persist" | "apply";

/** How often a Ready stalled on a full disk is retried. */
const diskRetryMs = 1_000;
/** How often the free space is compared with the reserve (a statfs: about a microsecond). */
const diskCheckMs = 200;
/** How often a leader whose disk is full tries to hand leadership to another voter. */
const diskHandOffMs = 10_000;

export interface DiskGuardHooks {
  /** Take a stalled Ready through its effects again; true when it is done. */
  retry(rd: Ready, stage: Stage): boolean;
  processReady(): void;
  schedule(): void;
}

export class DiskGuard {
  /**
   * A Ready whose persisting or applying failed for want of disk space, and the step to retry
   * it from. While set, no other Ready is taken and the core is not ticked.
   */
  stalled: { rd: Ready; stage: Stage } | null = null;
  private stallTimer: Timer | null = null;
  private lastDiskCheckMs = Number.NEGATIVE_INFINITY;
  private lastHandOffMs = Number.NEGATIVE_INFINITY;
  /** The current stall was logged (once per stall, however many retries fail). */
  private stallTold = false;

  constructor(private readonly ctx: NodeContext, private readonly hooks: DiskGuardHooks) {}

  stop(): void {
    this.stallTimer?.cancel();
    this.stallTimer = null;
  }

  /** A node whose disk is full does not campaign when others could lead: elected, it could not take writes. */
  holdsElection(): boolean {
    const { ctx } = this;
    if (ctx.diskFull === null) return false;
    const status = ctx.core.status();
    return status.role !== "leader" && status.membership.voters.length > 1;
  }

  /** Compare the free space with the reserve (every few ticks); enter or leave the state. */
  check(): void {
    const { ctx } = this;
    const space = ctx.io.diskSpace;
    if (space === undefined) return;
    const now = ctx.clock.monotonicMs();
    if (now - this.lastDiskCheckMs < diskCheckMs) return;
    this.lastDiskCheckMs = now;
    const free = space.freeBytes();
    if (free === null) return;
    if (free < diskReserveBytes(ctx.config.wal.segmentSizeBytes)) {
      ctx.enterDiskFull({ path: space.path, bytesFree: free, cause: this.stalled !== null ? "write_failed" : "below_reserve" });
      this.handOffLeadership(now);
    } else if (this.stalled === null) {
      ctx.leaveDiskFull(free);
    }
  }

  /** A leader whose disk is full asks the most caught-up other voter to take over. */
  private handOffLeadership(now: number): void {
    const { ctx } = this;
    const status = ctx.core.status();
    if (status.role !== "leader" || now - this.lastHandOffMs < diskHandOffMs) return;
    let best: string | null = null;
    let bestMatch = -1;
    for (const id of status.membership.voters) {
      const match = status.progress[id]?.match ?? -1;
      if (id !== ctx.config.nodeId && status.progress[id]?.diskFull !== true && match > bestMatch) {
        best = id;
        bestMatch = match;
      }
    }
    if (best === null) return;
    this.lastHandOffMs = now;
    ctx.logger.info("disk full: handing leadership to another voter", { to: best });
    ctx.core.transferLeadership(best);
    this.hooks.schedule();
  }

  /** Keep a Ready that failed for want of space, and retry it every second. */
  stall(rd: Ready, stage: Stage, e: unknown): void {
    const { ctx } = this;
    if (!this.stallTold) {
      this.stallTold = true;
      ctx.logger.warn("disk full: a write failed for want of space; this node takes no more entries until it has room (tried again every second)", {
        stage, error: errorMessage(e),
        hint: "free space on the data directory's disk; a follower keeps answering the leader meanwhile, and catches up by itself once the write goes through",
      });
    }
    this.stalled = { rd, stage };
    const path = (e as { path?: unknown }).path;
    ctx.enterDiskFull({
      path: typeof path === "string" ? path : stage === "apply" ? ctx.config.dataDir : ctx.io.diskSpace?.path ?? ctx.config.dataDir,
      bytesFree: ctx.io.diskSpace?.freeBytes() ?? null,
      cause: "write_failed",
    }, e);
    this.stallTimer ??= ctx.clock.after(diskRetryMs, () => this.retryStalled());
  }

  private retryStalled(): void {
    const { ctx } = this;
    this.stallTimer = null;
    const stalled = this.stalled;
    if (stalled === null || ctx.stopped || ctx.fatalError !== null) return;
    this.stalled = null;
    let done: boolean;
    try {
      done = this.hooks.retry(stalled.rd, stalled.stage);
    } catch (e) {
      ctx.fail(e);
      return;
    }
    if (this.stalled !== null) return;
    // Past the step that failed (a sync may still be in flight: it goes on by itself).
    this.stallTold = false;
    ctx.logger.info("disk full: the stalled write went through", { stage: stalled.stage });
    this.lastDiskCheckMs = Number.NEGATIVE_INFINITY;
    if (ctx.io.diskSpace === undefined) ctx.leaveDiskFull(null);
    else this.check();
    if (done) this.hooks.processReady();
  }
}
