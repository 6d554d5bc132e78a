// LoopLagProbe: how late its timer ran is the event loop's lag; the largest lag is kept for
// the last few seconds only.

import { describe, expect, test } from "bun:test";
import type { Clock, Timer } from "../../src/io/index.ts";
import { MetricsRegistry } from "../../src/metrics/index.ts";
import { LoopLagProbe, probeIntervalMs } from "../../src/node/loop-lag.ts";

/** A clock whose single pending timer the test fires by hand, at whatever time it chooses. */
class HandClock implements Clock {
  now = 0;
  pending: (() => void) | null = null;
  nowMs(): number {
    return this.now;
  }
  monotonicMs(): number {
    return this.now;
  }
  every(): Timer {
    throw new Error("not used");
  }
  after(_delayMs: number, fn: () => void): Timer {
    this.pending = fn;
    return { cancel: () => { if (this.pending === fn) this.pending = null; } };
  }
  soon(fn: () => void): void {
    fn();
  }
  sleep(): Promise<void> {
    return Promise.resolve();
  }
  fireAt(ms: number): void {
    this.now = ms;
    const fn = this.pending;
    this.pending = null;
    fn?.();
  }
}

function render(registry: MetricsRegistry, name: string): number {
  const m = new RegExp(`^${name} (\\S+)$`, "m").exec(registry.render());
  return Number(m?.[1] ?? Number.NaN);
}

describe("event-loop lag", () => {
  test("a timer that runs late counts the delay as lag; one on time counts none", () => {
    const clock = new HandClock();
    const registry = new MetricsRegistry();
    const probe = new LoopLagProbe(clock);
    probe.register(registry);
    probe.start();
    clock.fireAt(probeIntervalMs);
    expect(probe.maxMs()).toBe(0);
    clock.fireAt(2 * probeIntervalMs + 80);
    expect(probe.maxMs()).toBe(80);
    expect(render(registry, "tensor_chain_event_loop_lag_max_seconds")).toBeCloseTo(0.08, 6);
    expect(render(registry, "tensor_chain_event_loop_lag_seconds_count")).toBe(2);
    expect(render(registry, 'tensor_chain_event_loop_lag_seconds_bucket\\{le="0.064"\\}')).toBe(1);
  });

  test("the largest lag is forgotten once it is older than the window", () => {
    const clock = new HandClock();
    const probe = new LoopLagProbe(clock);
    probe.start();
    clock.fireAt(probeIntervalMs + 300);
    expect(probe.maxMs()).toBe(300);
    let t = clock.now;
    while (t < 11_000) clock.fireAt((t += probeIntervalMs));
    expect(probe.maxMs()).toBe(0);
  });

  test("stopped, it sets no timer", () => {
    const clock = new HandClock();
    const probe = new LoopLagProbe(clock);
    probe.start();
    probe.stop();
    expect(clock.pending).toBeNull();
  });
});
