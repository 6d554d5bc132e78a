// How long the node's event loop keeps work waiting: a timer asks to run every probeIntervalMs
// and the delay past that is the lag (a turn that ran long, or many turns queued). Feeds
// tensor_chain_event_loop_lag_seconds and the largest lag of the last few seconds, which is
// what an operator (or the catch-up benchmark) compares with the /health deadline. It costs one
// timer wake-up per interval; it runs only in the production node (the simulator's clock has
// no lag to measure).

import type { Clock, Timer } from "../io/clock.ts";
import { exponentialBuckets, type Histogram, type MetricsRegistry } from "../metrics/index.ts";

export const probeIntervalMs = 20;
/** The largest lag is kept over about this long (one slot a second). */
const maxWindowSlots = 10;
const slotMs = 1_000;

export class LoopLagProbe {
  private timer: Timer | null = null;
  private histogram: Histogram | null = null;
  /** The largest lag seen in each of the last maxWindowSlots seconds: slotMaxMs[i] is second slotIndex[i]'s. */
  private readonly slotMaxMs: number[] = [];
  private readonly slotIndex: number[] = [];

  constructor(private readonly clock: Clock) {}

  register(registry: MetricsRegistry): void {
    this.histogram = registry.histogram("tensor_chain_event_loop_lag_seconds",
      `How late a timer set to fire every ${probeIntervalMs} ms ran: time the event loop kept work waiting`,
      exponentialBuckets(0.001, 2, 12));
    registry.gaugeFn("tensor_chain_event_loop_lag_max_seconds",
      `The largest event-loop lag measured over the last ${maxWindowSlots} s`,
      () => this.maxMs() / 1000);
  }

  start(): void {
    if (this.timer !== null) return;
    let expectedAt = this.clock.monotonicMs() + probeIntervalMs;
    const fire = (): void => {
      const now = this.clock.monotonicMs();
      this.record(Math.max(0, now - expectedAt), now);
      expectedAt = now + probeIntervalMs;
      this.timer = this.clock.after(probeIntervalMs, fire);
    };
    this.timer = this.clock.after(probeIntervalMs, fire);
  }

  stop(): void {
    this.timer?.cancel();
    this.timer = null;
  }

  /** The largest lag over the window, in milliseconds. */
  maxMs(): number {
    const oldest = Math.floor(this.clock.monotonicMs() / slotMs) - maxWindowSlots + 1;
    let max = 0;
    for (let i = 0; i < this.slotIndex.length; i++) if (this.slotIndex[i]! >= oldest) max = Math.max(max, this.slotMaxMs[i]!);
    return max;
  }

  private record(lagMs: number, nowMs: number): void {
    this.histogram?.observe(lagMs / 1000);
    const slot = Math.floor(nowMs / slotMs);
    const at = slot % maxWindowSlots;
    if (this.slotIndex[at] !== slot) {
      this.slotIndex[at] = slot;
      this.slotMaxMs[at] = 0;
    }
    this.slotMaxMs[at] = Math.max(this.slotMaxMs[at]!, lagMs);
  }
}
