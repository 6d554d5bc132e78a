// The write path's guard against statements that never end: a write batch enters the log only
// once it is known to finish. A plain batch (write-shape.ts: INSERT … VALUES, UPDATE/DELETE
// … WHERE c = v, with no trigger in the store) is bounded by its own size and goes straight
// to the proposer. Any other batch is first run, in a SQL process the node can kill, as the
// very entry it would become: on the state it will apply to (the gate waits until the log
// holds nothing unapplied, and holds back other writes until the entry is applied), with its
// index, term and timestamp (so random() and 'now' match). It must finish within
// write_check_timeout_ms, or it is refused (WRITE_TOO_EXPENSIVE) and never logged.
//
// The entry carries the index it was checked as; the store fails it, identically on every
// node, if it lands anywhere else. So every replica applies a checked entry to the same state
// the leader tried it on, doing the same work — see the README's "Bounded statements".

import { SvcError } from "../util/errors.ts";
import {
  answerOf, encodeCommand, isPlainWrite, requestBodyHash, requestIdReusedMessage, reusedFor, type ApplyResult, type CheckVerdict, type Command, type SqlProcessPool, type Statement,
} from "../store/index.ts";
import type { NodeContext } from "./context.ts";
import type { Proposer } from "./proposer.ts";

/** Tries before giving up when the log moved under a check (a new term, a config entry). */
const checkAttemptsMax = 3;
/** How long a checked write waits for the log to be applied before it is tried. */
const drainWaitMsMax = 10_000;
const drainPollMs = 1;

export class WriteGate {
  /** Settles when the checked write in progress has been applied (or failed). */
  private held: Promise<void> | null = null;
  /**
   * Entries up to here may hold anything (a new term's inherited log, a checked write): writes
   * are checked until they are applied.
   */
  private uncheckedUpTo = 0;
  private termSeen = -1;

  constructor(
    private readonly ctx: NodeContext,
    private readonly proposer: Proposer,
    /** Null where statements cannot be tried in another process (an in-memory store). */
    private readonly checker: () => SqlProcessPool | null,
  ) {}

  /**
   * `requestId`: the client's id for the write; a write with an id this node's store still
   * remembers is answered from there (request-ids.ts), and one still in flight applies
   * nothing a second time (the store checks the id as the entry applies).
   */
  async propose(statements: Statement[], requestId?: string): Promise<{ applyResult: ApplyResult; index: number }> {
    while (this.held !== null) await this.held;
    const known = requestId === undefined ? null : this.remembered(requestId, statements);
    if (known !== null) return known;
    if (this.isPlain(statements)) return this.proposer.propose(encodeCommand(executeCommand(statements, requestId)));
    let release: () => void = () => {};
    this.held = new Promise<void>((resolve) => (release = resolve));
    try {
      return await this.checkAndPropose(statements, requestId);
    } finally {
      this.held = null;
      release();
    }
  }

  /**
   * The answer the write with `requestId` had, when this node's store remembers it; throws
   * REQUEST_ID_REUSED when the id came with other statements than `statements`.
   */
  remembered(requestId: string, statements: readonly Statement[]): { applyResult: ApplyResult; index: number } | null {
    const outcome = this.ctx.store.rememberedRequest(requestId, this.ctx.clock.nowMs());
    if (outcome === null) return null;
    if (reusedFor(outcome, requestBodyHash(statements))) throw requestIdReused(requestIdReusedMessage(requestId, outcome.firstIndex), outcome.firstIndex);
    return { applyResult: { kind: "execute", ...answerOf(outcome) }, index: outcome.firstIndex };
  }

  private isPlain(statements: Statement[]): boolean {
    const { ctx } = this;
    if (this.checker() === null) return true;
    const term = ctx.core.currentTerm();
    if (term !== this.termSeen) {
      this.termSeen = term;
      this.uncheckedUpTo = Math.max(this.uncheckedUpTo, ctx.core.status().lastIndex);
    }
    if (ctx.store.appliedIndex < this.uncheckedUpTo) return false;
    return statements.every((s) => isPlainWrite(s.sql)) && !ctx.store.runsCodeOnWrite();
  }

  private async checkAndPropose(statements: Statement[], requestId: string | undefined): Promise<{ applyResult: ApplyResult; index: number }> {
    const { ctx } = this;
    const checker = this.checker();
    if (checker === null) return this.proposer.propose(encodeCommand(executeCommand(statements, requestId)));
    for (let attempt = 1; ; attempt++) {
      await this.drain();
      // Applied meanwhile (a retry that raced the first): tried again, it could fail where the first did not.
      const known = requestId === undefined ? null : this.remembered(requestId, statements);
      if (known !== null) return known;
      const before = ctx.core.status();
      const entry = { term: before.term, index: before.lastIndex + 1, timestampMs: ctx.clock.nowMs() };
      const verdict = await this.checkCommitted(checker, statements, entry);
      const after = ctx.core.status();
      const moved = after.term !== entry.term || after.lastIndex + 1 !== entry.index || ctx.store.appliedIndex !== entry.index - 1;
      if (moved) {
        if (attempt < checkAttemptsMax) continue;
        throw new SvcError("OVERLOADED", "the log kept moving while the write was tried; nothing was written", { hint: "retry the write" });
      }
      // Applied, it would fail the same way: answer so without logging it. With a request id it
      // is logged all the same (it fails at apply, on every node, and changes nothing), so that
      // the failure is remembered: a retry with that id answers it, and never applies the batch
      // on data that has changed since.
      // Never logged, id or not, when a virtual table found its contents broken: applied, that
      // error is taken for damage to the node's file (isDamageAtApply).
      if (verdict.failed?.virtualTableCorrupt === true) {
        throw new SvcError("SQL_ERROR", `statement ${verdict.failed.statementIndex}: ${verdict.failed.message} (a virtual table, such as an FTS5 index, is out of step with its contents)`, {
          hint: "nothing in this batch was applied; rebuild the index (INSERT INTO t(t) VALUES ('rebuild') for an FTS5 table t), then retry",
          details: { statementIndex: verdict.failed.statementIndex },
        });
      }
      if (verdict.failed !== null && requestId === undefined) {
        throw new SvcError("SQL_ERROR", `statement ${verdict.failed.statementIndex}: ${verdict.failed.message}`, {
          hint: "nothing in this batch was applied",
          details: { statementIndex: verdict.failed.statementIndex },
        });
      }
      const data = encodeCommand({ ...executeCommand(statements, requestId), checkedIndex: entry.index });
      // Until it is applied no write is plain, even once this one stops waiting (a time-out):
      // it may still commit, and a trigger it creates would fire on writes logged after it.
      this.uncheckedUpTo = Math.max(this.uncheckedUpTo, entry.index);
      return this.proposer.propose(data, entry.timestampMs);
    }
  }

  /**
   * Try the batch in the write-check process, on the store as applied: it is committed first
   * (the process sees only what is), and every apply commits at once until the check is done
   * (an open transaction would hold the write lock the check takes).
   */
  private async checkCommitted(checker: SqlProcessPool, statements: Statement[], entry: { term: number; index: number; timestampMs: number }): Promise<CheckVerdict> {
    const { ctx } = this;
    ctx.storeCommitsEager = true;
    try {
      if (!ctx.store.commitForReaders()) {
        ctx.checkWritable();
        throw new SvcError("DISK_FULL", "the disk is full: the write could not be tried (the store's commit was refused)", { hint: "free space on the data directory's disk; writes resume by themselves" });
      }
      return await checker.check(statements, entry, ctx.config.limits.writeCheckTimeoutMs);
    } finally {
      ctx.storeCommitsEager = false;
    }
  }

  /** Wait until this node (the leader) has applied every entry of its log. */
  private async drain(): Promise<void> {
    const { ctx } = this;
    const deadline = ctx.clock.monotonicMs() + drainWaitMsMax;
    for (;;) {
      ctx.requireLeader();
      if (ctx.store.appliedIndex >= ctx.core.status().lastIndex) return;
      if (ctx.clock.monotonicMs() > deadline) {
        throw new SvcError("OVERLOADED", "the log was not applied in time for the write to be tried; nothing was written", { hint: "retry after a short wait" });
      }
      await ctx.clock.sleep(drainPollMs);
    }
  }
}

/**
 * A request id used again for other statements: nothing is applied, and the client is told why
 * (found before proposing, here, or as the entry applied, node.ts).
 */
export function requestIdReused(message: string, firstIndex: number): SvcError {
  return new SvcError("REQUEST_ID_REUSED", message, {
    hint: "use a new request_id for each write; reuse one only to retry the very same statements",
    details: { firstIndex },
  });
}

function executeCommand(statements: Statement[], requestId: string | undefined): Extract<Command, { op: "execute" }> {
  return requestId === undefined ? { op: "execute", statements } : { op: "execute", statements, requestId };
}
