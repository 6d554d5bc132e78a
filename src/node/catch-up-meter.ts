// How far this node is behind the leader and how fast it closes the gap: the figures behind the
// tensor_chain_recovery_* metrics and the "recovery: caught_up … after N s" log line.
//
// The loop samples it on every tick with its own clock (the simulator's twin is deterministic).
// A catch-up episode starts at the first sample outside "healthy" (the node started, or a
// serving follower fell back into the recovery flow) and ends when the leader confirms this
// node caught up (caughtUp).

/** The catch-up rate is measured over about this much of the most recent time. */
const rateWindowMs = 5_000;
/** Samples closer together than this are not kept (ticks come every heartbeat). */
const sampleSpacingMs = 250;

interface Sample {
  readonly atMs: number;
  readonly applied: number;
}

export interface CaughtUp {
  /** Time from the episode's start to the leader's confirmation. */
  readonly seconds: number;
  /** Entries applied during the episode. */
  readonly entries: number;
}

export class CatchUpMeter {
  /** Oldest first; spans at most rateWindowMs (plus one sample before it). */
  private readonly samples: Sample[] = [];
  private episode: Sample | null = null;
  /** How long the last finished catch-up took; null before the first. */
  lastSeconds: number | null = null;

  /** `onCaughtUp`: counts finished catch-ups (a metric). */
  constructor(private readonly onCaughtUp: () => void = () => {}) {}

  /** A tick: whether the node is in the recovery flow (not healthy), and what it has applied. */
  sample(recovering: boolean, applied: number, nowMs: number): void {
    if (recovering && this.episode === null) this.episode = { atMs: nowMs, applied };
    const last = this.samples.at(-1);
    if (last !== undefined && nowMs - last.atMs < sampleSpacingMs) return;
    this.samples.push({ atMs: nowMs, applied });
    while (this.samples.length > 2 && nowMs - (this.samples[1]?.atMs ?? nowMs) >= rateWindowMs) this.samples.shift();
  }

  /** Entries applied per second over the last few seconds. */
  get ratePerSecond(): number {
    const first = this.samples[0];
    const last = this.samples.at(-1);
    if (first === undefined || last === undefined || last.atMs <= first.atMs) return 0;
    return ((last.applied - first.applied) * 1000) / (last.atMs - first.atMs);
  }

  /** Seconds until `entriesBehind` are applied at the current rate: 0 when none, -1 when not progressing. */
  estimatedSeconds(entriesBehind: number): number {
    if (entriesBehind <= 0) return 0;
    const rate = this.ratePerSecond;
    return rate > 0 ? entriesBehind / rate : -1;
  }

  /** The leader confirmed this node caught up: ends the episode and says what it took. */
  caughtUp(applied: number, nowMs: number): CaughtUp {
    const start = this.episode ?? { atMs: nowMs, applied };
    this.episode = null;
    const seconds = Math.max(0, nowMs - start.atMs) / 1000;
    this.lastSeconds = seconds;
    this.onCaughtUp();
    return { seconds, entries: Math.max(0, applied - start.applied) };
  }
}
