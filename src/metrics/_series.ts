// The labelled children of one metric: made once per label-value combination and kept, so
// the write path holds a child and updates a number in place.

import { assert } from "../util/index.ts";
import { labelText } from "./_text.ts";

export class SeriesSet<S> {
  private readonly byKey = new Map<string, { readonly labels: string; readonly series: S }>();

  constructor(private readonly metric: string, private readonly labelNames: readonly string[], private readonly make: () => S) {}

  get(values: readonly string[]): S {
    assert(values.length === this.labelNames.length, () => `${this.metric} takes ${this.labelNames.length} label values (${this.labelNames.join(", ")}), got ${values.length}`);
    // \u0000 cannot be typed into a label value by accident, so it separates values unambiguously enough.
    const key = values.join("\u0000");
    let entry = this.byKey.get(key);
    if (entry === undefined) {
      entry = { labels: labelText(this.labelNames, values), series: this.make() };
      this.byKey.set(key, entry);
    }
    return entry.series;
  }

  entries(): Iterable<{ readonly labels: string; readonly series: S }> {
    return this.byKey.values();
  }
}
