// Write admission (http/in-flight.ts): bodies admitted and not yet answered stay within their
// share of max_memory_mb; a lone request always passes; past the node's RSS share only a lone
// one does; garbage is collected after each share's worth of bodies.

import { describe, expect, test } from "bun:test";
import { InFlightBytes } from "../../src/http/in-flight.ts";
import { MetricsRegistry } from "../../src/metrics/index.ts";
import { SvcError } from "../../src/util/errors.ts";
import { errorResponse } from "../../src/http/errors.ts";

const settings = { paths: ["/v1/execute"], bytesMax: 1000, rssBytesMax: 0, maxMemoryMb: 128, collectEveryBytes: 0 };

function admitted(r: ReturnType<InFlightBytes["admit"]>) {
  if (r instanceof SvcError) throw new Error(`refused: ${r.message}`);
  return r;
}

describe("in-flight write bytes", () => {
  test("requests are admitted while their bytes fit the share, and refused past it", () => {
    const f = new InFlightBytes(settings);
    admitted(f.admit(600));
    admitted(f.admit(400));
    expect(f.bytes).toBe(1000);
    const refused = f.admit(1);
    expect(refused).toBeInstanceOf(SvcError);
    expect((refused as SvcError).code).toBe("MEMORY_BACKPRESSURE");
    expect((refused as SvcError).message).toContain("max_memory_mb (128 MB)");
    expect(f.bytes).toBe(1000);
    expect(f.requests).toBe(2);
  });

  test("a refusal is a 503 with Retry-After and the code", async () => {
    const f = new InFlightBytes(settings);
    admitted(f.admit(1000));
    const response = errorResponse(f.admit(10));
    expect(response.status).toBe(503);
    expect(response.headers.get("retry-after")).toBe("1");
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe("MEMORY_BACKPRESSURE");
  });

  test("answered requests give their bytes back, once", () => {
    const f = new InFlightBytes(settings);
    const a = admitted(f.admit(900));
    expect(f.admit(200)).toBeInstanceOf(SvcError);
    a.release();
    a.release();
    expect(f.bytes).toBe(0);
    expect(f.requests).toBe(0);
    admitted(f.admit(200));
    expect(f.bytes).toBe(200);
  });

  test("a lone request passes whatever its size", () => {
    const f = new InFlightBytes(settings);
    const big = admitted(f.admit(5000));
    expect(f.admit(1)).toBeInstanceOf(SvcError);
    big.release();
    admitted(f.admit(5000));
  });

  test("bodiless requests always pass and hold nothing", () => {
    const f = new InFlightBytes(settings);
    admitted(f.admit(1000));
    admitted(f.admit(0));
    expect(f.bytes).toBe(1000);
  });

  test("a chunked body is counted as it grows and refused once it passes the share", () => {
    const f = new InFlightBytes(settings);
    const other = admitted(f.admit(500));
    const chunked = admitted(f.admit(0));
    expect(chunked.grow(400)).toBeNull();
    expect(f.bytes).toBe(900);
    expect(chunked.grow(200)?.code).toBe("MEMORY_BACKPRESSURE");
    other.release();
    // Alone now: it may grow past the share.
    expect(chunked.grow(5000)).toBeNull();
    chunked.release();
    expect(f.bytes).toBe(0);
  });

  test("past the node's RSS share only a lone request is admitted", () => {
    let rss = 50;
    const f = new InFlightBytes({ ...settings, rssBytesMax: 100 }, () => rss);
    const first = admitted(f.admit(10));
    rss = 150;
    const refused = f.admit(10);
    expect((refused as SvcError).code).toBe("MEMORY_BACKPRESSURE");
    expect((refused as SvcError).message).toContain("max_memory_mb");
    first.release();
    admitted(f.admit(10));
  });

  test("garbage is collected once a share's worth of bodies was answered or refused", () => {
    let collected = 0;
    const f = new InFlightBytes({ ...settings, collectEveryBytes: 1000 }, () => 0, () => collected++);
    admitted(f.admit(600)).release();
    expect(collected).toBe(0);
    const held = admitted(f.admit(900));
    expect(f.admit(300)).toBeInstanceOf(SvcError);
    expect(collected).toBe(0);
    held.release();
    expect(collected).toBe(1);
  });

  test("forced collections are spaced, however fast bodies are refused: at most a tenth of the node's time", () => {
    let nowMs = 0;
    let collected = 0;
    // Each collection takes 20 ms of the fake clock.
    const f = new InFlightBytes({ ...settings, collectEveryBytes: 1000 }, () => 0, () => {
      collected++;
      nowMs += 20;
    }, () => nowMs);
    const held = admitted(f.admit(900));
    // A refused 600-byte body every millisecond for a second: 600 KB of bodies done with.
    for (let i = 0; i < 1000; i++) {
      expect(f.admit(600)).toBeInstanceOf(SvcError);
      nowMs += 1;
    }
    // One per 9 × 20 ms after each (the 20 ms each took counted in the clock too).
    expect(collected).toBeGreaterThanOrEqual(5);
    expect(collected).toBeLessThanOrEqual(1 + Math.ceil(1000 / (9 * 20 + 20)));
    // The bytes held back by the gap are not forgotten: the next body after it collects.
    const before = collected;
    nowMs += 1000;
    held.release();
    expect(collected).toBe(before + 1);
  });

  test("with the node's memory under half its share, no collection is forced", () => {
    let collected = 0;
    let rss = 40;
    const f = new InFlightBytes({ ...settings, rssBytesMax: 100, collectEveryBytes: 1000 }, () => rss, () => collected++);
    admitted(f.admit(1200)).release();
    expect(collected).toBe(0);
    rss = 60;
    admitted(f.admit(1200)).release();
    expect(collected).toBe(1);
  });

  test("refusals and forced collections are counted in the node's metrics, with what is held now", () => {
    const f = new InFlightBytes({ ...settings, collectEveryBytes: 1000 }, () => 0, () => undefined);
    const registry = new MetricsRegistry();
    f.registerMetrics(registry);
    const held = admitted(f.admit(900));
    expect(f.admit(300)).toBeInstanceOf(SvcError);
    let text = registry.render();
    expect(text).toContain('tensor_chain_write_admission_refused_total{reason="bytes"} 1');
    expect(text).toContain("tensor_chain_write_admission_inflight_bytes 900");
    expect(text).toContain("tensor_chain_write_admission_inflight_bytes_max 1000");
    held.release();
    text = registry.render();
    expect(text).toContain("tensor_chain_write_admission_inflight_bytes 0");
    expect(text).toContain("tensor_chain_write_admission_collections_total 1");
  });

  test("only the write path is counted", () => {
    const f = new InFlightBytes(settings);
    expect(f.counts("/v1/execute")).toBe("write");
    expect(f.counts("/v1/execute?x=1")).toBe("write");
    expect(f.counts("/v1/query")).toBe(null);
    expect(f.counts("/health")).toBe(null);
  });

  test("read bodies have a share of their own: refused past it, never for the writes in flight or the node's RSS", () => {
    // The node's RSS is past its share: writes are refused unless alone, reads are not.
    const f = new InFlightBytes({ ...settings, readPaths: ["/v1/query"], rssBytesMax: 100 }, () => 200);
    expect(f.counts("/v1/query?x=1")).toBe("read");
    const write = admitted(f.admit(1000, "write"));
    expect((f.admit(10, "write") as SvcError).code).toBe("MEMORY_BACKPRESSURE");
    // The write share is full: a read passes all the same.
    const first = admitted(f.admit(10, "read"));
    const small = admitted(f.admit(10, "read"));
    // Many large read bodies at once: past their share, refused as writes are.
    const large = f.admit(990, "read");
    expect(large).toBeInstanceOf(SvcError);
    expect((large as SvcError).code).toBe("MEMORY_BACKPRESSURE");
    expect(f.bytes).toBe(1000);
    // A chunked read body grows past the share: refused as it arrives.
    expect(small.grow(985)?.code).toBe("MEMORY_BACKPRESSURE");
    first.release();
    small.release();
    write.release();
    expect(f.bytes).toBe(0);
    // A read alone passes whatever its size, as a write does.
    admitted(f.admit(5000, "read"));
  });
});
