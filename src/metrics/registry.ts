// The registry of every metric a node exposes, rendered as Prometheus text for GET /metrics.
// Registration happens at start-up; registering one name twice is a bug and fails an assertion.

import { assert } from "../util/index.ts";
import { checkLabelNames, checkMetricName, sampleNames, type MetricKind } from "./_names.ts";
import { Counter } from "./counter.ts";
import { CallbackGauge, Gauge } from "./gauge.ts";
import { Histogram } from "./histogram.ts";

interface Renderable {
  render(): string;
}

export class MetricsRegistry {
  private readonly metrics: Renderable[] = [];
  /** Every sample name written so far, so that two metrics never write the same series. */
  private readonly samples = new Set<string>();
  private readonly scrapeHooks: (() => void)[] = [];

  counter(name: string, help: string, labelNames: readonly string[] = []): Counter {
    this.claim(name, help, "counter", labelNames);
    return this.add(new Counter(name, help, labelNames));
  }

  gauge(name: string, help: string, labelNames: readonly string[] = []): Gauge {
    this.claim(name, help, "gauge", labelNames);
    return this.add(new Gauge(name, help, labelNames));
  }

  /** A gauge whose value is computed at scrape time (e.g. the size of the WAL directory). */
  gaugeFn(name: string, help: string, collect: () => number): void {
    this.claim(name, help, "gauge", []);
    this.add(new CallbackGauge(name, help, collect));
  }

  /** `buckets`: increasing finite upper bounds in the metric's base unit; +Inf is added. */
  histogram(name: string, help: string, buckets: readonly number[], labelNames: readonly string[] = []): Histogram {
    this.claim(name, help, "histogram", labelNames);
    return this.add(new Histogram(name, help, buckets, labelNames));
  }

  /** Runs before every render, to refresh gauges that are cheaper to read in bulk. */
  onScrape(hook: () => void): void {
    this.scrapeHooks.push(hook);
  }

  /** The text exposition (version 0.0.4): metrics in registration order, ending in a newline. */
  render(): string {
    for (const hook of this.scrapeHooks) hook();
    let out = "";
    for (const metric of this.metrics) out += metric.render();
    return out;
  }

  private claim(name: string, help: string, kind: MetricKind, labelNames: readonly string[]): void {
    checkMetricName(name, kind);
    checkLabelNames(name, labelNames, kind);
    assert(help.trim() !== "", `metric ${name} has help text`);
    const names = sampleNames(name, kind);
    for (const sample of names) assert(!this.samples.has(sample), `metric ${name} is registered once (${sample} is taken)`);
    for (const sample of names) this.samples.add(sample);
  }

  private add<M extends Renderable>(metric: M): M {
    this.metrics.push(metric);
    return metric;
  }
}

/** The content type of render()'s output, for the HTTP response. */
export const METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";
