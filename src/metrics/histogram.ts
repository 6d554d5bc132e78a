// A histogram: observations counted into fixed buckets (le = upper bound, inclusive), with
// their sum and count. Buckets are fixed at registration so observe() allocates nothing.

import { assert } from "../util/index.ts";
import { SeriesSet } from "./_series.ts";
import { formatNumber, header, withLabel } from "./_text.ts";

export class HistogramSeries {
  /** counts[i]: observations in (bounds[i-1], bounds[i]]; the last slot is above every bound. */
  private readonly counts: Float64Array;
  private sum = 0;
  private count = 0;

  constructor(private readonly bounds: Float64Array) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    assert(!Number.isNaN(value), "a histogram observation is a number");
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    this.counts[i]!++;
    this.sum += value;
    this.count++;
  }

  render(name: string, labels: string): string {
    let out = "";
    let cumulative = 0;
    for (let i = 0; i < this.bounds.length; i++) {
      cumulative += this.counts[i]!;
      out += `${name}_bucket${withLabel(labels, "le", formatNumber(this.bounds[i]!))} ${cumulative}\n`;
    }
    out += `${name}_bucket${withLabel(labels, "le", "+Inf")} ${this.count}\n`;
    out += `${name}_sum${labels} ${formatNumber(this.sum)}\n`;
    out += `${name}_count${labels} ${this.count}\n`;
    return out;
  }

  getCount(): number {
    return this.count;
  }

  getSum(): number {
    return this.sum;
  }
}

export class Histogram {
  private readonly series: SeriesSet<HistogramSeries>;
  private readonly plain: HistogramSeries | undefined;

  constructor(readonly name: string, readonly help: string, buckets: readonly number[], readonly labelNames: readonly string[]) {
    assert(buckets.length > 0, `histogram ${name} has at least one bucket`);
    for (let i = 0; i < buckets.length; i++) {
      assert(Number.isFinite(buckets[i]), `histogram ${name} buckets are finite (+Inf is implied)`);
      assert(i === 0 || buckets[i]! > buckets[i - 1]!, `histogram ${name} buckets increase`);
    }
    const bounds = Float64Array.from(buckets);
    this.series = new SeriesSet(name, labelNames, () => new HistogramSeries(bounds));
    this.plain = labelNames.length === 0 ? this.series.get([]) : undefined;
  }

  observe(value: number): void {
    assert(this.plain !== undefined, "a labelled histogram is used through labels(...)");
    this.plain.observe(value);
  }

  labels(...values: string[]): HistogramSeries {
    return this.series.get(values);
  }

  /** The series of a histogram without labels. */
  unlabelled(): HistogramSeries {
    assert(this.plain !== undefined, "a labelled histogram is used through labels(...)");
    return this.plain;
  }

  render(): string {
    let out = header(this.name, this.help, "histogram");
    for (const { labels, series } of this.series.entries()) out += series.render(this.name, labels);
    return out;
  }
}

/** `count` bounds starting at `start`, each `factor` times the one before (latencies, sizes). */
export function exponentialBuckets(start: number, factor: number, count: number): number[] {
  assert(start > 0 && factor > 1 && count >= 1, "exponential buckets grow from a positive start");
  const out: number[] = [];
  for (let i = 0, bound = start; i < count; i++, bound *= factor) out.push(bound);
  return out;
}
