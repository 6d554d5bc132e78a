// Time as the node sees it. The node reads the time and sets timers only through a Clock, so
// the simulator can run the real node on simulated time (manual-clock.ts) and replay a seed
// exactly; in production it is the system's clock and the event loop's timers.

export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Wall-clock milliseconds since the Unix epoch: entry timestamps, expiry of waiters. */
  nowMs(): number;
  /** Monotonic milliseconds from an arbitrary origin: durations and pacing. */
  monotonicMs(): number;
  /** Call `fn` every `intervalMs` until cancelled. */
  every(intervalMs: number, fn: () => void): Timer;
  /** Call `fn` once after `delayMs`. */
  after(delayMs: number, fn: () => void): Timer;
  /** Call `fn` once the current turn of the event loop and its microtasks are done. */
  soon(fn: () => void): void;
  sleep(delayMs: number): Promise<void>;
}

export const systemClock: Clock = {
  nowMs: () => Date.now(),
  monotonicMs: () => performance.now(),
  every(intervalMs, fn) {
    const handle = setInterval(fn, intervalMs);
    return { cancel: () => clearInterval(handle) };
  },
  after(delayMs, fn) {
    const handle = setTimeout(fn, delayMs);
    return { cancel: () => clearTimeout(handle) };
  },
  soon(fn) {
    setImmediate(fn);
  },
  sleep: (delayMs) => Bun.sleep(delayMs),
};
