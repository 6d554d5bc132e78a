// What the disk under the data directory does with the WAL's pattern on its own: small writes
// into a preallocated file, each followed by fdatasync, one at a time. Printed before the
// single-node rows, so that a slow or stalling disk is told apart from a slow node.

import { closeSync, fdatasyncSync, openSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import { summarize } from "./_lib.ts";

export interface DiskProbe {
  syncs: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** fdatasync calls that took longer than 30 ms. */
  over30Ms: number;
  seconds: number;
}

export function probeDisk(dir: string, durationMs: number): DiskProbe {
  const path = join(dir, "disk-probe");
  const fd = openSync(path, "w+");
  try {
    const sizeBytes = 64 * 1024 * 1024;
    const chunk = new Uint8Array(1024 * 1024);
    for (let at = 0; at < sizeBytes; at += chunk.length) writeSync(fd, chunk, 0, chunk.length, at);
    fdatasyncSync(fd);
    const record = new Uint8Array(4096).fill(0x5a);
    const latencies: number[] = [];
    const started = performance.now();
    let at = 0;
    while (performance.now() - started < durationMs) {
      writeSync(fd, record, 0, record.length, at);
      at = (at + record.length) % sizeBytes;
      const t0 = performance.now();
      fdatasyncSync(fd);
      latencies.push(performance.now() - t0);
    }
    const elapsedMs = performance.now() - started;
    const { p50Ms, p99Ms } = summarize(latencies, 0, elapsedMs);
    return {
      syncs: latencies.length,
      p50Ms,
      p99Ms,
      maxMs: latencies.reduce((max, l) => Math.max(max, l), 0),
      over30Ms: latencies.filter((l) => l > 30).length,
      seconds: elapsedMs / 1000,
    };
  } finally {
    closeSync(fd);
    rmSync(path, { force: true });
  }
}

export function describeDisk(p: DiskProbe): string {
  return `disk alone (4 KiB write + fdatasync, ${p.seconds.toFixed(0)} s): ${p.syncs} syncs, p50 ${p.p50Ms.toFixed(2)} ms, ` +
    `p99 ${p.p99Ms.toFixed(2)} ms, max ${p.maxMs.toFixed(0)} ms, ${p.over30Ms} over 30 ms`;
}
