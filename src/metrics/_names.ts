// Naming rules checked when a metric is registered: a bad name is a bug in svc, so these
// are assertions, and they keep /metrics acceptable to `promtool check metrics`.

import { assert } from "../util/index.ts";

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
/** Prometheus wants base units: seconds and bytes. */
const NON_BASE_UNIT = /_(milliseconds|millis|ms|microseconds|us|nanoseconds|ns|minutes|hours|days|kilobytes|kb|kib|megabytes|mb|mib|gigabytes|gb|gib|bits)(_total)?$/;

export type MetricKind = "counter" | "gauge" | "histogram";

export function checkMetricName(name: string, kind: MetricKind): void {
  assert(METRIC_NAME.test(name), `metric name ${JSON.stringify(name)} is [a-zA-Z_:][a-zA-Z0-9_:]*`);
  assert(!NON_BASE_UNIT.test(name), `metric ${name} uses base units (_seconds, _bytes)`);
  if (kind === "counter") assert(name.endsWith("_total"), `counter ${name} ends in _total`);
  else assert(!name.endsWith("_total"), `${kind} ${name} does not end in _total, which marks counters`);
  if (kind === "histogram") {
    assert(!/_(bucket|sum|count)$/.test(name), `histogram ${name} does not end in a suffix of its own samples`);
  }
}

export function checkLabelNames(metric: string, names: readonly string[], kind: MetricKind): void {
  const seen = new Set<string>();
  for (const name of names) {
    assert(LABEL_NAME.test(name), `label ${JSON.stringify(name)} of ${metric} is [a-zA-Z_][a-zA-Z0-9_]*`);
    assert(!name.startsWith("__"), `label ${name} of ${metric} does not start with __ (reserved)`);
    assert(!(kind === "histogram" && name === "le"), `histogram ${metric} does not use the label le (reserved for buckets)`);
    assert(!seen.has(name), `label ${name} of ${metric} is not repeated`);
    seen.add(name);
  }
}

/** The sample names a metric writes, to keep two metrics from writing the same series. */
export function sampleNames(name: string, kind: MetricKind): string[] {
  return kind === "histogram" ? [`${name}_bucket`, `${name}_sum`, `${name}_count`, name] : [name];
}
