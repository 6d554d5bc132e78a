// Clients waiting for their entry to be applied, keyed by log index. An entry is only
// answered once applied; if a different entry (another term) is applied at its index, a new
// leader replaced it and the client is told its write did not happen.

import type { ApplyResult } from "../store/index.ts";
import { SvcError } from "../util/errors.ts";

interface Waiter {
  term: number;
  startedMs: number;
  resolve: (result: ApplyResult) => void;
  reject: (error: SvcError) => void;
}

export class ApplyWaiters {
  private readonly byIndex = new Map<number, Waiter>();

  get size(): number {
    return this.byIndex.size;
  }

  wait(index: number, term: number, nowMs: number): Promise<ApplyResult> {
    return new Promise((resolve, reject) => {
      this.byIndex.set(index, { term, startedMs: nowMs, resolve, reject });
    });
  }

  /** An entry was applied: answer whoever waits for its index. Returns whether a client was answered. */
  applied(index: number, term: number, result: ApplyResult): boolean {
    const waiter = this.byIndex.get(index);
    if (waiter === undefined) return false;
    this.byIndex.delete(index);
    if (waiter.term === term) {
      waiter.resolve(result);
    } else {
      waiter.reject(new SvcError("ENTRY_REPLACED", "the write was not committed: a new leader replaced it before it reached a quorum", {
        hint: "retry the write",
      }));
    }
    return waiter.term === term;
  }

  /**
   * Fail everyone still waiting (shutdown, storage failure). Their entries are in the log and
   * may have reached other members, which can still commit them: the outcome is unknown.
   */
  failAll(error: SvcError): void {
    this.failAbove(0, error);
  }

  /** failAll for the writes past `index` only (those at or below it are committed, and will apply). */
  failAbove(index: number, error: SvcError): void {
    for (const [at, waiter] of this.byIndex) {
      if (at <= index) continue;
      this.byIndex.delete(at);
      waiter.reject(new SvcError("OUTCOME_UNKNOWN", `${error.message} while the write (log index ${at}) waited to be applied; it may or may not be applied`, {
        hint: "retry with the same request_id (applied at most once), or read back whether it was applied before retrying a write that is not idempotent",
        cause: error,
      }));
    }
  }

  /** Fail waiters older than the deadline: their outcome is unknown, not failed. */
  expire(nowMs: number, timeoutMs: number): number {
    let expired = 0;
    for (const [index, waiter] of this.byIndex) {
      if (nowMs - waiter.startedMs < timeoutMs) continue;
      this.byIndex.delete(index);
      waiter.reject(new SvcError("WRITE_TIMEOUT", `the write (log index ${index}) was not applied within ${timeoutMs} ms; it may still be applied later`, {
        hint: "check cluster health (`svc admin cluster-status`), then retry with the same request_id (applied at most once), or read back before retrying a write that is not idempotent",
      }));
      expired++;
    }
    return expired;
  }
}
