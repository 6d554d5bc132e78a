// The point-in-time restore part of `bun run bench -- --wal-replay N`: an archive of N entries
// (about 100 bytes each, in segments of 64 MiB as the leader cuts them; BENCH_SEGMENT_MB sets
// another size) after a snapshot, and
// `svc admin wal-replay` run on it as an operator would: entries per second, and the
// command's peak RSS (it streams segment by segment, so it stays bounded whatever N is).
// Prints figures; asserts nothing.

import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { archiveSegmentName, encodeArchiveSegment } from "../src/storage/index.ts";
import type { Entry } from "../src/util/log-data.ts";
import { peakRssMb } from "./_lib.ts";

const segmentBytes = (Number(process.env.BENCH_SEGMENT_MB ?? "64")) * 1024 * 1024;


export async function benchWalReplay(options: { bin: string[]; entries: number }): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "svc-bench-replay-"));
  try {
    const archive = join(dir, "archive");
    mkdirSync(archive);
    const t0 = Date.parse("2026-01-01T00:00:00Z");
    const body = JSON.stringify({ op: "execute", statements: [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: ["k-0000000", "v".repeat(32)] }] });
    const data = new TextEncoder().encode(body);
    let batch: Entry[] = [];
    let bytes = 0;
    const flush = (): void => {
      const first = batch[0];
      const last = batch.at(-1);
      if (first === undefined || last === undefined) return;
      writeFileSync(join(archive, archiveSegmentName({ firstIndex: first.index, lastIndex: last.index, term: 1 })), encodeArchiveSegment(batch));
      batch = [];
      bytes = 0;
    };
    for (let i = 2; i <= options.entries + 1; i++) {
      batch.push({ term: 1, index: i, kind: "normal", timestampMs: t0 + i, data });
      bytes += data.length + 34;
      if (bytes >= segmentBytes) flush();
    }
    flush();
    const dataDir = join(dir, "node1");
    const snap = join(dataDir, "raft", "snapshots", "0000000000000001-0000000000000001");
    mkdirSync(snap, { recursive: true });
    const state = Buffer.from("image");
    writeFileSync(join(snap, "state.db"), state);
    writeFileSync(join(snap, "meta.json"), JSON.stringify({
      formatVersion: 1, clusterId: "bench", index: 1, term: 1, membership: { voters: ["node1"], learners: [] },
      createdAt: new Date(t0).toISOString(), stateSha256: createHash("sha256").update(state).digest("hex"), stateSizeBytes: state.length,
    }));
    const started = performance.now();
    const proc = Bun.spawn([...options.bin, "admin", "wal-replay", "--wal-dir", archive, "--until", new Date(t0 + options.entries + 10_000).toISOString(), "--data-dir", dataDir, "--json"], {
      stdout: "pipe", stderr: "pipe",
    });
    let peak = 0;
    const poll = setInterval(() => {
      peak = Math.max(peak, peakRssMb(proc.pid));
    }, 20);
    const out = await new Response(proc.stdout).text();
    const code = await proc.exited;
    clearInterval(poll);
    const wallS = (performance.now() - started) / 1000;
    if (code !== 0) {
      process.stdout.write(`wal-replay: failed (exit ${code}): ${await new Response(proc.stderr).text()}\n`);
      return;
    }
    const report = JSON.parse(out) as { entries: number; entriesPerSecond: number; durationMs: number };
    process.stdout.write(
      `wal-replay: ${report.entries} entries in ${(report.durationMs / 1000).toFixed(2)} s (${report.entriesPerSecond} entries/s; ` +
        `${wallS.toFixed(2)} s with process start), peak RSS ${peak.toFixed(0)} MB\n`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
