// wal-repair never makes things worse: on real temp dirs, through storage's public surface.
// Every intact entry after the newest snapshot is kept, damage the snapshot covers loses
// nothing, the indexes lost are reported exactly and recorded for the node, and the repaired
// WAL always opens and continues from the snapshot.

import { afterEach, describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  Wal, hasLostLog, listSegments, readEntriesLost, readHardState, repairWal, writeHardState,
} from "../../src/storage/index.ts";
import type { Entry } from "../../src/raft/types.ts";
import { SvcError, silentLogger } from "../../src/util/index.ts";

const dirs: string[] = [];
function tempDir(): string {
  const d = fs.mkdtempSync(join(tmpdir(), "svc-repair-"));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

const opts = { segmentSizeBytes: 64 * 1024, logger: silentLogger };

/** An entry whose data holds a marker unique to its index, so a test can find its record's bytes. */
function entry(index: number, term = 1): Entry {
  return { term, index, kind: "normal", timestampMs: 1_700_000_000_000 + index, data: new TextEncoder().encode(`entry-${String(index).padStart(6, "0")}-payload`) };
}

/** raft/wal with entries 1..count, in segments of `segmentSizeBytes`. */
function writeLog(count: number, segmentSizeBytes = opts.segmentSizeBytes): { raftDir: string; walDir: string } {
  const raftDir = join(tempDir(), "raft");
  const walDir = join(raftDir, "wal");
  const { wal } = Wal.open(walDir, { ...opts, segmentSizeBytes });
  for (let i = 1; i <= count; i++) wal.append([entry(i)]);
  wal.sync();
  wal.close();
  return { raftDir, walDir };
}

/** Flip one byte inside the record of entry `index` (its CRC no longer matches). */
function damageEntry(walDir: string, index: number): void {
  const marker = Buffer.from(`entry-${String(index).padStart(6, "0")}-payload`);
  for (const segment of listSegments(walDir)) {
    const bytes = fs.readFileSync(segment.path);
    const at = bytes.indexOf(marker);
    if (at < 0) continue;
    bytes[at + 3] = (bytes[at + 3] ?? 0) ^ 0x40;
    fs.writeFileSync(segment.path, bytes);
    return;
  }
  throw new Error(`entry ${index} not found`);
}

function indexes(walDir: string): number[] {
  return Wal.open(walDir, opts).entries.map((e) => e.index);
}

const range = (from: number, to: number): number[] => Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe("wal-repair", () => {
  test("damage below the newest snapshot loses nothing: every entry after the snapshot is kept", () => {
    const { raftDir, walDir } = writeLog(60);
    damageEntry(walDir, 10);
    const report = repairWal(walDir, { dryRun: false, snapshotIndex: 40 });
    expect(report.lost).toEqual([]);
    expect(report.setAside).toBeNull();
    expect(report.coveredBySnapshot).toBe(true);
    expect(report.kept).toEqual({ from: 41, to: 60 });
    expect(indexes(walDir)).toEqual(range(41, 60));
    expect(readEntriesLost(raftDir)).toBeNull();
    expect(hasLostLog(raftDir)).toBe(false);
  });

  test("the repaired WAL continues right after the snapshot, so the next append leaves no gap", () => {
    const { walDir } = writeLog(60);
    damageEntry(walDir, 10);
    repairWal(walDir, { dryRun: false, snapshotIndex: 60 });
    const { wal, entries } = Wal.open(walDir, opts);
    expect(entries).toEqual([]);
    expect(listSegments(walDir)[0]?.firstIndex).toBe(61);
    wal.append([entry(61, 2)]);
    wal.sync();
    wal.close();
    expect(indexes(walDir)).toEqual([61]);
  });

  test("damage above the snapshot: the lost index is reported exactly, the intact entries after it are set aside, and the loss is recorded", () => {
    const { raftDir, walDir } = writeLog(60);
    damageEntry(walDir, 50);
    const report = repairWal(walDir, { dryRun: false, snapshotIndex: 40 });
    expect(report.lost).toEqual([{ from: 50, to: 50 }]);
    expect(report.setAside).toEqual({ from: 51, to: 60 });
    expect(report.kept).toEqual({ from: 41, to: 49 });
    expect(indexes(walDir)).toEqual(range(41, 49));
    expect(readEntriesLost(raftDir)?.lost).toEqual([{ from: 50, to: 50 }]);
    // A member that lost entries does not vote until a leader has caught it up.
    expect(hasLostLog(raftDir)).toBe(true);
    // The old WAL is kept whole.
    expect(fs.readdirSync(report.quarantineDir ?? "").length).toBeGreaterThan(0);
  });

  test("damage on both sides of the snapshot: only what lies above it is lost", () => {
    const { walDir } = writeLog(80, 2000);
    damageEntry(walDir, 5);
    damageEntry(walDir, 70);
    const report = repairWal(walDir, { dryRun: false, snapshotIndex: 30 });
    expect(report.damages.length).toBe(2);
    expect(report.lost).toEqual([{ from: 70, to: 70 }]);
    expect(report.setAside).toEqual({ from: 71, to: 80 });
    expect(indexes(walDir)).toEqual(range(31, 69));
  });

  test("a dry run changes nothing and reports what a repair would do", () => {
    const { walDir } = writeLog(30);
    damageEntry(walDir, 20);
    const before = listSegments(walDir).map((s) => fs.readFileSync(s.path));
    const report = repairWal(walDir, { dryRun: true, snapshotIndex: 10 });
    expect(report.lost).toEqual([{ from: 20, to: 20 }]);
    expect(listSegments(walDir).map((s) => fs.readFileSync(s.path))).toEqual(before);
    expect(() => Wal.open(walDir, opts)).toThrow(/WAL is corrupt/);
  });

  test("a repair interrupted between its two renames is finished by running it again", () => {
    const { walDir } = writeLog(30);
    damageEntry(walDir, 5);
    repairWal(walDir, { dryRun: false, snapshotIndex: 10 });
    // As if the crash came after the old WAL was moved aside and before the new one was renamed in.
    fs.renameSync(walDir, `${walDir}.repair-tmp`);
    const again = repairWal(walDir, { dryRun: false, snapshotIndex: 10 });
    expect(again.damage).toBeNull();
    expect(indexes(walDir)).toEqual(range(11, 30));
  });
});

describe("a damaged hard state", () => {
  test("its error never advises removing raft/ (a lone node's whole data) and names the repair that keeps all data", () => {
    const raftDir = join(tempDir(), "raft");
    fs.mkdirSync(raftDir, { recursive: true });
    const path = join(raftDir, "hardstate");
    writeHardState(path, { term: 3, vote: "node1", commit: 10, clusterId: "c" });
    const bytes = fs.readFileSync(path);
    bytes[bytes.length - 3] = (bytes[bytes.length - 3] ?? 0) ^ 0x01;
    fs.writeFileSync(path, bytes);
    let error: unknown;
    try {
      readHardState(path);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(SvcError);
    const hint = (error as SvcError).hint ?? "";
    expect(hint).toContain("wal-repair --skip-corrupted");
    expect(hint).toContain("Do not remove raft/");
  });
});
