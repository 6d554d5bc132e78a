// The WAL archive in an object store, against a real S3 server on loopback (s3rver):
// `wal-archive-put` as archive_command stores segments (again is fine when identical, never
// over another history), and wal-replay reads them back with --wal-dir s3://….

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { listArchive, openArchiveSource, parseReplayTarget, putArchivedSegment, replayWalArchive } from "../../src/backup/index.ts";
import { Wal, archiveSegmentName, dataPaths, encodeArchiveSegment, snapshotDirName } from "../../src/storage/index.ts";
import type { Entry } from "../../src/raft/types.ts";
import { silentLogger } from "../../src/util/index.ts";
import { startS3Server, type S3Server } from "../lib/s3-server.ts";

let s3: S3Server;
const saved: Record<string, string | undefined> = {};
const dirs: string[] = [];
beforeAll(async () => {
  s3 = await startS3Server();
  for (const [k, v] of Object.entries(s3.env)) {
    saved[k] = process.env[k];
    process.env[k] = v;
  }
});
afterAll(async () => {
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  await s3?.stop();
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const d = fs.mkdtempSync(join(tmpdir(), "svc-archive-s3-"));
  dirs.push(d);
  return d;
}

const t0 = Date.parse("2026-11-22T10:00:00Z");
function entries(first: number, last: number, term = 1): Entry[] {
  return Array.from({ length: last - first + 1 }, (_, i) => ({
    term, index: first + i, kind: "normal" as const, timestampMs: t0 + (first + i) * 1000, data: new TextEncoder().encode(`write ${first + i}`),
  }));
}

/** A staged segment file as the node hands it to archive_command (%p). */
function staged(first: number, last: number, term = 1): string {
  const path = join(tempDir(), archiveSegmentName({ firstIndex: first, lastIndex: last, term }));
  fs.writeFileSync(path, encodeArchiveSegment(entries(first, last, term)));
  return path;
}

describe("WAL archive in an object store", () => {
  test("wal-archive-put stores a segment under its name, again when identical, and never over another history", async () => {
    const url = `s3://${s3.bucket}/c1/wal`;
    const a = staged(1, 20);
    expect((await putArchivedSegment(a, `${url}/${a.split("/").at(-1)}`)).stored).toBe("written");
    expect((await putArchivedSegment(a, `${url}/`)).stored).toBe("already_there");
    const other = staged(1, 20);
    fs.writeFileSync(other, encodeArchiveSegment(entries(1, 20).map((e) => ({ ...e, data: new TextEncoder().encode("other") }))));
    await expect(putArchivedSegment(other, url)).rejects.toThrow("other contents");
    expect((await listArchive(url)).map((s) => s.name)).toEqual([a.split("/").at(-1) ?? ""]);
  });

  test("wal-replay reads the archive from s3://", async () => {
    const url = `s3://${s3.bucket}/c2/wal`;
    for (const [f, l] of [[1, 20], [21, 40]] as const) await putArchivedSegment(staged(f, l), url);
    const dataDir = tempDir();
    const paths = dataPaths(dataDir);
    const snap = join(paths.snapshotsDir, snapshotDirName(1, 10));
    fs.mkdirSync(snap, { recursive: true });
    const state = Buffer.from("image");
    fs.writeFileSync(join(snap, "state.db"), state);
    fs.writeFileSync(join(snap, "meta.json"), JSON.stringify({
      formatVersion: 1, clusterId: "c-2", index: 10, term: 1, membership: { voters: ["node1"], learners: [] },
      createdAt: new Date(t0 + 10_500).toISOString(), stateSha256: createHash("sha256").update(state).digest("hex"), stateSizeBytes: state.length,
    }));
    const r = await replayWalArchive({
      dataDir, source: openArchiveSource(url), until: parseReplayTarget(new Date(t0 + 30_000).toISOString()), segmentSizeBytes: 1 << 20, logger: silentLogger,
    });
    expect(r.lastIndex).toBe(30);
    const replayed = Wal.open(paths.walDir, { segmentSizeBytes: 1 << 20, logger: silentLogger }).entries.map((e) => e.index);
    // Entries 11..30, then the restore's own mark that the archive holds them (31).
    expect(replayed).toEqual(Array.from({ length: 21 }, (_, i) => 11 + i));
  });
});
