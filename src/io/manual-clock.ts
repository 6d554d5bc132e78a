// The in-memory twin of Clock: time moves only when the owner says so. Timers fire in order
// of their due time, then of their creation, so a run is a function of its inputs alone.
// `soon` callbacks wait in a queue the owner drains (runSoon): in the simulator that is one
// step of the node's event loop.

import type { Clock, Timer } from "./clock.ts";

interface Pending {
  readonly seq: number;
  dueMs: number;
  readonly intervalMs: number | null;
  readonly fn: () => void;
  cancelled: boolean;
}

export class ManualClock implements Clock {
  private nowValueMs: number;
  private seq = 0;
  private timers: Pending[] = [];
  private soonQueue: (() => void)[] = [];

  constructor(startMs = 1_700_000_000_000) {
    this.nowValueMs = startMs;
  }

  nowMs(): number {
    return this.nowValueMs;
  }

  monotonicMs(): number {
    return this.nowValueMs;
  }

  every(intervalMs: number, fn: () => void): Timer {
    return this.add(intervalMs, intervalMs, fn);
  }

  after(delayMs: number, fn: () => void): Timer {
    return this.add(delayMs, null, fn);
  }

  soon(fn: () => void): void {
    this.soonQueue.push(fn);
  }

  sleep(delayMs: number): Promise<void> {
    return new Promise((resolve) => this.after(delayMs, resolve));
  }

  /** Whether `soon` callbacks wait. */
  get hasSoon(): boolean {
    return this.soonQueue.length > 0;
  }

  /** Run the `soon` callbacks queued so far (not those they queue). Returns how many ran. */
  runSoon(): number {
    const queue = this.soonQueue;
    this.soonQueue = [];
    for (const fn of queue) fn();
    return queue.length;
  }

  /** The due time of the next timer, or null when none is set. */
  nextDueMs(): number | null {
    let best: number | null = null;
    for (const t of this.timers) if (!t.cancelled && (best === null || t.dueMs < best)) best = t.dueMs;
    return best;
  }

  /** Move time to `toMs`, firing every timer due on the way, in order. */
  advanceTo(toMs: number): void {
    for (;;) {
      const next = this.takeNextDue(toMs);
      if (next === null) break;
      this.nowValueMs = Math.max(this.nowValueMs, next.dueMs);
      if (next.intervalMs !== null) {
        next.dueMs += next.intervalMs;
        this.timers.push(next);
      }
      next.fn();
    }
    this.nowValueMs = Math.max(this.nowValueMs, toMs);
  }

  /** Cancel every timer and drop queued callbacks (a crash of what owns them). */
  reset(): void {
    for (const t of this.timers) t.cancelled = true;
    this.timers = [];
    this.soonQueue = [];
  }

  private add(delayMs: number, intervalMs: number | null, fn: () => void): Timer {
    const pending: Pending = { seq: this.seq++, dueMs: this.nowValueMs + Math.max(0, delayMs), intervalMs, fn, cancelled: false };
    this.timers.push(pending);
    return { cancel: () => { pending.cancelled = true; } };
  }

  private takeNextDue(limitMs: number): Pending | null {
    let bestAt = -1;
    this.timers = this.timers.filter((t) => !t.cancelled);
    for (let i = 0; i < this.timers.length; i++) {
      const t = this.timers[i];
      const best = bestAt < 0 ? undefined : this.timers[bestAt];
      if (t === undefined || t.dueMs > limitMs) continue;
      if (best === undefined || t.dueMs < best.dueMs || (t.dueMs === best.dueMs && t.seq < best.seq)) bestAt = i;
    }
    if (bestAt < 0) return null;
    const [taken] = this.timers.splice(bestAt, 1);
    return taken ?? null;
  }
}
