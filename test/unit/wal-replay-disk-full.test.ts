// wal-replay on a data directory whose file system has no room for the new WAL, on a real small
// tmpfs (mounted here, so these tests run as root and are skipped otherwise): the refusal says
// what ran out and what to do, and leaves the data directory as it was, so the same command
// succeeds once there is room.

import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openArchiveSource, parseReplayTarget, replayWalArchive } from "../../src/backup/index.ts";
import { archiveSegmentName, dataPaths, encodeArchiveSegment, snapshotDirName } from "../../src/storage/index.ts";
import type { Entry } from "../../src/raft/types.ts";
import { SvcError, silentLogger } from "../../src/util/index.ts";

const canMount = process.getuid?.() === 0;
const MIB = 1024 * 1024;
const t0 = Date.parse("2026-11-22T10:00:00Z");

let mountDir = "";
let archiveDir = "";
beforeEach(() => {
  archiveDir = fs.mkdtempSync(join(tmpdir(), "svc-replay-full-archive-"));
  if (!canMount) return;
  mountDir = fs.mkdtempSync(join(tmpdir(), "svc-replay-full-"));
  const r = Bun.spawnSync(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mountDir]);
  if (r.exitCode !== 0) throw new Error(`mount failed: ${r.stderr.toString()}`);
});
afterEach(() => {
  fs.rmSync(archiveDir, { recursive: true, force: true });
  if (!canMount) return;
  Bun.spawnSync(["umount", "-l", mountDir]);
  fs.rmSync(mountDir, { recursive: true, force: true });
});

function entry(index: number): Entry {
  return { term: 1, index, kind: "normal", timestampMs: t0 + index * 1000, data: new TextEncoder().encode(`write ${index}`) };
}

/** A stopped node's data dir as SPEC §4.5 step 3 leaves it: raft/ holds only a snapshot at `index`. */
function nodeWithSnapshot(dataDir: string, index: number): void {
  const paths = dataPaths(dataDir);
  const snapDir = join(paths.snapshotsDir, snapshotDirName(1, index));
  fs.mkdirSync(snapDir, { recursive: true });
  const state = Buffer.from(`image at ${index}`);
  fs.writeFileSync(join(snapDir, "state.db"), state);
  fs.writeFileSync(join(snapDir, "meta.json"), JSON.stringify({
    formatVersion: 1, clusterId: "c-1", index, term: 1, membership: { voters: ["node1"], learners: [] },
    createdAt: new Date(t0 + index * 1000 + 100).toISOString(), stateSha256: createHash("sha256").update(state).digest("hex"), stateSizeBytes: state.length,
  }));
}

/** Write `path` until the file system has no byte left. */
function fillUp(path: string): void {
  const fd = fs.openSync(path, "w");
  try {
    for (const chunk of [Buffer.alloc(64 * 1024), Buffer.alloc(1)]) {
      for (;;) {
        try {
          fs.writeSync(fd, chunk);
        } catch {
          break;
        }
      }
    }
  } finally {
    fs.closeSync(fd);
  }
}

function files(dir: string): string[] {
  return (fs.readdirSync(dir, { recursive: true }) as string[]).filter((n) => n !== "LOCK").sort();
}

describe.skipIf(!canMount)("wal-replay on a full disk", () => {
  test("no room for the new WAL: refused as DISK_FULL naming the free space and what to do, nothing changed; with room it replays", async () => {
    const dataDir = join(mountDir, "data");
    nodeWithSnapshot(dataDir, 10);
    const entries: Entry[] = [];
    for (let i = 1; i <= 20; i++) entries.push(entry(i));
    fs.writeFileSync(join(archiveDir, archiveSegmentName({ firstIndex: 1, lastIndex: 20, term: 1 })), encodeArchiveSegment(entries, "c-1"));
    const run = (segmentSizeBytes: number) => replayWalArchive({
      dataDir, source: openArchiveSource(archiveDir), until: parseReplayTarget(new Date(t0 + 15_000).toISOString()), segmentSizeBytes, logger: silentLogger,
    });
    const before = files(dataDir);
    const e = await run(8 * MIB).then(() => null, (x: unknown) => x);
    expect(e).toBeInstanceOf(SvcError);
    const refused = e as SvcError;
    expect(refused.code).toBe("DISK_FULL");
    expect(refused.message).toContain("bytes free");
    expect(refused.hint).toContain("free space");
    expect(refused.hint).toContain("wal.segment_size_mb");
    expect(files(dataDir)).toEqual(before);
    const done = await run(1 * MIB);
    expect(done.lastIndex).toBe(15);
  });

  test("the disk filling after the new WAL was moved in: DISK_FULL says what was done and what is left, and the commands it gives make the next run succeed", async () => {
    const dataDir = join(mountDir, "data");
    nodeWithSnapshot(dataDir, 10);
    const entries: Entry[] = [];
    for (let i = 1; i <= 20; i++) entries.push(entry(i));
    fs.writeFileSync(join(archiveDir, archiveSegmentName({ firstIndex: 1, lastIndex: 20, term: 1 })), encodeArchiveSegment(entries, "c-1"));
    const filler = join(mountDir, "filler");
    const run = (fill: boolean) => replayWalArchive({
      dataDir, source: openArchiveSource(archiveDir), until: parseReplayTarget(new Date(t0 + 15_000).toISOString()), segmentSizeBytes: 1 * MIB, logger: silentLogger,
      // Reported once the new WAL is written in full, before it is moved in: another writer fills the disk then.
      onProgress: () => {
        if (fill) fillUp(filler);
      },
    });
    const e = await run(true).then(() => null, (x: unknown) => x);
    expect(e).toBeInstanceOf(SvcError);
    const failed = e as SvcError;
    expect(failed.code).toBe("DISK_FULL");
    const paths = dataPaths(dataDir);
    expect(failed.message).toContain(`after the new WAL was moved into ${paths.walDir}`);
    expect(failed.hint).toContain(`done: move the new WAL (entries 11…16) into ${paths.walDir}; failed: write ${paths.hardStatePath}`);
    expect(failed.hint).toContain(`not done: write ${join(paths.raftDir, "LOG_START")}`);
    expect(failed.hint).toContain("A second run refuses");
    // The hint's commands, as an operator would run them: room made, what the run wrote removed, the same command again.
    fs.rmSync(filler);
    const command = /`(rm -f [^`]+)`/.exec(failed.hint ?? "")?.[1] ?? "";
    expect(command).not.toBe("");
    expect(Bun.spawnSync(["sh", "-c", command]).exitCode).toBe(0);
    const done = await run(false);
    expect(done.lastIndex).toBe(15);
  });
});
