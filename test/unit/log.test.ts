import { describe, expect, test } from "bun:test";
import { createLogger, levelFor, parseRustLog, type LoggerOptions } from "../../src/log/index.ts";

function levels(spec: string | undefined, target: string): string {
  const { directives } = parseRustLog(spec);
  return levelFor(target, directives);
}

function capture(options: Omit<LoggerOptions, "stream"> = {}): { lines: string[]; options: LoggerOptions } {
  const lines: string[] = [];
  const stream = { write: (chunk: string) => lines.push(...chunk.split("\n").filter((l) => l !== "")) };
  return { lines, options: { ...options, stream } };
}

describe("RUST_LOG parsing", () => {
  test("unset or empty RUST_LOG defaults to info, so startup and recovery lines show", () => {
    expect(levels(undefined, "tensor_chain")).toBe("info");
    expect(levels("", "tensor_chain::wal")).toBe("info");
  });

  test("a bare level is the default for every target", () => {
    expect(levels("debug", "tensor_chain::raft")).toBe("debug");
    expect(levels("WARN", "anything")).toBe("warn");
  });

  test("a bare target enables every level for it and below it", () => {
    expect(levels("tensor_chain::raft", "tensor_chain::raft")).toBe("trace");
    expect(levels("tensor_chain::raft", "tensor_chain::raft::log")).toBe("trace");
    expect(levels("tensor_chain::raft", "tensor_chain::wal")).toBe("info");
  });

  test("the longest matching target wins, in any order", () => {
    const spec = "tensor_chain::raft=trace,tensor_chain=debug";
    expect(levels(spec, "tensor_chain::raft")).toBe("trace");
    expect(levels(spec, "tensor_chain::gossip")).toBe("debug");
    expect(levels(spec, "tensor_chain")).toBe("debug");
  });

  test("targets match whole :: segments, not string prefixes", () => {
    expect(levels("tensor_chain::raft=trace", "tensor_chain::raftx")).toBe("info");
    expect(levels("tensor=trace", "tensor_chain")).toBe("info");
  });

  test("a target directive beats the bare default for its targets only", () => {
    const spec = "warn,tensor_chain::gossip=debug";
    expect(levels(spec, "tensor_chain::gossip")).toBe("debug");
    expect(levels(spec, "tensor_chain::raft")).toBe("warn");
  });

  test("off is a level, for a target and as the default", () => {
    expect(levels("tensor_chain::gossip=off", "tensor_chain::gossip")).toBe("off");
    expect(levels("off,tensor_chain::raft=trace", "tensor_chain::wal")).toBe("off");
    expect(levels("off,tensor_chain::raft=trace", "tensor_chain::raft")).toBe("trace");
  });

  test("a later directive for the same target replaces an earlier one", () => {
    expect(levels("tensor_chain=debug,tensor_chain=warn", "tensor_chain")).toBe("warn");
    expect(levels("debug,error", "x")).toBe("error");
  });

  test("bad directives are reported by name and the good ones still apply", () => {
    const { directives, problems } = parseRustLog("tensor_chain=loud, tensor_chain::raft=trace,a=b=c,,=debug,bad-target,x/foo");
    expect(problems.map((p) => p.directive)).toEqual(["tensor_chain=loud", "a=b=c", "=debug", "bad-target", "x/foo"]);
    expect(problems[0]?.message).toContain('"loud" is not a level');
    expect(levelFor("tensor_chain::raft", directives)).toBe("trace");
    expect(levelFor("tensor_chain", directives)).toBe("info");
  });
});

describe("logger", () => {
  test("text lines carry time, padded level, target, message and fields", () => {
    const { lines, options } = capture({ env: {} });
    createLogger(options).child("wal").info("segment opened", { seq: 3, path: "/var/lib/svc/raft/wal/a b.wal", ok: true });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO  tensor_chain::wal segment opened seq=3 path="\/var\/lib\/svc\/raft\/wal\/a b.wal" ok=true$/);
  });

  test("SVC_LOG_FORMAT=json gives one JSON object a line with ts, level, target, msg and the fields", () => {
    const { lines, options } = capture({ env: { SVC_LOG_FORMAT: "json" } });
    createLogger(options).child("raft").warn("term changed", { term: 7n, msg: "shadowed", err: new Error("boom") });
    expect(lines).toHaveLength(1);
    const record = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(record).toMatchObject({ level: "warn", target: "tensor_chain::raft", msg: "term changed", term: "7", field_msg: "shadowed", err: "boom" });
    expect(typeof record["ts"]).toBe("string");
  });

  test("the format option overrides SVC_LOG_FORMAT", () => {
    const { lines, options } = capture({ env: { SVC_LOG_FORMAT: "json" }, format: "text" });
    createLogger(options).info("hello");
    expect(lines[0]).toContain("INFO  tensor_chain hello");
  });

  test("records below a target's level are not written and enabled() says so", () => {
    const { lines, options } = capture({ env: { RUST_LOG: "tensor_chain=warn,tensor_chain::raft=trace" } });
    const root = createLogger(options);
    const wal = root.child("wal");
    const raft = root.child("raft");
    wal.info("hidden");
    wal.warn("shown");
    raft.trace("also shown");
    expect(wal.enabled("info")).toBe(false);
    expect(wal.enabled("error")).toBe(true);
    expect(raft.enabled("trace")).toBe(true);
    expect(lines.map((l) => l.split(" ").slice(1).join(" ").trim())).toEqual(["WARN  tensor_chain::wal shown", "TRACE tensor_chain::raft also shown"]);
  });

  test("child of a child extends the target by one segment", () => {
    const { lines, options } = capture({ env: { RUST_LOG: "tensor_chain::raft=off" } });
    const log = createLogger(options).child("raft").child("progress");
    log.error("not written");
    expect(log.enabled("error")).toBe(false);
    expect(lines).toEqual([]);
  });

  test("an invalid directive is warned about, naming it, and ignored", () => {
    const { lines, options } = capture({ env: { RUST_LOG: "error,tensor_chain=loud" } });
    const log = createLogger(options);
    log.warn("filtered out by the error default");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain("WARN  tensor_chain::log ignoring RUST_LOG directive \"tensor_chain=loud\"");
  });

  test("repeated identical lines are all written", () => {
    const { lines, options } = capture({ env: {} });
    const log = createLogger(options);
    for (let i = 0; i < 20; i++) log.info("same");
    expect(lines).toHaveLength(20);
  });
});
