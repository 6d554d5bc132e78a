// The WAL on a full disk, on a real small tmpfs (mounted here, so these tests run as root and
// are skipped otherwise): an append or a new segment that does not fit fails with ENOSPC,
// naming the file or wal.segment_size_mb and the bytes free, and leaves the WAL exactly as it
// was — no partial record, no half-made segment file — so the same append succeeds once space
// is freed.

import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Wal, listSegments } from "../../src/storage/index.ts";
import type { Entry } from "../../src/raft/types.ts";
import { silentLogger } from "../../src/util/index.ts";

const canMount = process.getuid?.() === 0;
const MIB = 1024 * 1024;
const opts = { segmentSizeBytes: 1 * MIB, logger: silentLogger };

let mountDir = "";
beforeEach(() => {
  if (!canMount) return;
  mountDir = fs.mkdtempSync(join(tmpdir(), "svc-wal-full-"));
  const r = Bun.spawnSync(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mountDir]);
  if (r.exitCode !== 0) throw new Error(`mount failed: ${r.stderr.toString()}`);
});
afterEach(() => {
  if (!canMount) return;
  Bun.spawnSync(["umount", "-l", mountDir]);
  fs.rmSync(mountDir, { recursive: true, force: true });
});

function entry(index: number, sizeBytes: number): Entry {
  return { term: 1, index, kind: "normal", timestampMs: 1_700_000_000_000 + index, data: new Uint8Array(sizeBytes).fill(index & 0xff) };
}

/** Fill the file system with `path` until nothing is left. */
function fillUp(path: string): void {
  const fd = fs.openSync(path, "a");
  const chunk = new Uint8Array(4096);
  try {
    for (;;) fs.writeSync(fd, chunk);
  } catch {
    // ENOSPC: full
  } finally {
    fs.closeSync(fd);
  }
}

/** Half-made segment files; a spare still being prepared in the background is not one. */
function leftovers(dir: string, options: { spares: boolean }): string[] {
  return fs.readdirSync(dir).filter((name) => name.endsWith(".creating") && (options.spares || !name.startsWith("spare-")));
}

/** Once the WAL is closed, a spare being prepared is removed when its writes settle. */
async function noneLeftAfterClose(dir: string): Promise<string[]> {
  for (let i = 0; i < 200 && leftovers(dir, { spares: true }).length > 0; i++) await Bun.sleep(10);
  return leftovers(dir, { spares: true });
}

describe.skipIf(!canMount)("the WAL on a full disk", () => {
  test("appends until the disk is full fail with ENOSPC naming wal.segment_size_mb and the bytes free, leave no partial file, and go through once space is freed", async () => {
    const dir = join(mountDir, "wal");
    const filler = join(mountDir, "filler");
    fs.writeFileSync(filler, new Uint8Array(1 * MIB));
    const { wal } = Wal.open(dir, opts);
    let appended = 0;
    let failure: unknown = null;
    for (let i = 1; i <= 200 && failure === null; i++) {
      try {
        wal.append([entry(i, 48 * 1024)]);
        wal.sync();
        appended = i;
      } catch (e) {
        failure = e;
      }
    }
    expect(failure).not.toBeNull();
    expect((failure as { code?: string }).code).toBe("ENOSPC");
    expect((failure as Error).message).toMatch(/wal\.segment_size_mb = 1|no space left to append/);
    expect((failure as Error).message).toMatch(/\d+ bytes free/);
    expect(leftovers(dir, { spares: false })).toEqual([]);

    fs.rmSync(filler);
    // A spare being written ahead when the disk filled is abandoned; its thread lets go of the
    // file's space once stopped (a node retries a refused write after a second).
    for (let i = 0; i < 200 && leftovers(dir, { spares: true }).length > 0; i++) await Bun.sleep(10);
    wal.append([entry(appended + 1, 48 * 1024)]);
    wal.sync();
    wal.close();
    expect(await noneLeftAfterClose(dir)).toEqual([]);
    const { entries } = Wal.open(dir, opts);
    expect(entries.map((e) => e.index)).toEqual(Array.from({ length: appended + 1 }, (_, i) => i + 1));
  });

  test("an append that fails part-way is taken back to the last whole record, and the WAL reads as before it", () => {
    const dir = join(mountDir, "wal");
    const { wal } = Wal.open(dir, opts);
    wal.append([entry(1, 1000), entry(2, 1000)]);
    wal.sync();
    const segment = listSegments(dir)[0];
    if (segment === undefined) throw new Error("no segment");
    const sizeBefore = fs.statSync(segment.path).size;
    fillUp(join(mountDir, "filler"));
    // Larger than the segment's preallocated room: it must grow the file, and cannot.
    const batch = [entry(3, 700 * 1024), entry(4, 700 * 1024)];
    expect(() => wal.append(batch)).toThrow(/no space left to append/);
    expect(fs.statSync(segment.path).size).toBe(sizeBefore);
    expect(wal.lastIndex).toBe(2);
    wal.close();
    const reopened = Wal.open(dir, opts);
    expect(reopened.entries.map((e) => e.index)).toEqual([1, 2]);
    expect(reopened.truncatedBytes).toBe(0);
    fs.rmSync(join(mountDir, "filler"));
    reopened.wal.append([entry(3, 1000)]);
    reopened.wal.sync();
    reopened.wal.close();
    expect(Wal.open(dir, opts).entries.map((e) => e.index)).toEqual([1, 2, 3]);
  });
});
