// Metrics for svc: a registry of counters, gauges and histograms, and the Prometheus text
// exposition served on GET /metrics.

export { MetricsRegistry, METRICS_CONTENT_TYPE } from "./registry.ts";
export { Counter, CounterSeries } from "./counter.ts";
export { Gauge, GaugeSeries } from "./gauge.ts";
export { Histogram, HistogramSeries, exponentialBuckets } from "./histogram.ts";
