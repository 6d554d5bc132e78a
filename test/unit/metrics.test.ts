import { describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { AssertionError } from "../../src/util/index.ts";
import { MetricsRegistry, exponentialBuckets } from "../../src/metrics/index.ts";

function sampleLines(text: string): string[] {
  return text.split("\n").filter((line) => line !== "" && !line.startsWith("#"));
}

function fullRegistry(): MetricsRegistry {
  const registry = new MetricsRegistry();
  registry.gauge("tensor_chain_commit_index", "Highest log index known to be committed.").set(42);
  registry.gauge("tensor_chain_applied_index", "Highest log index applied to the store.").set(40);
  registry.counter("tensor_chain_wal_bytes_written_total", "Bytes appended to the WAL.").inc(4096);
  const sent = registry.counter("tensor_chain_raft_messages_sent_total", "Raft messages sent, by peer and type.", ["peer", "type"]);
  sent.labels("node2", "append").inc(3);
  sent.labels("node3", "append").inc();
  sent.labels("node2", 'vote "quoted"\\\n').inc();
  registry.counter("tensor_chain_snapshot_errors_total", "Snapshot failures, by reason (none yet).", ["reason"]);
  registry.gaugeFn("tensor_chain_memory_rss_bytes", "Resident memory of the process.", () => 1_234_567);
  const latency = registry.histogram("tensor_chain_write_latency_seconds", "Time from proposal to apply.", [0.001, 0.01, 0.1, 1]);
  for (const v of [0.0005, 0.001, 0.005, 0.05, 0.5, 5]) latency.observe(v);
  registry.histogram("tensor_chain_snapshot_transfer_bytes", "Size of snapshot transfers.", exponentialBuckets(1024, 4, 5), ["direction"]).labels("send").observe(100_000);
  return registry;
}

describe("metrics: exposition text", () => {
  test("each metric has HELP and TYPE with its full name, and the text ends in a newline", () => {
    const text = fullRegistry().render();
    expect(text.endsWith("\n")).toBe(true);
    expect(text).toContain("# HELP tensor_chain_commit_index Highest log index known to be committed.\n# TYPE tensor_chain_commit_index gauge\n");
    expect(text).toContain("# TYPE tensor_chain_wal_bytes_written_total counter\n");
    expect(text).toContain("# TYPE tensor_chain_write_latency_seconds histogram\n");
  });

  test("the replication lag can be read as name, whitespace, number", () => {
    const lines = sampleLines(fullRegistry().render());
    const value = (name: string) => Number(lines.find((l) => l.split(/\s+/)[0] === name)?.split(/\s+/)[1]);
    expect(value("tensor_chain_commit_index") - value("tensor_chain_applied_index")).toBe(2);
  });

  test("an unlabelled counter is written as 0 before its first event", () => {
    const registry = new MetricsRegistry();
    registry.counter("tensor_chain_elections_total", "Elections started.");
    expect(sampleLines(registry.render())).toEqual(["tensor_chain_elections_total 0"]);
  });

  test("labelled series are written once each, with escaped values", () => {
    const lines = sampleLines(fullRegistry().render()).filter((l) => l.startsWith("tensor_chain_raft_messages_sent_total"));
    expect(lines).toEqual([
      'tensor_chain_raft_messages_sent_total{peer="node2",type="append"} 3',
      'tensor_chain_raft_messages_sent_total{peer="node3",type="append"} 1',
      'tensor_chain_raft_messages_sent_total{peer="node2",type="vote \\"quoted\\"\\\\\\n"} 1',
    ]);
  });

  test("the same label values give the same series", () => {
    const registry = new MetricsRegistry();
    const c = registry.counter("x_total", "x", ["peer"]);
    c.labels("a").inc();
    c.labels("a").inc(2);
    expect(c.labels("a").get()).toBe(3);
    expect(sampleLines(registry.render())).toEqual(['x_total{peer="a"} 3']);
  });

  test("histogram buckets are cumulative with le labels, +Inf equals the count, and sum adds up", () => {
    const lines = sampleLines(fullRegistry().render()).filter((l) => l.startsWith("tensor_chain_write_latency_seconds"));
    expect(lines).toEqual([
      'tensor_chain_write_latency_seconds_bucket{le="0.001"} 2',
      'tensor_chain_write_latency_seconds_bucket{le="0.01"} 3',
      'tensor_chain_write_latency_seconds_bucket{le="0.1"} 4',
      'tensor_chain_write_latency_seconds_bucket{le="1"} 5',
      'tensor_chain_write_latency_seconds_bucket{le="+Inf"} 6',
      `tensor_chain_write_latency_seconds_sum ${0.0005 + 0.001 + 0.005 + 0.05 + 0.5 + 5}`,
      "tensor_chain_write_latency_seconds_count 6",
    ]);
  });

  test("a labelled histogram puts le after its own labels", () => {
    const text = fullRegistry().render();
    expect(text).toContain('tensor_chain_snapshot_transfer_bytes_bucket{direction="send",le="1024"} 0\n');
    expect(text).toContain('tensor_chain_snapshot_transfer_bytes_bucket{direction="send",le="262144"} 1\n');
    expect(text).toContain('tensor_chain_snapshot_transfer_bytes_count{direction="send"} 1\n');
  });

  test("a callback gauge is computed at each scrape", () => {
    const registry = new MetricsRegistry();
    let calls = 0;
    registry.gaugeFn("tensor_chain_wal_size_bytes", "Bytes in the WAL directory.", () => ++calls * 10);
    expect(sampleLines(registry.render())).toEqual(["tensor_chain_wal_size_bytes 10"]);
    expect(sampleLines(registry.render())).toEqual(["tensor_chain_wal_size_bytes 20"]);
  });

  test("a failing callback gauge is written as NaN and the rest of the scrape survives", () => {
    const registry = new MetricsRegistry();
    registry.gaugeFn("a_bytes", "a", () => {
      throw new Error("gone");
    });
    registry.gauge("b", "b").set(1);
    expect(sampleLines(registry.render())).toEqual(["a_bytes NaN", "b 1"]);
  });

  test("scrape hooks run before rendering", () => {
    const registry = new MetricsRegistry();
    const g = registry.gauge("tensor_chain_leader_commit", "Leader's commit index.");
    registry.onScrape(() => g.set(7));
    expect(sampleLines(registry.render())).toEqual(["tensor_chain_leader_commit 7"]);
  });

  test("help text with newlines and backslashes is escaped", () => {
    const registry = new MetricsRegistry();
    registry.gauge("g", "line one\nline two \\ end");
    expect(registry.render()).toContain("# HELP g line one\\nline two \\\\ end\n");
  });
});

describe("metrics: rules enforced at registration", () => {
  test("registering the same name twice is an assertion failure", () => {
    const registry = new MetricsRegistry();
    registry.gauge("tensor_chain_commit_index", "x");
    expect(() => registry.gauge("tensor_chain_commit_index", "x")).toThrow(AssertionError);
    expect(() => registry.gaugeFn("tensor_chain_commit_index", "x", () => 0)).toThrow(AssertionError);
  });

  test("a metric that would write another histogram's samples is refused", () => {
    const registry = new MetricsRegistry();
    registry.histogram("req_seconds", "x", [1]);
    expect(() => registry.gauge("req_seconds_count", "x")).toThrow(AssertionError);
  });

  test("counters must end in _total and other kinds must not", () => {
    const registry = new MetricsRegistry();
    expect(() => registry.counter("tensor_chain_elections", "x")).toThrow(AssertionError);
    expect(() => registry.gauge("tensor_chain_things_total", "x")).toThrow(AssertionError);
  });

  test("names in non-base units are refused", () => {
    const registry = new MetricsRegistry();
    expect(() => registry.histogram("latency_ms", "x", [1])).toThrow(AssertionError);
    expect(() => registry.gauge("max_memory_mb", "x")).toThrow(AssertionError);
  });

  test("bad names, bad labels, le on a histogram and empty help are refused", () => {
    const registry = new MetricsRegistry();
    expect(() => registry.gauge("1abc", "x")).toThrow(AssertionError);
    expect(() => registry.gauge("a", "x", ["bad-label"])).toThrow(AssertionError);
    expect(() => registry.gauge("b", "x", ["__reserved"])).toThrow(AssertionError);
    expect(() => registry.histogram("c_seconds", "x", [1], ["le"])).toThrow(AssertionError);
    expect(() => registry.gauge("d", " ")).toThrow(AssertionError);
  });

  test("histogram buckets must be finite and increasing", () => {
    const registry = new MetricsRegistry();
    expect(() => registry.histogram("a_seconds", "x", [1, 1])).toThrow(AssertionError);
    expect(() => registry.histogram("b_seconds", "x", [1, Infinity])).toThrow(AssertionError);
    expect(() => registry.histogram("c_seconds", "x", [])).toThrow(AssertionError);
  });

  test("label values must match the label names in number", () => {
    const registry = new MetricsRegistry();
    const c = registry.counter("x_total", "x", ["peer", "type"]);
    expect(() => c.labels("node2")).toThrow(AssertionError);
    expect(() => c.inc()).toThrow(AssertionError);
  });

  test("a counter cannot go down", () => {
    const c = new MetricsRegistry().counter("x_total", "x");
    expect(() => c.inc(-1)).toThrow(AssertionError);
    expect(() => c.inc(NaN)).toThrow(AssertionError);
  });
});

const promtool = spawnSync("promtool", ["--version"]).status === 0;

describe("metrics: promtool", () => {
  test.skipIf(!promtool)("promtool check metrics accepts the output", () => {
    const run = spawnSync("promtool", ["check", "metrics"], { input: fullRegistry().render(), encoding: "utf8" });
    expect(run.stdout + run.stderr).toBe("");
    expect(run.status).toBe(0);
  });
});
