// The catch-up figures (src/node/catch-up-meter.ts): the rate at which a node applies entries,
// the time left at that rate, and how long a catch-up took, by the loop's own clock.

import { describe, expect, test } from "bun:test";
import { CatchUpMeter } from "../../src/node/catch-up-meter.ts";

describe("catch-up meter", () => {
  test("the rate is entries applied per second over the last few seconds of samples", () => {
    const meter = new CatchUpMeter();
    expect(meter.ratePerSecond).toBe(0);
    for (let t = 0; t <= 2_000; t += 100) meter.sample(true, t * 5, t);
    expect(meter.ratePerSecond).toBe(5_000);
    // Ten seconds later at a slower pace: only the recent samples count.
    for (let t = 2_100; t <= 12_000; t += 100) meter.sample(true, 10_000 + (t - 2_000), t);
    expect(meter.ratePerSecond).toBe(1_000);
  });

  test("the estimate is the entries behind at the current rate: 0 when none, -1 when nothing moves", () => {
    const meter = new CatchUpMeter();
    for (let t = 0; t <= 1_000; t += 250) meter.sample(true, t * 2, t);
    expect(meter.estimatedSeconds(4_000)).toBe(2);
    expect(meter.estimatedSeconds(0)).toBe(0);
    const stuck = new CatchUpMeter();
    for (let t = 0; t <= 1_000; t += 250) stuck.sample(true, 7, t);
    expect(stuck.estimatedSeconds(10)).toBe(-1);
  });

  test("a catch-up lasts from the first sample outside healthy to the leader's confirmation, and is counted", () => {
    let counted = 0;
    const meter = new CatchUpMeter(() => counted++);
    meter.sample(false, 0, 0);
    meter.sample(true, 100, 1_000);
    meter.sample(true, 600, 2_000);
    expect(meter.caughtUp(900, 3_500)).toEqual({ seconds: 2.5, entries: 800 });
    expect(meter.lastSeconds).toBe(2.5);
    // A serving follower that falls back starts a new one.
    meter.sample(false, 900, 4_000);
    meter.sample(true, 900, 10_000);
    expect(meter.caughtUp(1_000, 10_500)).toEqual({ seconds: 0.5, entries: 100 });
    expect(counted).toBe(2);
  });
});
