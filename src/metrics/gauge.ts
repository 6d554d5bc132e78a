// A gauge: a value that goes up and down (indexes, sizes, states), set by its owner or
// computed at scrape time by a callback.

import { assert } from "../util/index.ts";
import { SeriesSet } from "./_series.ts";
import { formatNumber, header } from "./_text.ts";

export class GaugeSeries {
  private value = 0;

  set(value: number): void {
    this.value = value;
  }

  inc(by = 1): void {
    this.value += by;
  }

  dec(by = 1): void {
    this.value -= by;
  }

  get(): number {
    return this.value;
  }
}

export class Gauge {
  private readonly series: SeriesSet<GaugeSeries>;
  private readonly plain: GaugeSeries | undefined;

  constructor(readonly name: string, readonly help: string, readonly labelNames: readonly string[]) {
    this.series = new SeriesSet(name, labelNames, () => new GaugeSeries());
    this.plain = labelNames.length === 0 ? this.series.get([]) : undefined;
  }

  set(value: number): void {
    this.unlabelled().set(value);
  }

  inc(by = 1): void {
    this.unlabelled().inc(by);
  }

  dec(by = 1): void {
    this.unlabelled().dec(by);
  }

  get(): number {
    return this.unlabelled().get();
  }

  labels(...values: string[]): GaugeSeries {
    return this.series.get(values);
  }

  render(): string {
    let out = header(this.name, this.help, "gauge");
    for (const { labels, series } of this.series.entries()) out += `${this.name}${labels} ${formatNumber(series.get())}\n`;
    return out;
  }

  private unlabelled(): GaugeSeries {
    assert(this.plain !== undefined, "a labelled gauge is used through labels(...)");
    return this.plain;
  }
}

export class CallbackGauge {
  constructor(readonly name: string, readonly help: string, private readonly collect: () => number) {}

  render(): string {
    let value: number;
    try {
      value = this.collect();
    } catch {
      // One failing source must not take the whole scrape down; NaN shows the gap.
      value = NaN;
    }
    return `${header(this.name, this.help, "gauge")}${this.name} ${formatNumber(value)}\n`;
  }
}
