// Linearizable reads by ReadIndex, batched: every read waiting when a round starts shares
// that round; reads that arrive during it wait for the next (a round proves leadership only
// as of when it began). A read is served once the store has applied the round's index.

import type { RaftCore } from "../raft/index.ts";
import { SvcError } from "../util/errors.ts";

const pendingReadsMax = 100_000;

interface PendingRead {
  resolve: () => void;
  reject: (e: SvcError) => void;
  /** Failed when not applied within applyTimeoutMs (a client's read; not the catch-up probe). */
  bounded: boolean;
}

export interface ReadBarrierHooks {
  /** The error for "this node cannot get a read index": names the leader when known. */
  notLeader(leaderId: string | null): SvcError;
  /** A round was started: the node must run its Ready loop. */
  started(): void;
}

export class ReadBarriers {
  private inFlight: { id: number; reads: PendingRead[]; startedMs: number } | null = null;
  private notYetIssued: PendingRead[] = [];
  private awaitingApply: { index: number; reads: PendingRead[]; confirmedMs: number }[] = [];
  private nextId = 1;

  constructor(
    private readonly core: RaftCore,
    private readonly hooks: ReadBarrierHooks,
    private readonly roundTimeoutMs: number,
    private readonly nowMs: () => number,
    /** How long a confirmed read waits for this node to apply the index (query_timeout_ms). */
    private readonly applyTimeoutMs: number = Number.POSITIVE_INFINITY,
  ) {}

  /**
   * Resolves when a read may be served linearizably from this node's store. `unbounded`: waits
   * for the apply however long it takes (the catch-up probe: a node far behind applies for long).
   */
  wait(options: { unbounded?: boolean } = {}): Promise<void> {
    if (this.notYetIssued.length >= pendingReadsMax) {
      return Promise.reject(new SvcError("OVERLOADED", "too many reads are waiting", { hint: "retry after a short wait" }));
    }
    return new Promise<void>((resolve, reject) => {
      this.notYetIssued.push({ resolve, reject, bounded: options.unbounded !== true });
      if (this.inFlight === null) this.startRound();
    });
  }

  /** The core confirmed a round (Ready.readStates). */
  confirmed(requestId: number, index: number): void {
    const round = this.inFlight;
    if (round === null || round.id !== requestId) return;
    this.inFlight = null;
    this.awaitingApply.push({ index, reads: round.reads, confirmedMs: this.nowMs() });
  }

  /** After applying: serve what is now applied, and start the next round if reads wait. */
  applied(appliedIndex: number): void {
    while (this.awaitingApply.length > 0 && (this.awaitingApply[0]?.index ?? Infinity) <= appliedIndex) {
      for (const read of this.awaitingApply.shift()?.reads ?? []) read.resolve();
    }
    if (this.inFlight === null && this.notYetIssued.length > 0) this.startRound();
  }

  /**
   * A round not confirmed within its time-out will not be: the leader it went to is gone or
   * cut off. Its reads fail (they returned no data) and the next round goes to whoever leads.
   */
  expire(nowMs: number, leaderId: string | null, appliedIndex = 0): void {
    // A node that stopped applying (cut off from its leader, removed from the cluster, or
    // far behind) would hold a confirmed read for ever: it fails, bounded like any read.
    for (const batch of this.awaitingApply) {
      if (nowMs - batch.confirmedMs < this.applyTimeoutMs) break;
      if (!batch.reads.some((r) => r.bounded)) continue;
      const error = new SvcError("READ_TIMEOUT", `this node had not applied the leader's commit index ${batch.index} within ${this.applyTimeoutMs} ms (it is at ${appliedIndex}); the read was not served`, {
        hint: "this node is behind its leader, or no longer receives the log (see its /health): read from another node",
      });
      for (const read of batch.reads) if (read.bounded) read.reject(error);
      batch.reads = batch.reads.filter((r) => !r.bounded);
    }
    this.awaitingApply = this.awaitingApply.filter((b) => b.reads.length > 0);
    const round = this.inFlight;
    if (round === null || nowMs - round.startedMs < this.roundTimeoutMs) return;
    this.inFlight = null;
    const hint = this.hooks.notLeader(leaderId).hint ?? "retry";
    for (const read of round.reads) read.reject(new SvcError("READ_TIMEOUT", "the leader did not confirm its leadership in time; the read was not served", { hint }));
    if (this.notYetIssued.length > 0) this.startRound();
  }

  failAll(error: SvcError): void {
    for (const read of this.inFlight?.reads ?? []) read.reject(error);
    for (const read of this.notYetIssued) read.reject(error);
    for (const batch of this.awaitingApply) for (const read of batch.reads) read.reject(error);
    this.inFlight = null;
    this.notYetIssued = [];
    this.awaitingApply = [];
  }

  private startRound(): void {
    const reads = this.notYetIssued;
    this.notYetIssued = [];
    const id = this.nextId++;
    const r = this.core.readIndex(id);
    if (!r.ok) {
      const error = r.code === "NOT_LEADER" ? this.hooks.notLeader(r.leaderId) : new SvcError("OVERLOADED", "too many reads are waiting");
      for (const read of reads) read.reject(error);
      return;
    }
    this.inFlight = { id, reads, startedMs: this.nowMs() };
    this.hooks.started();
  }
}
