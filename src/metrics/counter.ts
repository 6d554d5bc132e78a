// A counter: a value that only goes up (events, bytes written). Names end in _total.

import { assert } from "../util/index.ts";
import { SeriesSet } from "./_series.ts";
import { formatNumber, header } from "./_text.ts";

export class CounterSeries {
  private value = 0;

  inc(by = 1): void {
    // A constant message: this is on the write path and must not build a string per call.
    assert(by >= 0, "a counter only goes up");
    this.value += by;
  }

  get(): number {
    return this.value;
  }
}

export class Counter {
  private readonly series: SeriesSet<CounterSeries>;
  /** The one series of a counter without labels; it is written as 0 before the first event. */
  private readonly plain: CounterSeries | undefined;

  constructor(readonly name: string, readonly help: string, readonly labelNames: readonly string[]) {
    this.series = new SeriesSet(name, labelNames, () => new CounterSeries());
    this.plain = labelNames.length === 0 ? this.series.get([]) : undefined;
  }

  inc(by = 1): void {
    assert(this.plain !== undefined, "a labelled counter is updated through labels(...)");
    this.plain.inc(by);
  }

  get(): number {
    assert(this.plain !== undefined, "a labelled counter is read through labels(...)");
    return this.plain.get();
  }

  /** The series for these label values; keep it to update it without a lookup. */
  labels(...values: string[]): CounterSeries {
    return this.series.get(values);
  }

  render(): string {
    let out = header(this.name, this.help, "counter");
    for (const { labels, series } of this.series.entries()) out += `${this.name}${labels} ${formatNumber(series.get())}\n`;
    return out;
  }
}
