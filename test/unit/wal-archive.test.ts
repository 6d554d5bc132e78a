// Archived WAL segments: named by their committed range, bytes that depend only on the
// entries (two leaders archiving one range write the same file), read back checked against
// the name; committed ranges read out of a node's WAL across segments and rewrites; and
// archive_command's substitutions, the secrets kept out of its logged stderr, and a run that
// hangs.

import { afterEach, describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  Wal, archiveSegmentName, dataPaths, encodeArchiveSegment, listSegments, parseArchiveSegmentName, parseSegmentName, readWalRange, scanArchiveSegment,
} from "../../src/storage/index.ts";
import { archiveCommandFor, fileWalArchiveIo, redactEnvSecrets } from "../../src/node/index.ts";
import type { Entry } from "../../src/raft/types.ts";
import { silentLogger } from "../../src/util/index.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});
function tempDir(): string {
  const d = fs.mkdtempSync(join(tmpdir(), "svc-archive-"));
  dirs.push(d);
  return d;
}

function entry(index: number, term = 1, text = `row ${index}`): Entry {
  return { term, index, kind: "normal", timestampMs: 1_700_000_000_000 + index, data: new TextEncoder().encode(text) };
}
const range = (first: number, last: number, term = 1): Entry[] => Array.from({ length: last - first + 1 }, (_, i) => entry(first + i, term));

describe("archived segment files", () => {
  test("are named <first>-<last>-<term>.wal in 16 hex digits, which no local WAL segment name matches", () => {
    const name = archiveSegmentName({ firstIndex: 11, lastIndex: 300, term: 4 });
    expect(name).toBe("000000000000000b-000000000000012c-0000000000000004.wal");
    expect(parseArchiveSegmentName(name)).toEqual({ firstIndex: 11, lastIndex: 300, term: 4 });
    expect(parseSegmentName(name)).toBeNull();
    expect(parseArchiveSegmentName("0000000000000001-000000000000000b.wal")).toBeNull();
    expect(name.endsWith(".wal")).toBe(true);
  });

  test("hold the same bytes whenever they hold the same entries", () => {
    expect(encodeArchiveSegment(range(5, 40))).toEqual(encodeArchiveSegment(range(5, 40)));
  });

  test("read back whole, and any damage is reported with its byte offset", () => {
    const name = archiveSegmentName({ firstIndex: 5, lastIndex: 40, term: 1 });
    const bytes = encodeArchiveSegment(range(5, 40));
    const ok = scanArchiveSegment(name, bytes);
    expect(ok.ok && ok.entries.map((e) => e.index)).toEqual(range(5, 40).map((e) => e.index));
    const torn = scanArchiveSegment(name, bytes.subarray(0, bytes.length - 7));
    expect(torn.ok).toBe(false);
    if (!torn.ok) expect(torn.offset).toBeGreaterThan(0);
    const misnamed = scanArchiveSegment(archiveSegmentName({ firstIndex: 5, lastIndex: 41, term: 1 }), bytes);
    expect(misnamed.ok).toBe(false);
  });
});

describe("reading a committed range out of a node's WAL", () => {
  test("spans segments and stops at the byte budget", async () => {
    const dir = tempDir();
    const { wal } = Wal.open(dir, { segmentSizeBytes: 512, logger: silentLogger });
    for (let i = 1; i <= 100; i++) wal.append([entry(i)]);
    wal.sync();
    wal.close();
    const all = await readWalRange(dir, 3, 90, 1 << 20, null);
    expect(all.ok && all.entries.map((e) => e.index)).toEqual(Array.from({ length: 88 }, (_, i) => 3 + i));
    const capped = await readWalRange(dir, 3, 90, 30, null);
    expect(capped.ok && capped.entries.length).toBeLessThan(88);
    expect(capped.ok && capped.entries[0]?.index).toBe(3);
  });

  test("takes a rewritten suffix as the WAL replays it", async () => {
    const dir = tempDir();
    const { wal } = Wal.open(dir, { segmentSizeBytes: 1 << 20, logger: silentLogger });
    wal.append(range(1, 10));
    wal.append([entry(8, 2, "new 8"), entry(9, 2, "new 9")]);
    wal.sync();
    wal.close();
    const r = await readWalRange(dir, 5, 9, 1 << 20, null);
    expect(r.ok && r.entries.map((e) => `${e.index}:${e.term}`)).toEqual(["5:1", "6:1", "7:1", "8:2", "9:2"]);
  });

  test("takes a rewrite written after a segment roll over the stale records of an earlier segment (a follower's entries replaced by a new leader's)", async () => {
    const dir = tempDir();
    // Segments of ~512 bytes: entries 1…14 of term 1 fill the first ones; the rewrite from 8 on
    // (term 2) goes into the current segment, named after a later index.
    const { wal } = Wal.open(dir, { segmentSizeBytes: 512, logger: silentLogger });
    for (let i = 1; i <= 14; i++) wal.append([entry(i)]);
    expect(wal.segments().find((s) => s.firstIndex <= 8 && s.maxIndex >= 9)).toBeDefined();
    wal.append([entry(8, 2, "new 8"), entry(9, 2, "new 9"), entry(10, 2, "new 10")]);
    wal.sync();
    expect(listSegments(dir).at(-1)!.firstIndex).toBeGreaterThan(8);
    const r = await readWalRange(dir, 5, 9, 1 << 20, wal.finalFrom()?.seq ?? null);
    wal.close();
    expect(r.ok && r.entries.map((e) => `${e.index}:${e.term}`)).toEqual(["5:1", "6:1", "7:1", "8:2", "9:2"]);
  });

  test("says where the WAL starts when it no longer holds the range", async () => {
    const dir = tempDir();
    const { wal } = Wal.open(dir, { segmentSizeBytes: 1 << 20, logger: silentLogger });
    wal.resetTo(50);
    wal.append(range(50, 60));
    wal.sync();
    wal.close();
    const r = await readWalRange(dir, 10, 55, 1 << 20, null);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.firstHeld).toBe(50);
  });
});

describe("archive_command", () => {
  test("%p is the path, %f the file name, %% a percent sign", () => {
    expect(archiveCommandFor("cp %p /a/%f && echo 100%% > /dev/null", "/d/x.wal", "x.wal")).toBe("cp /d/x.wal /a/x.wal && echo 100% > /dev/null");
  });

  test("stderr is logged with the values of secret-looking variables cut out", () => {
    const env = { AWS_SECRET_ACCESS_KEY: "s3cr3t-value", MY_TOKEN: "tok-123456", PATH: "/usr/bin" };
    const text = redactEnvSecrets("denied for s3cr3t-value and tok-123456 in /usr/bin", env);
    expect(text).not.toContain("s3cr3t-value");
    expect(text).not.toContain("tok-123456");
    expect(text).toContain("/usr/bin");
  });
});

describe("archive_command that hangs", () => {
  /** Whether a process is gone (a zombie no one reaped yet counts as gone). */
  function gone(pid: number): boolean {
    try {
      return fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.startsWith("Z") ?? true;
    } catch {
      return true;
    }
  }

  test("is killed, with what it started, past its time and counts as a failure", async () => {
    const paths = dataPaths(tempDir());
    const { wal } = Wal.open(paths.walDir, { segmentSizeBytes: 1 << 20, logger: silentLogger });
    const pidFile = join(paths.dataDir, "child.pid");
    const io = fileWalArchiveIo(`echo started >&2; sleep 600 & echo $! > ${pidFile}; wait`, paths, wal, 500);
    const attempt = await io.archive(range(1, 3), "c-1");
    expect(attempt).toEqual({ ok: false, name: archiveSegmentName({ firstIndex: 1, lastIndex: 3, term: 1 }), exitCode: null, stderr: "started", timedOutAfterMs: 500 });
    const child = Number(fs.readFileSync(pidFile, "utf8"));
    for (let i = 0; i < 50 && !gone(child); i++) await Bun.sleep(20);
    expect(gone(child)).toBe(true);
    wal.close();
  });
});
