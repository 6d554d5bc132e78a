// Point-in-time replay of an archived WAL (SPEC §4.5 step 4), on real temp dirs: what is
// replayed (every entry stamped at or before the target, nothing after, in order across
// overlapping segments), what the restore adds after it (the archive mark, the resume of a
// backup's pause), and every refusal (a gap, damage, a target before the snapshot, a bad
// timestamp, an empty archive, two histories, a raft/ that holds more than a snapshot) leaves
// the data directory exactly as it was.

import { afterEach, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openArchiveSource, parseReplayTarget, replayWalArchive, type ArchiveSource, type WalReplayReport } from "../../src/backup/index.ts";
import {
  Wal, archiveSegmentName, dataPaths, encodeArchiveSegment, readHardState, snapshotDirName, writeHardState, writeRemovedMark,
} from "../../src/storage/index.ts";
import { readLogStart } from "../../src/storage/restore-marker.ts";
import { Store, decodeCommand, encodeCommand, type Command } from "../../src/store/index.ts";
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

/**
 * A stopped node's data dir as SPEC §4.5 step 3 leaves it: raft/ holds only a snapshot at `index`;
 * store/ holds a newer store. The snapshot's state.db is a stand-in, or `image`'s bytes.
 */
function nodeWithSnapshot(index: number, term = 1, image?: Uint8Array): string {
  const dataDir = tempDir();
  const paths = dataPaths(dataDir);
  const snapDir = join(paths.snapshotsDir, snapshotDirName(term, index));
  fs.mkdirSync(snapDir, { recursive: true });
  const state = image === undefined ? Buffer.from(`image at ${index}`) : Buffer.from(image);
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

/** A segment of entries first..last; `clusterId` is the cluster its header names (none: written before headers named one). */
function writeSegment(dir: string, first: number, last: number, term = 1, clusterId?: string): string {
  const entries: Entry[] = [];
  for (let i = first; i <= last; i++) entries.push(entry(i, term));
  const name = archiveSegmentName({ firstIndex: first, lastIndex: last, term });
  fs.writeFileSync(join(dir, name), encodeArchiveSegment(entries, clusterId));
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

function walEntries(dataDir: string): Entry[] {
  const { wal, entries } = Wal.open(dataPaths(dataDir).walDir, { segmentSizeBytes: 64 * 1024, logger: silentLogger });
  wal.close();
  return entries;
}

function walIndexes(dataDir: string): number[] {
  return walEntries(dataDir).map((e) => e.index);
}

/** first..last, and the restore's own entry after them (see "the replayed log ends with"). */
const replayedThrough = (first: number, last: number): number[] => Array.from({ length: last - first + 2 }, (_, i) => first + i);

/** The entries the restore itself wrote after the replayed ones: their commands. */
function restoreCommands(dataDir: string, lastReplayed: number): unknown[] {
  return walEntries(dataDir).filter((e) => e.index > lastReplayed).map((e) => decodeCommand(e.data));
}

/** A real store image (a snapshot's state.db) at `index`, applied from `commands` of term 1 stamped like entry(). */
function storeImage(index: number, commands: Command[]): Uint8Array {
  const path = join(tempDir(), "state.db");
  const store = Store.open(path);
  const entries: Entry[] = [];
  for (let i = 1; i <= index; i++) {
    const command: Command = commands[i - 1] ?? { op: "execute", statements: [{ sql: "SELECT 1", params: [] }] };
    entries.push({ term: 1, index: i, kind: "normal", timestampMs: t0 + i * 1000 + 500, data: encodeCommand(command) });
  }
  store.apply(entries);
  store.checkpoint();
  store.close();
  return new Uint8Array(fs.readFileSync(path));
}

describe("wal-replay", () => {
  test("replays the entries after the snapshot up to the last one stamped at or before the target second, and stops there", async () => {
    const dataDir = nodeWithSnapshot(10);
    const walDir = archive([[1, 20], [21, 40], [41, 60]]);
    const r = await replay(dataDir, walDir, at(35));
    expect(walIndexes(dataDir)).toEqual(replayedThrough(11, 35));
    expect(r.entries).toBe(25);
    expect(r.lastIndex).toBe(35);
    expect(r.stoppedBefore?.index).toBe(36);
    const hs = readHardState(dataPaths(dataDir).hardStatePath);
    expect(hs?.commit).toBe(36);
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
    expect(walIndexes(dataDir)).toEqual(replayedThrough(6, 50));
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
    })())).toEqual(replayedThrough(11, 19));
  });

  test("a snapshot of a later history (a higher term) with the archive of an earlier one is refused before anything is changed", async () => {
    // A restored cluster's snapshot (term 12) and the archive of the history it replaced (term 1):
    // the entries after the snapshot's index are not the snapshot's.
    const dataDir = nodeWithSnapshot(10, 12);
    const e = await refusal(dataDir, () => replay(dataDir, archive([[1, 40]]), at(35)));
    expect(e.code).toBe("ARCHIVE_CONFLICT");
    expect(e.message).toContain("the archived entry 11 is in term 1, below the term 12 of the snapshot");
    expect(e.message).toContain("different histories");
    expect(e.hint).toContain("--wal-dir");
  });

  test("an archive that starts after the snapshot is a gap; no target after this snapshot avoids it, and the refusal says so", async () => {
    const dataDir = nodeWithSnapshot(10);
    const e = await refusal(dataDir, () => replay(dataDir, archive([[15, 40]]), at(35)));
    expect(e.code).toBe("ARCHIVE_GAP");
    expect(e.hint).toContain("a target before entry 11 from an older snapshot");
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

  /** Cut `name` in `dir` short, in the middle of the record after entry `lastWhole` (a copy interrupted there). */
  function cutAfter(dir: string, name: string, first: number, lastWhole: number): void {
    const whole: Entry[] = [];
    for (let i = first; i <= lastWhole; i++) whole.push(entry(i));
    const keptBytes = encodeArchiveSegment(whole).length + 5;
    fs.truncateSync(join(dir, name), keptBytes);
  }

  test("a segment cut short (an interrupted copy) is replayed up to a target before the cut, and the warning names it", async () => {
    const dataDir = nodeWithSnapshot(10);
    const walDir = archive([[1, 20], [41, 60]]);
    const name = writeSegment(walDir, 21, 40);
    cutAfter(walDir, name, 21, 30);
    const r = await replay(dataDir, walDir, at(25));
    expect(walIndexes(dataDir)).toEqual(replayedThrough(11, 25));
    expect(r.stoppedBefore?.index).toBe(26);
    expect(r.warnings.join("\n")).toContain(`${name} is damaged at byte offset`);
    expect(r.warnings.join("\n")).toContain("its entries up to 30 are whole, and the replay stopped at entry 25, before the damage");
  });

  test("a segment cut short with an intact one overlapping it past the cut: the replay goes on through that one, and the warning says so rather than that it stopped before the damage", async () => {
    const dataDir = nodeWithSnapshot(10);
    const walDir = archive([[1, 20], [31, 60]]);
    const name = writeSegment(walDir, 21, 40);
    cutAfter(walDir, name, 21, 30);
    const r = await replay(dataDir, walDir, at(50));
    expect(walIndexes(dataDir)).toEqual(replayedThrough(11, 50));
    const warning = r.warnings.find((w) => w.includes(name)) ?? "";
    expect(warning).toContain(`${name} is damaged at byte offset`);
    expect(warning).toContain("its entries up to 30 are whole");
    expect(warning).not.toContain("before the damage");
    expect(warning).toContain(`the entries after 30 were read from ${archiveSegmentName({ firstIndex: 31, lastIndex: 60, term: 1 })}`);
  });

  test("a segment that cannot be fetched after a damaged one was kept for its whole entries is refused, and the kept copy is released (a download is not left behind)", async () => {
    const dataDir = nodeWithSnapshot(10);
    const walDir = archive([[1, 20], [21, 35]]);
    const damaged = writeSegment(walDir, 21, 40);
    cutAfter(walDir, damaged, 21, 30);
    const unreachable = archiveSegmentName({ firstIndex: 21, lastIndex: 35, term: 1 });
    // As an object store's copies: each fetch a download that must be released.
    const dir = openArchiveSource(walDir);
    const held = new Set<string>();
    let fetches = 0;
    const source: ArchiveSource = {
      location: dir.location,
      listArchive: () => dir.listArchive(),
      readArchived: (name) => dir.readArchived(name),
      async fetchArchived(name) {
        if (name === unreachable) throw new Error("connection reset");
        const copy = await dir.fetchArchived(name);
        const id = `${name}#${++fetches}`;
        held.add(id);
        return { path: copy.path, release: () => held.delete(id) };
      },
    };
    const e = await refusal(dataDir, () => replayWalArchive({ dataDir, source, until: parseReplayTarget(at(33)), segmentSizeBytes: 64 * 1024, logger: silentLogger }));
    expect(e.code).toBe("ARCHIVE_UNREADABLE");
    expect(e.message).toContain(unreachable);
    expect([...held]).toEqual([]);
  });

  test("a target past the cut of a damaged segment is refused with a target that works; taking it replays every entry before it", async () => {
    const dataDir = nodeWithSnapshot(10);
    const walDir = archive([[1, 20], [41, 60]]);
    const name = writeSegment(walDir, 21, 40);
    cutAfter(walDir, name, 21, 30);
    const e = await refusal(dataDir, () => replay(dataDir, walDir, at(50)));
    expect(e.code).toBe("ARCHIVE_DAMAGED");
    expect(e.message).toContain(name);
    // Entry 30, the last one whole, is stamped at 30.5 s: a target before it stops the replay there.
    const before = new Date(t0 + 30_500).toISOString();
    expect(e.hint).toContain(`a target before ${before} (the time of entry 30, the last one held)`);
    await replay(dataDir, walDir, new Date(t0 + 30_499).toISOString());
    expect(walIndexes(dataDir)).toEqual(replayedThrough(11, 29));
  });

  test("the segment right after the snapshot damaged further on: a target before its first entry replays nothing past the snapshot", async () => {
    const dataDir = nodeWithSnapshot(20);
    const walDir = archive([[1, 20]]);
    const name = writeSegment(walDir, 21, 40);
    cutAfter(walDir, name, 21, 30);
    // Entry 20 (the snapshot's) is stamped at 20.5 s, entry 21 at 21.5 s.
    await replay(dataDir, walDir, new Date(t0 + 21_000).toISOString());
    expect(walIndexes(dataDir)).toEqual([21]);
    expect(restoreCommands(dataDir, 20)).toEqual([{ op: "archived_through", index: 20 }]);
  });

  test("a target before the snapshot is refused", async () => {
    const dataDir = nodeWithSnapshot(30);
    const e = await refusal(dataDir, () => replay(dataDir, archive([[1, 40]]), at(20)));
    expect(e.code).toBe("WAL_REPLAY_REFUSED");
    expect(e.message).toContain("before the snapshot");
  });

  test("a target before the newest of several snapshots copied in is refused naming the older ones and the snapshot to move out; moved out, the replay starts from the older one", async () => {
    const dataDir = nodeWithSnapshot(30);
    const older = nodeWithSnapshot(10);
    const snapshots = dataPaths(dataDir).snapshotsDir;
    fs.cpSync(join(dataPaths(older).snapshotsDir, snapshotDirName(1, 10)), join(snapshots, snapshotDirName(1, 10)), { recursive: true });
    const walDir = archive([[1, 40]]);
    const e = await refusal(dataDir, () => replay(dataDir, walDir, at(20)));
    expect(e.message).toContain("before the snapshot");
    const newest = join(snapshots, snapshotDirName(1, 30));
    expect(e.hint).toContain(`${snapshots} also holds an older snapshot (${snapshotDirName(1, 10)}); wal-replay replays onto the newest one there: move ${newest} out of it`);
    fs.renameSync(newest, join(tempDir(), "set-aside"));
    await replay(dataDir, walDir, at(20));
    expect(walIndexes(dataDir)).toEqual(replayedThrough(11, 20));
  });

  test("a snapshot copied in with the .hold it was copied under (SPEC §4.4 step 3 by hand) is released: held, no cleanup would ever remove it", async () => {
    const dataDir = nodeWithSnapshot(10);
    const hold = join(dataPaths(dataDir).snapshotsDir, snapshotDirName(1, 10), ".hold");
    fs.writeFileSync(hold, "");
    const r = await replay(dataDir, archive([[1, 40]]), at(20));
    expect(fs.existsSync(hold)).toBe(false);
    expect(r.warnings.join("\n")).toContain(`removed ${hold}`);
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

  test("a year before 100 is that year, and an offset past 23:59 is refused", () => {
    // Date.UTC reads a year 0 to 99 as 1900 to 1999.
    expect(parseReplayTarget("0099-06-01T00:00:00Z").atMs).toBe(Date.parse("0099-06-01T00:00:00Z"));
    expect(parseReplayTarget("2026-11-22T22:30:00+01:00").atMs).toBe(Date.parse("2026-11-22T21:30:00Z"));
    for (const bad of ["2026-11-22T10:00:30+25:00", "2026-11-22T10:00:30-01:60", "2026-11-22T10:00:30+2400"]) {
      expect(() => parseReplayTarget(bad)).toThrow("not a valid");
    }
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
    // So is one that still records a removal from the old history: the replayed node would never campaign.
    fs.rmSync(dataPaths(dataDir).hardStatePath);
    writeRemovedMark(dataPaths(dataDir).raftDir, { configIndex: 99, by: "n2", clusterId: "c-1" });
    const removed = await refusal(dataDir, () => replay(dataDir, archive([[1, 40]]), at(35)));
    expect(removed.code).toBe("WAL_REPLAY_REFUSED");
    expect(removed.message).toContain("raft/REMOVED");
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

  test("a segment another cluster archived is refused, naming it and both clusters, even where it reaches further than the snapshot's own; nothing is changed", async () => {
    // Two clusters archiving to one location (or segments copied from the wrong one): the
    // other cluster's 6…12 reaches further than this one's 6…8 and would be read in its place.
    const dataDir = nodeWithSnapshot(5);
    const walDir = tempDir();
    writeSegment(walDir, 1, 5, 1, "c-1");
    writeSegment(walDir, 6, 8, 1, "c-1");
    const foreign = writeSegment(walDir, 6, 12, 1, "c-2");
    const e = await refusal(dataDir, () => replay(dataDir, walDir, at(100)));
    expect(e.code).toBe("ARCHIVE_CONFLICT");
    expect(e.message).toContain(foreign);
    expect(e.message).toContain("c-2");
    expect(e.message).toContain("c-1");
    expect(e.hint).toContain("--wal-dir");
    // The cluster's own segments alone replay; so do segments whose header names no cluster.
    fs.rmSync(join(walDir, foreign));
    writeSegment(walDir, 9, 12);
    await replay(dataDir, walDir, at(100));
    expect(walIndexes(dataDir)).toEqual(replayedThrough(6, 12));
  });

  test("a snapshot put one level too deep (a backup's latest/ copied whole), as loose files, or beside raft/snapshots/ is refused with the command that puts it in place", async () => {
    const name = snapshotDirName(1, 10);
    const cases: [string, (snaps: string, raft: string) => void, (snaps: string, raft: string) => string][] = [
      ["latest/ whole", (snaps) => {
        fs.mkdirSync(join(snaps, "latest"));
        fs.renameSync(join(snaps, name), join(snaps, "latest", name));
        fs.writeFileSync(join(snaps, "latest", "metadata.json"), "{}");
      }, (snaps) => `mv ${join(snaps, "latest", name)} ${join(snaps, name)}`],
      ["renamed", (snaps) => fs.renameSync(join(snaps, name), join(snaps, "snap")), (snaps) => `mv ${join(snaps, "snap")} ${join(snaps, name)}`],
      ["loose files", (snaps) => {
        for (const f of ["state.db", "meta.json"]) fs.renameSync(join(snaps, name, f), join(snaps, f));
        fs.rmdirSync(join(snaps, name));
      }, (snaps) => `mkdir ${join(snaps, name)} && mv ${join(snaps, "state.db")} ${join(snaps, "meta.json")} ${join(snaps, name)}/`],
      ["beside raft/snapshots/", (snaps, raft) => fs.renameSync(join(snaps, name), join(raft, name)), (snaps, raft) => `mv ${join(raft, name)} ${join(snaps, name)}`],
    ];
    for (const [what, misplace, fix] of cases) {
      const dataDir = nodeWithSnapshot(10);
      const { snapshotsDir, raftDir } = dataPaths(dataDir);
      misplace(snapshotsDir, raftDir);
      const e = await refusal(dataDir, () => replay(dataDir, archive([[1, 40]]), at(30)));
      expect(e.code, what).toBe("WAL_REPLAY_REFUSED");
      expect(e.hint, what).toContain(fix(snapshotsDir, raftDir));
    }
  });

  test.if(process.getuid?.() === 0)("run as root on a data directory the service user owns, what it writes is given to that user, refused or not: the node can start on it", async () => {
    const owned = (dataDir: string): string[] => {
      const wrong: string[] = [];
      for (const name of ["", ...(fs.readdirSync(dataDir, { recursive: true }) as string[])]) {
        const st = fs.lstatSync(join(dataDir, name));
        if (st.uid !== 65534 || st.gid !== 65534) wrong.push(`${name || "."} (${st.uid}:${st.gid})`);
      }
      return wrong;
    };
    const giveAway = (dataDir: string): void => {
      for (const name of ["", ...(fs.readdirSync(dataDir, { recursive: true }) as string[])]) fs.lchownSync(join(dataDir, name), 65534, 65534);
    };
    const dataDir = nodeWithSnapshot(10);
    giveAway(dataDir);
    await replay(dataDir, archive([[1, 40]]), at(30));
    expect(owned(dataDir)).toEqual([]);
    const refused = nodeWithSnapshot(10);
    giveAway(refused);
    await replay(refused, archive([[15, 40]]), at(30)).catch(() => null);
    expect(owned(refused)).toEqual([]);
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
    expect(readHardState(dataPaths(dataDir).hardStatePath)?.term).toBe(8);
  });

  test("the replayed log ends with the mark that the archive holds every entry replayed, in a term past the archive's: the restored cluster archives from the next entry", async () => {
    const dataDir = nodeWithSnapshot(10);
    const walDir = archive([[1, 20]]);
    writeSegment(walDir, 21, 40, 7);
    const r = await replay(dataDir, walDir, at(35));
    expect(r.lastIndex).toBe(35);
    const tail = walEntries(dataDir).filter((e) => e.index > 35);
    expect(tail.map((e) => [e.index, e.term, decodeCommand(e.data)])).toEqual([[36, 8, { op: "archived_through", index: 35 }]]);
    const hs = readHardState(dataPaths(dataDir).hardStatePath);
    expect(hs).toMatchObject({ term: 8, commit: 36, vote: null });
    // Where this node's log starts over: after the snapshot it was restored from.
    expect(readLogStart(dataPaths(dataDir).raftDir)).toMatchObject({ index: 10, term: 1 });
  });

  test("a snapshot taken while writes were paused for a backup, replayed to a target inside the pause, ends with writes resumed, and says so", async () => {
    const image = storeImage(10, [{ op: "pause_writes", untilMs: t0 + 3_600_000 }]);
    const dataDir = nodeWithSnapshot(10, 1, image);
    const r = await replay(dataDir, archive([[1, 40]]), at(30));
    expect(restoreCommands(dataDir, 30)).toEqual([{ op: "archived_through", index: 30 }, { op: "resume_writes" }]);
    expect(readHardState(dataPaths(dataDir).hardStatePath)?.commit).toBe(32);
    expect(r.warnings.join("\n")).toContain("writes had been paused when the backup was taken");
    // Resumed within the replayed range, or never paused: nothing to add.
    const pausedThenResumed = nodeWithSnapshot(10, 1, image);
    const walDir = tempDir();
    const entries: Entry[] = [];
    for (let i = 11; i <= 20; i++) entries.push(i === 15 ? { ...entry(i), data: encodeCommand({ op: "resume_writes" }) } : entry(i));
    fs.writeFileSync(join(walDir, archiveSegmentName({ firstIndex: 11, lastIndex: 20, term: 1 })), encodeArchiveSegment(entries));
    const resumed = await replay(pausedThenResumed, walDir, at(20));
    expect(restoreCommands(pausedThenResumed, 20)).toEqual([{ op: "archived_through", index: 20 }]);
    expect(resumed.warnings.join("\n")).not.toContain("paused");
    const neverPaused = nodeWithSnapshot(10, 1, storeImage(10, []));
    await replay(neverPaused, archive([[1, 40]]), at(30));
    expect(restoreCommands(neverPaused, 30)).toEqual([{ op: "archived_through", index: 30 }]);
  });

  test("segments of a history a restore replaced and of the restored cluster's history after it are refused as two histories, never replayed as one log", async () => {
    // The old cluster archived 1…40 in term 1; restored to entry 30, the new cluster (term 3 on)
    // archived 31…40 and 41…50 into the same location. Read as one log, 31…40 would come from the
    // old history and 41…50 from the new one, with no overlap to compare.
    const dataDir = nodeWithSnapshot(5);
    const walDir = archive([[1, 30], [31, 40]]);
    const newer = writeSegment(walDir, 31, 40, 3);
    writeSegment(walDir, 41, 50, 3);
    const e = await refusal(dataDir, () => replay(dataDir, walDir, at(100)));
    expect(e.code).toBe("ARCHIVE_CONFLICT");
    expect(e.message).toContain(newer);
    expect(e.message).toContain(archiveSegmentName({ firstIndex: 31, lastIndex: 40, term: 1 }));
  });
});
