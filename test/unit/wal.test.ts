import { afterEach, describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Wal, listSegments, readSegment, repairWal, scanSegment } from "../../src/storage/index.ts";
import { Syncer } from "../../src/storage/syncer.ts";
import { crc32OfU32LE, decodeRecordAt, encodeRecord } from "../../src/storage/_record.ts";
import { encodeEntry, writeEntryRecord } from "../../src/storage/_entry-codec.ts";
import { RecordType, nonZeroEndOfFile } from "../../src/storage/_segment.ts";
import { fsyncGradually } from "../../src/io/writeback.ts";
import { reserveZeros, writeZeroPages } from "../../src/storage/_zero-fill.ts";
import { dataEndOfFile } from "../../src/io/file-extents.ts";
import type { Entry } from "../../src/raft/types.ts";
import { isSvcError, silentLogger } from "../../src/util/index.ts";
import { verifyWal } from "../../src/node/verify.ts";

const dirs: string[] = [];
function tempDir(): string {
  const d = fs.mkdtempSync(join(tmpdir(), "svc-wal-"));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function entry(index: number, term = 1, size = 20): Entry {
  const data = new Uint8Array(size);
  for (let i = 0; i < size; i++) data[i] = (index * 31 + i) & 0xff;
  return { term, index, kind: "normal", timestampMs: 1_700_000_000_000 + index, data };
}

const opts = { segmentSizeBytes: 64 * 1024, logger: silentLogger };

/** What opening the WAL in `dir` throws (null when it opens). */
function openError(dir: string, options: Parameters<typeof Wal.open>[1]): unknown {
  try {
    Wal.open(dir, options).wal.close();
    return null;
  } catch (e) {
    return e;
  }
}

/** Where the records end in a (preallocated) segment file. */
function dataEnd(bytes: Uint8Array): number {
  return scanSegment(bytes).dataEndBytes;
}

function writeEntries(dir: string, count: number, segmentSizeBytes = opts.segmentSizeBytes): void {
  const { wal } = Wal.open(dir, { ...opts, segmentSizeBytes });
  for (let i = 1; i <= count; i++) {
    wal.append([entry(i)]);
    wal.sync();
  }
  wal.close();
}

describe("wal", () => {
  test("a file named as a segment that is another segment (an operator's copy) stops the open, naming it; nothing is removed, and verify-checksums reports it", () => {
    // Three segments; copies of the first under a later and an earlier number, and of the
    // second under its own number but another first index.
    const dir = join(tempDir(), "wal");
    writeEntries(dir, 1200, 16 * 1024);
    const segments = listSegments(dir);
    expect(segments.length).toBeGreaterThanOrEqual(3);
    const [first, second] = segments;
    if (first === undefined || second === undefined) throw new Error("no segments");
    const hex = (n: number): string => n.toString(16).padStart(16, "0");
    const copies = [
      `${hex(segments.at(-1)!.seq + 1)}-${hex(first.firstIndex)}.wal`,
      `${hex(0)}-${hex(first.firstIndex)}.wal`,
      `${hex(second.seq)}-${hex(second.firstIndex + 5)}.wal`,
    ];
    for (const name of copies) {
      for (const keepEntriesAfter of [0, 1190]) {
        const copy = join(dir, name);
        fs.copyFileSync(name.startsWith(hex(second.seq)) ? second.path : first.path, copy);
        const before = fs.readdirSync(dir).sort();
        const caught = openError(dir, { ...opts, segmentSizeBytes: 16 * 1024, keepEntriesAfter });
        if (!isSvcError(caught, "RAFT_STATE_INVALID")) throw new Error(`${name} (keepEntriesAfter ${keepEntriesAfter}) was taken for part of the log: ${String(caught)}`);
        expect(caught.message).toContain(copy);
        expect(caught.message).toContain("a copied or renamed file");
        expect(caught.hint).toContain(`move ${name} out of`);
        expect(fs.readdirSync(dir).sort()).toEqual(before);
        const finding = verifyWal(dir).find((f) => f.target === copy);
        expect(finding).toMatchObject({ ok: false });
        expect(finding?.detail).toContain("not a segment of this WAL");
        fs.rmSync(copy);
      }
    }
    // With damage in an earlier segment too, the copy is found first: neither the start's
    // repair nor wal-repair cuts the log back to it (the copy would read as a rewrite).
    const third = segments[2]!;
    const copy = join(dir, `${hex(segments.at(-1)!.seq + 1)}-${hex(third.firstIndex)}.wal`);
    fs.copyFileSync(third.path, copy);
    const original = new Uint8Array(fs.readFileSync(first.path));
    const damaged = original.slice();
    const firstEntryAt = scanSegment(damaged).offsets[3] ?? 0;
    damaged[firstEntryAt + 12] = (damaged[firstEntryAt + 12] ?? 0) ^ 0xff;
    fs.writeFileSync(first.path, damaged);
    const before = fs.readdirSync(dir).sort();
    expect(isSvcError(openError(dir, { ...opts, segmentSizeBytes: 16 * 1024 }), "RAFT_STATE_INVALID")).toBe(true);
    for (const dryRun of [true, false]) {
      let refused: unknown = null;
      try {
        repairWal(dir, { dryRun, snapshotIndex: 400 });
      } catch (e) {
        refused = e;
      }
      expect(isSvcError(refused, "RAFT_STATE_INVALID")).toBe(true);
    }
    expect(fs.readdirSync(dir).sort()).toEqual(before);
    fs.rmSync(copy);
    fs.writeFileSync(first.path, original);
    // Without the copies the WAL opens whole.
    const { wal, entries } = Wal.open(dir, { ...opts, segmentSizeBytes: 16 * 1024 });
    wal.close();
    expect(entries.length).toBe(1200);
    expect(verifyWal(dir).every((f) => f.ok)).toBe(true);
  });

  test("replays what was appended, across segment rolls", () => {
    const dir = tempDir();
    writeEntries(dir, 50, 400);
    expect(listSegments(dir).length).toBeGreaterThan(3);
    const { entries, truncatedBytes } = Wal.open(dir, opts);
    expect(truncatedBytes).toBe(0);
    expect(entries.map((e) => e.index)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    expect(entries[9]).toEqual(entry(10));
  });

  test("an append of megabytes at once (a follower catching up), written in pieces, and a record larger than a piece, read back as appended", () => {
    const dir = tempDir();
    const big = { segmentSizeBytes: 32 * 1024 * 1024, logger: silentLogger };
    const { wal } = Wal.open(dir, big);
    const batch = Array.from({ length: 12_000 }, (_, i) => entry(i + 1, 1, 300));
    wal.append(batch);
    const lone = entry(12_001, 1, 3 * 1024 * 1024);
    wal.append([entry(12_001, 1, 3 * 1024 * 1024), entry(12_002), entry(12_003, 1, 1024 * 1024)]);
    wal.sync();
    wal.close();
    const { entries, truncatedBytes } = Wal.open(dir, big);
    expect(truncatedBytes).toBe(0);
    expect(entries.length).toBe(12_003);
    expect(entries.slice(0, 12_000)).toEqual(batch);
    expect(entries[12_000]).toEqual(lone);
    expect(entries.slice(12_001)).toEqual([entry(12_002), entry(12_003, 1, 1024 * 1024)]);
  });

  test("truncation at every byte offset of the last record recovers all earlier records", () => {
    const dir = tempDir();
    writeEntries(dir, 5);
    const [segment] = listSegments(dir);
    if (segment === undefined) throw new Error("no segment");
    const full = new Uint8Array(fs.readFileSync(segment.path));
    const end = dataEnd(full);
    // The last record is 9 header bytes + 25 entry header bytes + 20 data bytes.
    const lastRecordStart = end - (9 + 25 + 20);
    for (let cut = lastRecordStart; cut < end; cut++) {
      // Two shapes of a torn write: the file ends early, or the preallocated zeros follow.
      for (const shape of ["short file", "zeros after"] as const) {
        const torn = shape === "short file" ? full.slice(0, cut) : full.slice();
        if (shape === "zeros after") torn.fill(0, cut, end);
        fs.writeFileSync(segment.path, torn);
        const { wal, entries } = Wal.open(dir, opts);
        expect(entries.map((e) => e.index)).toEqual([1, 2, 3, 4]);
        // The log goes on after the cut: the next append lands right after entry 4.
        wal.append([entry(5, 2)]);
        wal.close();
        const again = Wal.open(dir, opts);
        expect(again.entries.at(-1)).toEqual(entry(5, 2));
        expect(again.truncatedBytes).toBe(0);
        again.wal.close();
      }
    }
  });

  test("a flipped bit anywhere before the tail is detected as corruption", () => {
    const dir = tempDir();
    writeEntries(dir, 4);
    const [segment] = listSegments(dir);
    if (segment === undefined) throw new Error("no segment");
    const full = new Uint8Array(fs.readFileSync(segment.path));
    const lastRecordStart = dataEnd(full) - (9 + 25 + 20);
    for (let offset = 0; offset < lastRecordStart; offset++) {
      for (const bit of [0, 3, 7]) {
        const damaged = full.slice();
        damaged[offset] = (damaged[offset] ?? 0) ^ (1 << bit);
        fs.writeFileSync(segment.path, damaged);
        let error: unknown = null;
        try {
          Wal.open(dir, opts).wal.close();
        } catch (e) {
          error = e;
        }
        if (!isSvcError(error, "WAL_CORRUPT")) throw new Error(`bit ${bit} of byte ${offset} went undetected`);
        expect(error.message).toContain(segment.path);
        expect(error.message).toContain("offset");
        expect(error.hint).toContain("wal-repair --skip-corrupted");
      }
    }
  });

  test("damage in a segment that is not the last is corruption even at its end", () => {
    const dir = tempDir();
    writeEntries(dir, 30, 300);
    const [first] = listSegments(dir);
    if (first === undefined) throw new Error("no segment");
    const bytes = new Uint8Array(fs.readFileSync(first.path));
    bytes.fill(0, dataEnd(bytes) - 3);
    fs.writeFileSync(first.path, bytes);
    expect(() => Wal.open(dir, opts)).toThrow(/WAL is corrupt/);
  });

  test("a later record for an index replaces that index and everything after it", () => {
    const dir = tempDir();
    const { wal } = Wal.open(dir, opts);
    wal.append([entry(1), entry(2), entry(3), entry(4)]);
    wal.append([entry(3, 2), entry(4, 2)]);
    wal.append([entry(5, 2)]);
    wal.close();
    const { entries } = Wal.open(dir, opts);
    expect(entries.map((e) => [e.index, e.term])).toEqual([[1, 1], [2, 1], [3, 2], [4, 2], [5, 2]]);
  });

  test("a stale copy of a record (its index and its own term) after the last one is damage, not a rewrite: nothing after it is dropped, and wal-repair removes only the copy", () => {
    for (const keepAfter of [0, 8]) {
      // wal-repair moves the damaged segments beside the WAL directory (wal-corrupt-<time>):
      // inside the temp dir this file removes.
      const dir = join(tempDir(), "wal");
      writeEntries(dir, 10);
      const [segment] = listSegments(dir);
      if (segment === undefined) throw new Error("no segment");
      const bytes = new Uint8Array(fs.readFileSync(segment.path));
      const scan = scanSegment(bytes);
      // Entry 5's record once more, right after the last record (a misdirected write, say).
      bytes.set(bytes.slice(scan.offsets[4] ?? 0, scan.offsets[5] ?? 0), scan.dataEndBytes);
      fs.writeFileSync(segment.path, bytes);
      const caught = openError(dir, { ...opts, keepEntriesAfter: keepAfter });
      if (!isSvcError(caught, "WAL_CORRUPT")) throw new Error(`keepAfter ${keepAfter}: the stale copy was taken for a rewrite`);
      expect(caught.message).toContain("second record for entry 5 of term 1");
      const report = repairWal(dir, { dryRun: false });
      expect(report.lost).toEqual([]);
      expect(report.setAside).toBeNull();
      expect(report.damages.map((d) => d.reason)).toEqual(["a stale copy of entry 5 (a second record with its own term)"]);
      const { wal, entries } = Wal.open(dir, opts);
      expect(entries.map((e) => e.index)).toEqual(Array.from({ length: 10 }, (_, i) => i + 1));
      wal.close();
    }
  });

  test("segments wholly covered by a snapshot are removed, the current one never", () => {
    const dir = tempDir();
    writeEntries(dir, 40, 300);
    const { wal } = Wal.open(dir, { ...opts, segmentSizeBytes: 300 });
    const before = wal.segments().length;
    const removed = wal.removeSegmentsCoveredBy(20);
    expect(removed.length).toBeGreaterThan(0);
    expect(removed.every((s) => s.maxIndex <= 20)).toBe(true);
    expect(wal.segments().length).toBe(before - removed.length);
    const { entries } = Wal.open(dir, opts);
    expect(entries[0]?.index).toBeLessThanOrEqual(21);
    expect(entries.at(-1)?.index).toBe(40);
    wal.removeSegmentsCoveredBy(1_000);
    expect(listSegments(dir).length).toBe(1);
  });

  test("a segment kept back by the archiver stops removal there", () => {
    const dir = tempDir();
    writeEntries(dir, 40, 300);
    const { wal } = Wal.open(dir, { ...opts, segmentSizeBytes: 300 });
    const oldest = wal.segments()[0];
    const removed = wal.removeSegmentsCoveredBy(40, (s) => s !== oldest);
    expect(removed).toEqual([]);
  });

  test("resetTo starts the log over after a snapshot install", () => {
    const dir = tempDir();
    writeEntries(dir, 10);
    const { wal } = Wal.open(dir, opts);
    wal.resetTo(101);
    wal.append([entry(101, 3)]);
    wal.removeSegmentsCoveredBy(100);
    wal.close();
    const { entries } = Wal.open(dir, opts);
    expect(entries.map((e) => e.index)).toEqual([101]);
  });
});

test("a log started over is replayed from its new start even if old segments remain", () => {
  const dir = tempDir();
  writeEntries(dir, 10);
  const { wal } = Wal.open(dir, opts);
  wal.resetTo(101);
  wal.append([entry(101, 3), entry(102, 3)]);
  wal.close();
  expect(Wal.open(dir, opts).entries.map((e) => e.index)).toEqual([101, 102]);
});

test("closing the WAL while its next segment is being prepared stops that: nothing is written into the directory afterwards", async () => {
  const dir = tempDir();
  const walDir = join(dir, "wal");
  // Segments of 64 MiB: the spare's zeros take long enough to be under way at close.
  const { wal } = Wal.open(walDir, { ...opts, segmentSizeBytes: 64 * 1024 * 1024 });
  for (let i = 1; i <= 33; i++) wal.append([entry(i, 1, 1024 * 1024)]);
  wal.sync();
  // The spare's thread creates its file once it starts: close as soon as it is there.
  const deadline = performance.now() + 10_000;
  while (!fs.readdirSync(walDir).some((n) => n.endsWith(".creating"))) {
    if (performance.now() > deadline) throw new Error("no spare segment was started");
    await Bun.sleep(1);
  }
  wal.close();
  // What a repair does next: the whole directory is moved aside.
  const aside = join(dir, "aside");
  fs.renameSync(walDir, aside);
  await Bun.sleep(1500);
  expect(fs.readdirSync(aside).filter((n) => n.endsWith(".creating"))).toEqual([]);
});

test("wal-repair without a snapshot cuts the log at the first lost index, sets the intact rest aside, and says which indexes", () => {
  const dir = tempDir();
  const walDir = join(dir, "wal");
  writeEntries(walDir, 60, 600);
  const segments = listSegments(walDir);
  const victim = segments[1];
  if (victim === undefined) throw new Error("need several segments");
  const bytes = new Uint8Array(fs.readFileSync(victim.path));
  bytes[120] = (bytes[120] ?? 0) ^ 0x10;
  fs.writeFileSync(victim.path, bytes);
  expect(() => Wal.open(walDir, opts)).toThrow(/WAL is corrupt/);

  const dry = repairWal(walDir, { dryRun: true });
  expect(dry.damage?.file).toBe(victim.path);
  expect(() => Wal.open(walDir, opts)).toThrow(/WAL is corrupt/);

  const report = repairWal(walDir, { dryRun: false });
  const lastGood = report.damage?.lastGoodIndex ?? -1;
  expect(report.lost).toEqual([{ from: lastGood + 1, to: lastGood + 1 }]);
  expect(report.setAside).toEqual({ from: lastGood + 2, to: 60 });
  expect(fs.readdirSync(report.quarantineDir ?? "").length).toBe(segments.length);
  const { entries } = Wal.open(walDir, opts);
  expect(entries.map((e) => e.index)).toEqual(Array.from({ length: lastGood }, (_, i) => i + 1));
  expect(repairWal(walDir, { dryRun: false }).damage).toBeNull();
});

test("a last segment left empty or headerless by a crash during its creation is dropped, and the log goes on", () => {
  const dir = tempDir();
  writeEntries(dir, 5);
  for (const leftover of [new Uint8Array(0), new Uint8Array(4096)]) {
    const { wal } = Wal.open(dir, opts);
    wal.close();
    const next = listSegments(dir).length + 1;
    const name = `${next.toString(16).padStart(16, "0")}-${(6).toString(16).padStart(16, "0")}.wal`;
    fs.writeFileSync(join(dir, name), leftover);
    fs.writeFileSync(join(dir, `${name}.creating`), "partial");
    const reopened = Wal.open(dir, opts);
    expect(reopened.entries.map((e) => e.index)).toEqual([1, 2, 3, 4, 5]);
    expect(fs.existsSync(join(dir, name))).toBe(false);
    expect(fs.existsSync(join(dir, `${name}.creating`))).toBe(false);
    reopened.wal.append([entry(6)]);
    reopened.wal.close();
    const again = Wal.open(dir, opts);
    expect(again.entries.at(-1)?.index).toBe(6);
    again.wal.close();
    fs.rmSync(dir, { recursive: true, force: true });
    fs.mkdirSync(dir);
    writeEntries(dir, 5);
  }
});

test("a record written in place is byte for byte the framed entry", async () => {
  const { encodeEntry, writeEntryRecord } = await import("../../src/storage/_entry-codec.ts");
  const { encodeRecord } = await import("../../src/storage/_record.ts");
  for (const e of [entry(1), entry(2, 3, 0), entry(7, 2, 5000)]) {
    const expected = encodeRecord(1, encodeEntry(e));
    const out = new Uint8Array(expected.length);
    expect(writeEntryRecord(out, new DataView(out.buffer), 0, 1, e)).toBe(expected.length);
    expect([...out]).toEqual([...expected]);
  }
});

test("segments prepared ahead of time become the next segments, and no spare is left behind", async () => {
  const dir = tempDir();
  const { wal } = Wal.open(dir, opts);
  wal.append([entry(1, 1, 500)]);
  let index = 2;
  for (let segment = 0; segment < 3; segment++) {
    // Fill past half of the segment, then give the spare time to be written.
    while (wal.segments().at(-1)!.sizeBytes * 2 <= opts.segmentSizeBytes) wal.append([entry(index++, 1, 500)]);
    const deadline = Date.now() + 10_000;
    while (!fs.readdirSync(dir).some((n) => n.startsWith("spare-")) && Date.now() < deadline) await Bun.sleep(5);
    for (let i = 0; i < 5; i++) await Bun.sleep(5);
    while (wal.segments().length === segment + 1) wal.append([entry(index++, 1, 500)]);
  }
  wal.sync();
  wal.close();
  await Bun.sleep(20);
  expect(fs.readdirSync(dir).filter((n) => !n.endsWith(".wal"))).toEqual([]);
  const again = Wal.open(dir, opts);
  expect(again.entries.length).toBe(index - 1);
  expect(again.entries.at(-1)?.index).toBe(index - 1);
  again.wal.close();
});

test("the WAL's sync thread flushes a descriptor, takes requests in order, reports a failing one with its code, and fails what is pending once closed", async () => {
  const dir = tempDir();
  const fd = fs.openSync(join(dir, "f"), "w");
  const syncer = new Syncer();
  try {
    fs.writeSync(fd, "data");
    await syncer.fdatasync(fd);
    // Requests made while one is with the thread wait their turn; each settles once.
    const settled: number[] = [];
    await Promise.all([1, 2, 3].map((n) => syncer.fdatasync(fd).then(() => settled.push(n))));
    expect(settled).toEqual([1, 2, 3]);
    const closedFd = fs.openSync(join(dir, "g"), "w");
    fs.closeSync(closedFd);
    let error: unknown;
    await syncer.fdatasync(closedFd).catch((e: unknown) => {
      error = e;
    });
    expect((error as NodeJS.ErrnoException | undefined)?.code).toBe("EBADF");
  } finally {
    const pending = syncer.fdatasync(fd);
    syncer.close();
    await expect(pending).rejects.toThrow(/closed/);
    await expect(syncer.fdatasync(fd)).rejects.toThrow(/closed/);
    fs.closeSync(fd);
  }
});

test("a large file flushed a slice at a time keeps every byte, and a missing one is an error naming it", () => {
  const dir = tempDir();
  const path = join(dir, "image");
  const data = new Uint8Array(3 * 1024 * 1024 + 123);
  for (let i = 0; i < data.length; i++) data[i] = (i * 13) & 0xff;
  fs.writeFileSync(path, data);
  fsyncGradually(path);
  expect(new Uint8Array(fs.readFileSync(path))).toEqual(data);
  expect(() => fsyncGradually(join(dir, "missing"))).toThrow(/ENOENT|no such file/);
});

describe("opening after what the store holds", () => {
  test("segments wholly at or before keepEntriesAfter are not read; the entries after it are replayed as before", () => {
    const dir = tempDir();
    // Entries of 20 bytes in 4 KiB segments: several segments.
    writeEntries(dir, 300, 4096);
    const segments = listSegments(dir);
    expect(segments.length).toBeGreaterThan(2);
    const second = segments[1];
    if (second === undefined) throw new Error("no second segment");
    // Damage the first segment: a full open finds it, one that keeps only later entries does not read it.
    const first = segments[0]?.path ?? "";
    const bytes = fs.readFileSync(first);
    bytes[200] = (bytes[200] ?? 0) ^ 0xff;
    fs.writeFileSync(first, bytes);
    let caught: unknown = null;
    try {
      Wal.open(dir, { ...opts, segmentSizeBytes: 4096 }).wal.close();
    } catch (e) {
      caught = e;
    }
    expect(isSvcError(caught, "WAL_CORRUPT")).toBe(true);
    const keepAfter = second.firstIndex - 1;
    const { wal, entries } = Wal.open(dir, { ...opts, segmentSizeBytes: 4096, keepEntriesAfter: keepAfter });
    expect(entries[0]?.index).toBe(keepAfter + 1);
    expect(entries.at(-1)?.index).toBe(300);
    expect(wal.lastIndex).toBe(300);
    wal.close();
  });
});

describe("reading a segment before its zero-filled tail", () => {
  const bigSegment = { ...opts, segmentSizeBytes: 3 * 1024 * 1024 };

  test("a last record whose data ends in zero bytes is read whole, not cut as a torn write", () => {
    const dir = tempDir();
    const { wal } = Wal.open(dir, bigSegment);
    const withZeros = (index: number): Entry => ({ ...entry(index, 1, 200), data: new Uint8Array([...entry(index, 1, 100).data, ...new Uint8Array(100)]) });
    for (let i = 1; i <= 3; i++) wal.append([withZeros(i)]);
    wal.sync();
    wal.close();
    const [segment] = listSegments(dir);
    if (segment === undefined) throw new Error("no segment");
    const scan = readSegment(segment.path);
    expect(scan.damage).toBeNull();
    expect(scan.sizeBytes).toBe(3 * 1024 * 1024);
    expect(scan).toEqual({ ...scanSegment(new Uint8Array(fs.readFileSync(segment.path))) });
    const reopened = Wal.open(dir, bigSegment);
    expect(reopened.truncatedBytes).toBe(0);
    expect(reopened.entries).toEqual([withZeros(1), withZeros(2), withZeros(3)]);
    reopened.wal.close();
  });

  test("entries kept as views or copies read the same as a scan of the whole file, and a kept entry holds no view of the bytes read", () => {
    const dir = tempDir();
    writeEntries(dir, 40, bigSegment.segmentSizeBytes);
    const [segment] = listSegments(dir);
    if (segment === undefined) throw new Error("no segment");
    const whole = scanSegment(new Uint8Array(fs.readFileSync(segment.path)));
    const read = readSegment(segment.path, { viewsThrough: 25 });
    expect(read.entries).toEqual(whole.entries);
    expect(read.offsets).toEqual(whole.offsets);
    expect(read.dataEndBytes).toBe(whole.dataEndBytes);
    for (const e of read.entries) {
      if (e.index > 25) expect(e.data.byteLength).toBe(e.data.buffer.byteLength);
    }
  });

  test("a non-zero byte megabytes past the records is found: cut from the last segment as a torn write, every entry kept", () => {
    const dir = tempDir();
    writeEntries(dir, 10, bigSegment.segmentSizeBytes);
    const [segment] = listSegments(dir);
    if (segment === undefined) throw new Error("no segment");
    const end = scanSegment(new Uint8Array(fs.readFileSync(segment.path))).dataEndBytes;
    const stray = 2 * 1024 * 1024 + 12_345;
    const fd = fs.openSync(segment.path, "r+");
    fs.writeSync(fd, new Uint8Array([7]), 0, 1, stray);
    fs.closeSync(fd);
    expect(readSegment(segment.path).damage).toMatchObject({ offset: end, reason: "a zeroed record header with data after it", validRecordAfter: false });
    const reopened = Wal.open(dir, bigSegment);
    expect(reopened.truncatedBytes).toBe(stray + 1 - end);
    expect(reopened.entries.map((e) => e.index)).toEqual(Array.from({ length: 10 }, (_, i) => i + 1));
    reopened.wal.close();
    expect(readSegment(segment.path).damage).toBeNull();
  });

  test("a valid record megabytes past a zeroed stretch is corruption, not a torn tail", () => {
    const dir = tempDir();
    writeEntries(dir, 10, bigSegment.segmentSizeBytes);
    const [segment] = listSegments(dir);
    if (segment === undefined) throw new Error("no segment");
    const bytes = new Uint8Array(fs.readFileSync(segment.path));
    const scan = scanSegment(bytes);
    // The last record moved 2 MiB further on, its place left zero: acknowledged data lies beyond the gap.
    const lastAt = scan.offsets.at(-1) ?? 0;
    const record = bytes.slice(lastAt, scan.dataEndBytes);
    bytes.fill(0, lastAt, scan.dataEndBytes);
    bytes.set(record, 2 * 1024 * 1024 + 3);
    fs.writeFileSync(segment.path, bytes);
    expect(readSegment(segment.path).damage).toMatchObject({ offset: lastAt, validRecordAfter: true });
    expect(isSvcError(openError(dir, bigSegment), "WAL_CORRUPT")).toBe(true);
  });

  test("damage before an intact record that ends in zero bytes is corruption, as a scan of the whole file says, not a torn tail", () => {
    const dir = tempDir();
    const { wal } = Wal.open(dir, bigSegment);
    const endsInZeros: Entry = { ...entry(3, 1, 40), data: new Uint8Array([...entry(3, 1, 20).data, ...new Uint8Array(20)]) };
    wal.append([entry(1)]);
    wal.append([entry(2)]);
    wal.append([endsInZeros]);
    wal.sync();
    wal.close();
    const [segment] = listSegments(dir);
    if (segment === undefined) throw new Error("no segment");
    const bytes = new Uint8Array(fs.readFileSync(segment.path));
    const second = scanSegment(bytes).offsets[1] ?? 0;
    bytes[second + 9 + 25 + 3] = (bytes[second + 9 + 25 + 3] ?? 0) ^ 0x40;
    fs.writeFileSync(segment.path, bytes);
    const whole = scanSegment(new Uint8Array(fs.readFileSync(segment.path)));
    expect(whole.damage).toMatchObject({ offset: second, validRecordAfter: true });
    expect(readSegment(segment.path)).toEqual(whole);
    expect(isSvcError(openError(dir, bigSegment), "WAL_CORRUPT")).toBe(true);
  });

  test("a segment of zeros only is one whose creation was cut short, as before", () => {
    const dir = tempDir();
    const path = join(dir, "zeros.wal");
    fs.writeFileSync(path, new Uint8Array(2 * 1024 * 1024 + 5));
    expect(readSegment(path)).toMatchObject({ entries: [], dataEndBytes: 0, sizeBytes: 2 * 1024 * 1024 + 5, damage: { offset: 0, validRecordAfter: false } });
  });
});

describe("record checksums", () => {
  test("the length's CRC made without a buffer is Bun.hash.crc32 of its four little-endian bytes", () => {
    const bytes = new Uint8Array(4);
    const view = new DataView(bytes.buffer);
    const values = [0, 1, 0xff, 0x100, 0xffff_ffff, 0x8000_0000, 123_456_789];
    for (let i = 0; i < 1000; i++) values.push(Math.floor(Math.random() * 0x1_0000_0000));
    for (const v of values) {
      view.setUint32(0, v, true);
      expect({ v, crc: crc32OfU32LE(v) }).toEqual({ v, crc: Bun.hash.crc32(bytes) >>> 0 });
    }
  });

  test("a record written straight from an entry checks as one encoded from its payload", () => {
    const entry: Entry = { term: 7, index: 1234, timestampMs: 1_700_000_000_000, kind: "normal", data: new TextEncoder().encode('{"op":"execute"}') };
    const direct = new Uint8Array(200);
    const end = writeEntryRecord(direct, new DataView(direct.buffer), 3, RecordType.entry, entry);
    const viaPayload = encodeRecord(RecordType.entry, encodeEntry(entry));
    expect(Buffer.from(direct.subarray(3, end)).toString("hex")).toBe(Buffer.from(viaPayload).toString("hex"));
    const decoded = decodeRecordAt(direct, 3);
    expect(decoded.kind).toBe("record");
  });
});

describe("a segment's space ahead of the records", () => {
  const writeBytes = (): number => Number(/^write_bytes: (\d+)$/m.exec(fs.readFileSync("/proc/self/io", "utf8"))?.[1] ?? Number.NaN);

  test("is reserved as zeros without writing them, and leaves the bytes before it alone", () => {
    const path = join(tempDir(), "segment");
    const fd = fs.openSync(path, "w+");
    try {
      fs.writeSync(fd, new Uint8Array([1, 2, 3, 4, 5]), 0, 5, 0);
      const size = 16 * 1024 * 1024;
      const before = writeBytes();
      reserveZeros(fd, 5, size);
      const written = writeBytes() - before;
      // Written as zeros, this would be 16 MiB of disk writes, as many as the records to come.
      expect(written).toBeLessThan(size / 4);
      const st = fs.fstatSync(fd);
      expect(st.size).toBe(size);
      // Reserved, not sparse: a full disk shows now, not at an append.
      expect(st.blocks * 512).toBeGreaterThanOrEqual(size);
      const back = fs.readFileSync(path);
      expect([...back.subarray(0, 5)]).toEqual([1, 2, 3, 4, 5]);
      expect(back.subarray(5).every((b) => b === 0)).toBe(true);
    } finally {
      fs.closeSync(fd);
    }
  });

  test("WAL segments rolled to hold their records and zeros to their full size", async () => {
    const dir = tempDir();
    const { wal } = Wal.open(dir, opts);
    for (let i = 1; i <= 200; i++) wal.append([entry(i, 1, 1000)]);
    await wal.sync();
    wal.close();
    const segments = listSegments(dir);
    expect(segments.length).toBeGreaterThan(1);
    for (const s of segments) expect(s.sizeBytes).toBeGreaterThanOrEqual(opts.segmentSizeBytes);
    const reopened = Wal.open(dir, opts);
    reopened.wal.close();
    expect(reopened.entries.map((e) => e.index)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
    expect(reopened.truncatedBytes).toBe(0);
  });
});

describe("where a segment's records end", () => {
  const rchar = (): number => Number(/^rchar: (\d+)$/m.exec(fs.readFileSync("/proc/self/io", "utf8"))?.[1] ?? Number.NaN);

  test("is found without reading the reserved space after them, and data past a hole is still found", () => {
    const path = join(tempDir(), "segment");
    const fd = fs.openSync(path, "w+");
    try {
      const size = 16 * 1024 * 1024;
      fs.writeSync(fd, new Uint8Array([7, 7, 7]), 0, 3, 0);
      reserveZeros(fd, 3, size);
      expect(dataEndOfFile(fd, size)).toBeLessThan(1024 * 1024);
      const before = rchar();
      expect(nonZeroEndOfFile(fd, size)).toBe(3);
      // Read by hand, the 16 MiB of zeros would all pass through read(2).
      expect(rchar() - before).toBeLessThan(2 * 1024 * 1024);

      // Written zeros are data: they are read, and the answer is the same.
      writeZeroPages(fd, 4096, size);
      expect(dataEndOfFile(fd, size)).toBe(size);
      expect(nonZeroEndOfFile(fd, size)).toBe(3);

      // A byte past a hole (a sparse file) is found.
      const sparse = join(tempDir(), "sparse");
      const sfd = fs.openSync(sparse, "w+");
      try {
        fs.ftruncateSync(sfd, size);
        expect(nonZeroEndOfFile(sfd, size)).toBe(0);
        fs.writeSync(sfd, new Uint8Array([1]), 0, 1, 10 * 1024 * 1024);
        expect(nonZeroEndOfFile(sfd, size)).toBe(10 * 1024 * 1024 + 1);
      } finally {
        fs.closeSync(sfd);
      }
    } finally {
      fs.closeSync(fd);
    }
  });
});
