// WalReader: committed entries read back out of the live WAL in batches bounded by bytes, a
// cursor that continues where it stopped, across segments, never returning a record that a
// later rewrite superseded.

import { afterEach, describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Wal, WalReader, listSegments } from "../../src/storage/index.ts";
import { walMarkEveryEntries } from "../../src/storage/wal.ts";
import { walReadWindowBytes } from "../../src/storage/wal-reader.ts";
import type { Entry } from "../../src/raft/types.ts";
import { silentLogger } from "../../src/util/index.ts";

const dirs: string[] = [];
function tempDir(): string {
  const d = fs.mkdtempSync(join(tmpdir(), "svc-wal-reader-"));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function entry(index: number, term = 1, size = 100): Entry {
  const data = new Uint8Array(size);
  for (let i = 0; i < size; i++) data[i] = (index * 31 + term * 7 + i) & 0xff;
  return { term, index, kind: "normal", timestampMs: 1_700_000_000_000 + index, data };
}

const segmentSizeBytes = 4096;
const opts = { segmentSizeBytes, logger: silentLogger };

function walWith(dir: string, entries: Entry[]): Wal {
  const { wal } = Wal.open(dir, opts);
  for (const e of entries) wal.append([e]);
  wal.sync();
  return wal;
}

const range = (from: number, to: number, term = 1): Entry[] => Array.from({ length: to - from + 1 }, (_, i) => entry(from + i, term));

describe("wal reader", () => {
  test("reads in batches bounded by bytes, the first entry being the append's prevIndex", async () => {
    const wal = walWith(tempDir(), range(1, 200));
    const reader = new WalReader(wal);
    const batch = await reader.read(10, 200, 1000);
    expect(batch).not.toBeNull();
    // 1000 bytes of data after the first entry: ten entries of 100 bytes, plus the first.
    expect(batch!.map((e) => e.index)).toEqual(range(10, 20).map((e) => e.index));
    expect(batch).toEqual(range(10, 20));
    // Never past `through`, and at least two entries (one to send) even with a tiny bound.
    expect((await reader.read(195, 197, 1 << 20))!.map((e) => e.index)).toEqual([195, 196, 197]);
    expect((await reader.read(50, 200, 1))!.map((e) => e.index)).toEqual([50, 51]);
    wal.close();
  });

  test("continues across segments where it stopped, reading only about what it returns", async () => {
    const wal = walWith(tempDir(), range(1, 400));
    expect(wal.segments().length).toBeGreaterThan(10);
    const windowBytes = 512;
    const reader = new WalReader(wal, windowBytes);
    const got: Entry[] = [];
    let from = 2;
    for (;;) {
      const before = reader.stats.bytesRead;
      const batch = await reader.read(from, 400, 2000);
      expect(batch).not.toBeNull();
      expect(batch![0]!.index).toBe(from);
      got.push(...(got.length === 0 ? batch! : batch!.slice(1)));
      // About the records returned (134 bytes each), a window ahead and a header per segment crossed.
      const recordsBytes = (batch!.length - 1) * 134;
      expect(reader.stats.bytesRead - before).toBeLessThanOrEqual(recordsBytes + 3 * windowBytes + 400);
      const last = batch!.at(-1)!.index;
      if (last === 400) break;
      from = last; // the next append's prevIndex
    }
    expect(got).toEqual(range(2, 400));
    // One seek for the first read; every later read went on from the cursor.
    expect(reader.stats.seeks).toBe(1);
    wal.close();
  });

  test("a read that does not continue the last one seeks, and finds the same entries", async () => {
    const wal = walWith(tempDir(), range(1, 300));
    const reader = new WalReader(wal, 512);
    expect((await reader.read(250, 260, 1 << 20))).toEqual(range(250, 260));
    expect((await reader.read(7, 9, 1 << 20))).toEqual(range(7, 9));
    expect(reader.stats.seeks).toBe(2);
    wal.close();
  });

  test("a seek into a large segment starts at the WAL's nearest mark, not at the segment's start", async () => {
    const { wal } = Wal.open(tempDir(), { segmentSizeBytes: 64 * 1024 * 1024, logger: silentLogger });
    for (let i = 1; i <= 20_000; i += 100) wal.append(range(i, i + 99));
    wal.sync();
    expect(wal.segments().length).toBe(1);
    const reader = new WalReader(wal);
    expect(await reader.read(15_050, 15_060, 1 << 20)).toEqual(range(15_050, 15_060));
    // Scanning from the start would read 15,000 records of about 140 bytes (2 MB).
    expect(reader.stats.bytesRead).toBeLessThan(walMarkEveryEntries * 140 + 2 * walReadWindowBytes);
    // Every index reads back right, marks or not, backwards and forwards.
    for (const from of [1, 2, 1023, 1024, 1025, 1124, 5000, 19_999]) {
      expect(await reader.read(from, from + 1, 1 << 20)).toEqual(range(from, from + 1));
    }
    wal.close();
  });

  test("after a rewrite, a mark past the rewrite is gone and one before it is not used for the rewritten stretch", async () => {
    const { wal } = Wal.open(tempDir(), { segmentSizeBytes: 64 * 1024 * 1024, logger: silentLogger });
    for (let i = 1; i <= 5_000; i += 100) wal.append(range(i, i + 99));
    // A new leader replaced 3,000… with entries of its term, in batches of its own.
    for (let i = 3_000; i <= 6_000; i += 7) wal.append(range(i, Math.min(i + 6, 6_000), 2));
    wal.sync();
    expect(wal.markAtOrBefore(4_500)!.index).toBeGreaterThanOrEqual(3_000);
    const reader = new WalReader(wal);
    expect(await reader.read(4_500, 4_510, 1 << 20)).toEqual(range(4_500, 4_510, 2));
    expect(await reader.read(3_000, 3_002, 1 << 20)).toEqual(range(3_000, 3_002, 2));
    expect(await reader.read(2_999, 3_000, 1 << 20)).toBeNull(); // before the rewrite: not held
    wal.close();
  });

  test("after a rewrite of a suffix, only the records that replaced it are read; what it superseded is not held", async () => {
    const dir = tempDir();
    const wal = walWith(dir, range(1, 60));
    // A new leader replaced 40… with entries of its term.
    wal.append(range(40, 45, 2));
    wal.append(range(46, 80, 2));
    wal.sync();
    const reader = new WalReader(wal);
    expect(await reader.read(39, 80, 1 << 20)).toBeNull();
    const after = await reader.read(40, 80, 1 << 20);
    expect(after).toEqual(range(40, 80, 2));
    wal.close();
    // The same once the WAL is opened again: the rewrite is found on replay.
    const reopened = Wal.open(dir, opts).wal;
    const again = new WalReader(reopened);
    expect(await again.read(50, 60, 1 << 20)).toEqual(range(50, 60, 2));
    expect(await again.read(30, 60, 1 << 20)).toBeNull();
    reopened.close();
  });

  test("a rewrite that starts a new segment is found too", async () => {
    const dir = tempDir();
    const wal = walWith(dir, range(1, 100));
    const segmentsBefore = wal.segments().length;
    // Fill the current segment so the rewrite rolls to a new one named after its first index.
    while (wal.segments().at(-1)!.sizeBytes < segmentSizeBytes) wal.append([entry(wal.lastIndex + 1)]);
    const rewriteAt = wal.lastIndex - 3;
    wal.append(range(rewriteAt, rewriteAt + 20, 3));
    wal.sync();
    expect(wal.segments().length).toBeGreaterThan(segmentsBefore);
    const reader = new WalReader(wal);
    expect(await reader.read(rewriteAt - 1, rewriteAt + 20, 1 << 20)).toBeNull();
    expect(await reader.read(rewriteAt, rewriteAt + 20, 1 << 20)).toEqual(range(rewriteAt, rewriteAt + 20, 3));
    wal.close();
  });

  test("entries in segments removed behind an image, or before a start over, are not held", async () => {
    const dir = tempDir();
    const wal = walWith(dir, range(1, 200));
    const reader = new WalReader(wal);
    expect(await reader.read(5, 20, 1 << 20)).toEqual(range(5, 20));
    const removed = wal.removeSegmentsCoveredBy(100);
    expect(removed.length).toBeGreaterThan(0);
    const firstHeld = wal.segments()[0]!.firstIndex;
    // The cursor's segment went: the next read finds nothing, and a read from the first held entry works.
    expect(await reader.read(20, 30, 1 << 20)).toBeNull();
    expect(await reader.read(firstHeld, firstHeld + 5, 1 << 20)).toEqual(range(firstHeld, firstHeld + 5));
    // A snapshot installed: the log starts over at 301.
    wal.resetTo(301);
    wal.append(range(301, 320, 4));
    wal.sync();
    expect(await reader.read(150, 160, 1 << 20)).toBeNull();
    expect(await reader.read(301, 320, 1 << 20)).toEqual(range(301, 320, 4));
    expect(listSegments(dir).length).toBe(wal.segments().length);
    wal.close();
  });

  test("opened with the store ahead, the segments open skipped are read back once asked for, in windows", async () => {
    const dir = tempDir();
    walWith(dir, range(1, 300)).close();
    const { wal } = Wal.open(dir, { ...opts, keepEntriesAfter: 250 });
    // Open read nothing before its first segment past the store; the reader learns the rest.
    const firstRead = wal.finalFrom()!.index;
    expect(firstRead).toBeGreaterThan(1);
    expect(firstRead).toBeLessThanOrEqual(251);
    const reader = new WalReader(wal);
    expect(await reader.read(1, 300, 1 << 20)).toEqual(range(1, 300));
    expect(wal.finalFrom()!.index).toBe(1);
    wal.close();
  });

  test("after a restart, a rewrite inside the segments open skipped is found: only what replaced it is held", async () => {
    const dir = tempDir();
    const wal = walWith(dir, range(1, 100));
    wal.append(range(90, 120, 2));
    for (let i = 121; i <= 300; i++) wal.append([entry(i, 2)]);
    wal.sync();
    wal.close();
    const { wal: reopened } = Wal.open(dir, { ...opts, keepEntriesAfter: 250 });
    expect(reopened.finalFrom()!.index).toBeGreaterThan(120);
    const reader = new WalReader(reopened);
    expect(await reader.read(50, 60, 1 << 20)).toBeNull();
    expect(await reader.read(89, 100, 1 << 20)).toBeNull();
    expect(reopened.finalFrom()!.index).toBe(90);
    expect(await reader.read(90, 300, 1 << 20)).toEqual(range(90, 300, 2));
    reopened.close();
  });

  test("after a restart, a rewrite in the first segment open read leaves the skipped segments not held", async () => {
    const dir = tempDir();
    const wal = walWith(dir, range(1, 300));
    const rewriteAt = wal.segments().at(-1)!.firstIndex + 2;
    wal.append(range(rewriteAt, 310, 2));
    wal.sync();
    wal.close();
    const { wal: reopened } = Wal.open(dir, { ...opts, keepEntriesAfter: 250 });
    expect(reopened.finalFrom()!.index).toBe(rewriteAt);
    const reader = new WalReader(reopened);
    expect(await reader.read(10, 20, 1 << 20)).toBeNull();
    expect(reopened.finalFrom()!.index).toBe(rewriteAt);
    expect(await reader.read(rewriteAt, 310, 1 << 20)).toEqual(range(rewriteAt, 310, 2));
    reopened.close();
  });

  test("after a restart, a damaged record in the segments open skipped leaves them not held", async () => {
    const dir = tempDir();
    walWith(dir, range(1, 300)).close();
    // Flip a byte in the first segment's second record (its first entry's payload).
    const first = listSegments(dir)[0]!;
    const bytes = fs.readFileSync(first.path);
    const at = bytes.readUInt32LE(0) + 9 + 9 + 30;
    bytes[at] = bytes[at]! ^ 0xff;
    fs.writeFileSync(first.path, bytes);
    const { wal } = Wal.open(dir, { ...opts, keepEntriesAfter: 250 });
    const firstRead = wal.finalFrom()!.index;
    const reader = new WalReader(wal);
    expect(await reader.read(10, 20, 1 << 20)).toBeNull();
    expect(wal.finalFrom()!.index).toBe(firstRead);
    expect(await reader.read(firstRead, 300, 1 << 20)).toEqual(range(firstRead, 300));
    wal.close();
  });

  test("after a restart, segments removed while the skipped ones are read leave the rest held", async () => {
    const dir = tempDir();
    walWith(dir, range(1, 300)).close();
    const { wal } = Wal.open(dir, { ...opts, keepEntriesAfter: 250 });
    const learning = wal.learnSkippedFinalFrom();
    const removed = wal.removeSegmentsCoveredBy(100);
    expect(removed.length).toBeGreaterThan(0);
    await learning;
    const firstHeld = wal.segments()[0]!.firstIndex;
    expect(wal.finalFrom()!.index).toBeLessThanOrEqual(firstHeld);
    const reader = new WalReader(wal);
    expect(await reader.read(firstHeld, 300, 1 << 20)).toEqual(range(firstHeld, 300));
    expect(await reader.read(firstHeld - 1, 300, 1 << 20)).toBeNull();
    wal.close();
  });
});
