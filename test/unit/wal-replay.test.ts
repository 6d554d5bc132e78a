// Point-in-time replay of an archived WAL (SPEC §4.5 step 4), on real temp dirs: what is
// replayed (every entry stamped at or before the target, nothing after, in order across
// overlapping segments), and every refusal (a gap, damage, a target before the snapshot, a
// bad timestamp, an empty archive, a raft/ that holds more than a snapshot) leaves the data
// directory exactly as it was.

import { afterEach, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openArchiveSource, parseReplayTarget, replayWalArchive, type WalReplayReport } from "../../src/backup/index.ts";
import {
  Wal, archiveSegmentName, dataPaths, encodeArchiveSegment, readHardState, snapshotDirName, writeHardState,
} from "../../src/storage/index.ts";
import type { Entry } from "../../src/raft/types.ts";
import { SvcError, silentLogger } from "../../src/util/index.ts";

const dirs: string[] = [];
function tempDir(): string {
  const d = fs.mkdtempSync(join(tmpdir(), "svc-replay-"));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

const t0 = Date.parse("2026-11-22T10:00:00Z");
/** Entry i is stamped i seconds after t0 (plus 500 ms), so a target picks an exact entry. */
function entry(index: number, term = 1): Entry {
  return { term, index, kind: "normal", timestampMs: t0 + index * 1000 + 500, data: new TextEncoder().encode(`write ${index}`) };
}
const at = (index: number): string => new Date(t0 + index * 1000).toISOString().replace(".000Z", "Z");

/** A stopped node's data dir as SPEC §4.5 step 3 leaves it: raft/ holds only a snapshot at `index`; store/ holds a newer store. */
function nodeWithSnapshot(index: number, term = 1): string {
  const dataDir = tempDir();
  const paths = dataPaths(dataDir);
  const snapDir = join(paths.snapshotsDir, snapshotDirName(term, index));
  fs.mkdirSync(snapDir, { recursive: true });
  const state = Buffer.from(`image at ${index}`);
  fs.writeFileSync(join(snapDir, "state.db"), state);
  fs.writeFileSync(join(snapDir, "meta.json"), JSON.stringify({
    formatVersion: 1, clusterId: "c-1", index, term, membership: { voters: ["node1"], learners: [] },
    createdAt: new Date(t0 + index * 1000 + 600).toISOString(), stateSha256: createHash("sha256").update(state).digest("hex"), stateSizeBytes: state.length,
  }));
  fs.mkdirSync(paths.storeDir, { recursive: true });
  fs.writeFileSync(paths.storePath, "the store as it was before the restore");
  return dataDir;
}

/** An archive directory holding segments of entries first..last each. */
function archive(ranges: [number, number][], term = 1): string {
  const dir = tempDir();
  for (const [first, last] of ranges) writeSegment(dir, first, last, term);
  return dir;
}

function writeSegment(dir: string, first: number, last: number, term = 1): string {
  const entries: Entry[] = [];
  for (let i = first; i <= last; i++) entries.push(entry(i, term));
  const name = archiveSegmentName({ firstIndex: first, lastIndex: last, term });
  fs.writeFileSync(join(dir, name), encodeArchiveSegment(entries));
  return name;
}

function replay(dataDir: string, walDir: string, until: string): Promise<WalReplayReport> {
  return replayWalArchive({ dataDir, source: openArchiveSource(walDir), until: parseReplayTarget(until), segmentSizeBytes: 64 * 1024, logger: silentLogger });
}

/** Every file under `dir` with its bytes' hash: "nothing changed" is equality of two of these. */
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of fs.readdirSync(dir, { recursive: true }) as string[]) {
    const path = join(dir, name);
    // The data directory's lock file, as any offline tool or node start leaves it.
    if (name === "LOCK") continue;
    if (fs.statSync(path).isFile()) out[name] = createHash("sha256").update(fs.readFileSync(path)).digest("hex");
  }
  return out;
}

async function refusal(dataDir: string, run: () => Promise<unknown>): Promise<SvcError> {
  const before = tree(dataDir);
  const e = await run().then(() => null, (x: unknown) => x);
  expect(e).toBeInstanceOf(SvcError);
  expect(tree(dataDir)).toEqual(before);
  return e as SvcError;
}

function walIndexes(dataDir: string): number[] {
  return Wal.open(dataPaths(dataDir).walDir, { segmentSizeBytes: 64 * 1024, logger: silentLogger }).entries.map((e) => e.index);
}

describe("wal-replay", () => {
  test("replays the entries after the snapshot up to the last one stamped at or before the target second, and stops there", async () => {
    const dataDir = nodeWithSnapshot(10);
    const walDir = archive([[1, 20], [21, 40], [41, 60]]);
    const r = await replay(dataDir, walDir, at(35));
    expect(walIndexes(dataDir)).toEqual(Array.from({ length: 25 }, (_, i) => 11 + i));
    expect(r.entries).toBe(25);
    expect(r.lastIndex).toBe(35);
    expect(r.stoppedBefore?.index).toBe(36);
    const hs = readHardState(dataPaths(dataDir).hardStatePath);
    expect(hs?.commit).toBe(35);
    expect(hs?.clusterId).toBe("c-1");
    // The store held writes after the target: it goes, and the node rebuilds it from the snapshot and the WAL.
    expect(fs.existsSync(dataPaths(dataDir).storePath)).toBe(false);
  });

  test("a checkpoint record of the history replaced is removed: it vouched for a store that is gone, at an index the replayed log need not reach", async () => {
    const dataDir = nodeWithSnapshot(10);
    const checkpoint = join(dataPaths(dataDir).raftDir, "checkpoint");
    fs.writeFileSync(checkpoint, JSON.stringify({ index: 3015, term: 1, clusterId: "c-1" }));
    await replay(dataDir, archive([[1, 20], [21, 40]]), at(35));
    expect(fs.existsSync(checkpoint)).toBe(false);
  });

  test("a target with a fraction of a second stops before an entry later in that second", async () => {
    const dataDir = nodeWithSnapshot(10);
    const walDir = archive([[1, 40]]);
    const r = await replay(dataDir, walDir, new Date(t0 + 20_400).toISOString());
    expect(r.lastIndex).toBe(19);
  });

  test("a target given with an offset is the same instant in UTC", () => {
    expect(parseReplayTarget("2026-11-22T11:00:05+01:00").atMs).toBe(parseReplayTarget("2026-11-22T10:00:05Z").atMs);
  });

  test("overlapping segments from two leaders are read once, in order, and a damaged one an intact one covers is stepped over", async () => {
    const dataDir = nodeWithSnapshot(5);
    const walDir = archive([[1, 20], [11, 30], [21, 30], [31, 50]]);
    const damaged = writeSegment(walDir, 31, 45);
    const bytes = fs.readFileSync(join(walDir, damaged));
    bytes[bytes.length - 3] = (bytes[bytes.length - 3] ?? 0) ^ 0xff;
    fs.writeFileSync(join(walDir, damaged), bytes);
    const r = await replay(dataDir, walDir, at(100));
    expect(walIndexes(dataDir)).toEqual(Array.from({ length: 45 }, (_, i) => 6 + i));
    expect(r.stoppedBefore).toBeNull();
    expect(r.warnings.join("\n")).toContain("before the target");
  });

  test("a gap in the archive is refused, naming the missing entries, and nothing is changed", async () => {
    const dataDir = nodeWithSnapshot(10);
    const walDir = archive([[1, 20], [26, 40]]);
    const e = await refusal(dataDir, () => replay(dataDir, walDir, at(35)));
    expect(e.code).toBe("ARCHIVE_GAP");
    expect(e.message).toContain("entry 21");
    expect(e.hint).toContain("21…25");
    // Entry 20 is stamped at 20.5 s: a target from then on needs entry 21 to know where to stop.
    expect(e.hint).toContain(`a target before ${new Date(t0 + 20_500).toISOString()} (the time of entry 20, the last one held)`);
    expect(walIndexes(await (async () => {
      await replay(dataDir, walDir, new Date(t0 + 20_499).toISOString());
      return dataDir;
    })())).toEqual(Array.from({ length: 9 }, (_, i) => 11 + i));
  });

  test("an archive that starts after the snapshot is a gap", async () => {
    const dataDir = nodeWithSnapshot(10);
    const e = await refusal(dataDir, () => replay(dataDir, archive([[15, 40]]), at(35)));
    expect(e.code).toBe("ARCHIVE_GAP");
  });

  test("a damaged segment is refused with its file and byte offset, and nothing is changed", async () => {
    const dataDir = nodeWithSnapshot(10);
    const walDir = archive([[1, 20], [41, 60]]);
    const name = writeSegment(walDir, 21, 40);
    const bytes = fs.readFileSync(join(walDir, name));
    bytes[200] = (bytes[200] ?? 0) ^ 0xff;
    fs.writeFileSync(join(walDir, name), bytes);
    const e = await refusal(dataDir, () => replay(dataDir, walDir, at(50)));
    expect(e.code).toBe("ARCHIVE_DAMAGED");
    expect(e.message).toContain(name);
    expect(e.message).toMatch(/byte offset \d+/);
  });

  test("a target before the snapshot is refused", async () => {
    const dataDir = nodeWithSnapshot(30);
    const e = await refusal(dataDir, () => replay(dataDir, archive([[1, 40]]), at(20)));
    expect(e.code).toBe("WAL_REPLAY_REFUSED");
    expect(e.message).toContain("before the snapshot");
  });

  test("a timestamp without a zone, or not a timestamp, is refused", async () => {
    const dataDir = nodeWithSnapshot(10);
    const walDir = archive([[1, 40]]);
    for (const bad of ["2026-11-22T10:00:30", "yesterday", "2026-02-30T10:00:00Z", "2026-11-22T25:00:00Z"]) {
      const e = await refusal(dataDir, async () => replay(dataDir, walDir, bad));
      expect(e.code).toBe("WAL_REPLAY_REFUSED");
    }
    expect(() => parseReplayTarget("2026-11-22T10:00:30")).toThrow("no time zone");
  });

  test("a directory with no archived segments is refused", async () => {
    const dataDir = nodeWithSnapshot(10);
    const walDir = tempDir();
    fs.writeFileSync(join(walDir, "0000000000000001-0000000000000001.wal"), "a local WAL segment, not an archived one");
    const e = await refusal(dataDir, () => replay(dataDir, walDir, at(35)));
    expect(e.code).toBe("ARCHIVE_EMPTY");
  });

  test("a raft/ that holds a node's Raft state, not only a snapshot, is refused", async () => {
    const dataDir = nodeWithSnapshot(10);
    writeHardState(dataPaths(dataDir).hardStatePath, { term: 3, vote: null, commit: 12, clusterId: "c-1" });
    const e = await refusal(dataDir, () => replay(dataDir, archive([[1, 40]]), at(35)));
    expect(e.code).toBe("WAL_REPLAY_REFUSED");
    expect(e.message).toContain("hardstate");
  });

  test("two histories in one location (before and after an earlier restore) are refused", async () => {
    const dataDir = nodeWithSnapshot(5);
    const walDir = archive([[1, 20]]);
    const later = writeSegment(walDir, 15, 30, 2);
    const e = await refusal(dataDir, () => replay(dataDir, walDir, at(100)));
    expect(e.code).toBe("ARCHIVE_CONFLICT");
    // Both segments are named, so that the operator can separate the histories.
    expect(e.message).toContain(later);
    expect(e.message).toContain(archiveSegmentName({ firstIndex: 1, lastIndex: 20, term: 1 }));
  });

  test("a full backup's raft/RESTORED mark is consumed: the replayed log starts at its snapshot and goes further", async () => {
    const dataDir = nodeWithSnapshot(10);
    fs.writeFileSync(join(dataPaths(dataDir).raftDir, "RESTORED"), "{}");
    const r = await replay(dataDir, archive([[1, 40]]), at(30));
    expect(fs.existsSync(join(dataPaths(dataDir).raftDir, "RESTORED"))).toBe(false);
    expect(r.lastIndex).toBe(30);
  });

  test("the restored node's term is past every term in the archive", async () => {
    const dataDir = nodeWithSnapshot(10);
    const walDir = archive([[1, 20]]);
    writeSegment(walDir, 21, 40, 7);
    await replay(dataDir, walDir, at(15));
    expect(readHardState(dataPaths(dataDir).hardStatePath)?.term).toBe(7);
  });
});
