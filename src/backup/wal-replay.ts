// Point-in-time restore (SPEC §4.5 step 4): on a stopped node whose raft/ holds only a
// snapshot, write the archived entries after that snapshot into raft/wal/, in order, up to and
// including the last entry stamped at or before the target time, and stop exactly there. The
// hard state then says they are committed, and the store is removed: at `svc serve` the node
// rebuilds it from the snapshot and applies the entries, and the other (emptied) members
// fetch everything from it.
//
// The restored history is a new one from there, in a term past every term in the archive. It
// starts with entries of the restore's own, committed with the replayed ones: the mark that the
// archive holds every entry replayed (so the restored cluster archives from the next one, its
// first, whichever member leads), and resume_writes when writes were paused at the target (a
// backup's pause is no pause of the restored cluster's).
//
// "At or before T" is by the entries' own timestamps (the leader's clock when proposed):
// replay stops before the first entry stamped later than T. A target given to the second
// (no fraction) covers that whole second.
//
// Every check runs before anything is changed: an error leaves the data directory as it was.
// The new WAL is written beside raft/wal/ and moved in only when complete.

import * as fs from "node:fs";
import { dirname, join } from "node:path";
import { isDiskFullError } from "../io/index.ts";
import type { Entry } from "../util/log-data.ts";
import { SvcError, errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/logger.ts";
import {
  SnapshotStore, Wal, archiveFileEntries, giveToDataDirOwner, checkArchiveFile, dataPaths, ensureDir, fsyncDir, listSegments, lockDataDir, readSegment, removedMarkPath, removeReplayLeftovers, writeHardState,
  type SnapshotEntry,
} from "../storage/index.ts";
import { logStartFile, restoreMarkerPath, writeLogStart } from "../storage/restore-marker.ts";
import { parseSnapshotDirName, readSnapshotMeta, snapshotDirName, snapshotHoldFile, snapshotMetaFile, snapshotStateFile } from "../storage/snapshots.ts";
import { Store, backupPauseResumedText, decodeCommand, imageWritesPause, pauseSetBy, restoreEntry, type HeldPause } from "../store/index.ts";
import type { ArchiveSource, ArchivedSegment, LocalCopy } from "./archive-source.ts";

export interface ReplayTarget {
  /** The time as given, in ms since the epoch. */
  readonly atMs: number;
  /** Entries stamped at or before this are replayed. */
  readonly limitMs: number;
  readonly text: string;
}

export interface ReplayProgress {
  entries: number;
  /** Index of the last entry written. */
  lastIndex: number;
  /** Timestamp of the last entry written (ms), 0 before any. */
  reachedMs: number;
  elapsedMs: number;
}

export interface WalReplayOptions {
  dataDir: string;
  source: ArchiveSource;
  until: ReplayTarget;
  segmentSizeBytes: number;
  logger: Logger;
  onProgress?: (p: ReplayProgress) => void;
}

export interface WalReplayReport {
  dataDir: string;
  archive: string;
  until: string;
  snapshot: { index: number; term: number; dir: string };
  entries: number;
  /** First and last index replayed (null when none). */
  firstIndex: number | null;
  lastIndex: number;
  /**
   * The restore's own entries after lastIndex: the archive mark at lastIndex (the restored
   * cluster archives from the entry after it), and resume_writes when writes were paused there.
   */
  restoreEntries: { index: number; term: number; op: string }[];
  /** Timestamp of the last entry replayed, ISO 8601 (null when none carried one). */
  reachedAt: string | null;
  /** The first entry not replayed, stamped after the target (null: the archive ended first). */
  stoppedBefore: { index: number; at: string } | null;
  /** The archive's last index. */
  archiveLastIndex: number;
  segmentsRead: number;
  /** Damaged segments another intact one stood in for. */
  skippedDamaged: string[];
  durationMs: number;
  entriesPerSecond: number;
  warnings: string[];
}

const isoZoned = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?(Z|z|[+-]\d{2}(?::?\d{2})?)$/;

/** The forms --until takes, for the messages that refuse one. */
const untilForms = "write YYYY-MM-DDTHH:MM:SS (a fraction of a second may follow) and then Z for UTC or an offset ±HH:MM, " +
  "e.g. --until 2026-11-22T21:30:00Z or --until 2026-11-22T22:30:00+01:00";

/** Read --until: an ISO 8601 date and time with a zone (Z for UTC, or an offset). */
export function parseReplayTarget(text: string): ReplayTarget {
  const m = isoZoned.exec(text.trim());
  if (m === null) {
    const noZone = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}([.,]\d+)?)?$/.test(text.trim());
    throw new SvcError("WAL_REPLAY_REFUSED", noZone
      ? `--until ${JSON.stringify(text)} has no time zone: it could mean any of 24 hours`
      : `--until ${JSON.stringify(text)} is not an ISO 8601 date and time`, { hint: untilForms });
  }
  const [, y, mo, d, h, mi, s, frac, zone] = m;
  const fields = [y, mo, d, h, mi, s].map(Number) as [number, number, number, number, number, number];
  const [year, month, day, hour, minute, second] = fields;
  // setUTCFullYear, not Date.UTC: that one reads a year 0 to 99 as 1900 to 1999.
  const check = new Date(0);
  check.setUTCFullYear(year, month - 1, day);
  check.setUTCHours(hour, minute, second, 0);
  const baseMs = check.getTime();
  const z = zone === undefined || zone.toUpperCase() === "Z" ? null : /^([+-])(\d{2}):?(\d{2})?$/.exec(zone);
  const offsetHours = Number(z?.[2] ?? 0);
  const offsetMinutes = Number(z?.[3] ?? 0);
  if (month < 1 || month > 12 || check.getUTCDate() !== day || check.getUTCMonth() !== month - 1 || hour > 23 || minute > 59 || second > 59 ||
    offsetHours > 23 || offsetMinutes > 59) {
    throw new SvcError("WAL_REPLAY_REFUSED", `--until ${JSON.stringify(text)} is not a valid date and time`, {
      hint: `check the day of the month, the hours, minutes and seconds, and the offset; ${untilForms}`,
    });
  }
  const offsetMs = (z?.[1] === "-" ? -1 : 1) * (offsetHours * 60 + offsetMinutes) * 60_000;
  const fracMs = frac === undefined ? 0 : Math.floor(Number(`0.${frac}`) * 1000);
  const atMs = baseMs + fracMs - offsetMs;
  return { atMs, limitMs: frac === undefined ? atMs + 999 : atMs, text };
}

const iso = (ms: number): string => new Date(ms).toISOString();
/** Entries written to the new WAL per append: the segment read stays the only large buffer. */
const appendBatchEntries = 8192;

/** Run the replay (see the top of this file). Throws with nothing changed when it cannot. */
export async function replayWalArchive(options: WalReplayOptions): Promise<WalReplayReport> {
  const startedMs = performance.now();
  const paths = dataPaths(options.dataDir);
  let lock;
  try {
    lock = lockDataDir(options.dataDir, "wal-replay");
  } catch (e) {
    throw new SvcError("WAL_REPLAY_REFUSED", `${errorMessage(e)}`, { hint: "stop the node first (systemctl stop svc): wal-replay runs offline" });
  }
  const tmpDir = join(paths.raftDir, `wal.replay-${process.pid}`);
  // Once the new WAL is being moved in: the steps that commit it, and how many of them are done.
  let commitSteps: string[] = [];
  let commitStepsDone = 0;
  // A replay killed before it finished left its new WAL here; the lock says none runs now.
  const leftovers = removeReplayLeftovers(paths.raftDir).map(({ path, pid }) =>
    `removed ${path}, left by a wal-replay that did not finish (process ${pid} is not running)`);
  for (const l of leftovers) options.logger.warn(l);
  try {
    const snapshot = await checkRaftHoldsOnlyASnapshot(paths);
    const meta = snapshot.meta;
    if (meta === null) throw new Error("a valid snapshot has its meta");
    const segments = await options.source.listArchive();
    if (segments.length === 0) {
      throw new SvcError("ARCHIVE_EMPTY", `no archived WAL segments (<first>-<last>-<term>.wal) in ${options.source.location}`, {
        hint: "give --wal-dir the location archive_command copies segments to",
      });
    }
    checkOneHistory(options.source.location, segments);
    const warnings: string[] = [...leftovers];
    await checkTargetAfterSnapshot(options, segments, snapshot, warnings);
    // The write pause as of the last entry replayed: the snapshot's, then as entries set it.
    let pause: HeldPause | null = imageWritesPause(join(snapshot.dir, snapshotStateFile));
    let pauseFromReplay = false;

    fs.rmSync(tmpDir, { recursive: true, force: true });
    const { wal } = Wal.open(tmpDir, { segmentSizeBytes: options.segmentSizeBytes, logger: options.logger });
    wal.resetTo(meta.index + 1);
    const chain = new ArchiveChain(options.source, segments, { clusterId: meta.clusterId, dir: snapshot.dir });
    let next = meta.index + 1;
    let written = 0;
    let lastIndex = meta.index;
    let reachedMs = 0;
    let stoppedBefore: Entry | null = null;
    let lastProgressMs = 0;
    let restoreTerm = 0;
    // Terms never go down along a log: an entry in a term below the one before it (the
    // snapshot's, first) is of another history than the snapshot.
    let termBefore = { term: meta.term, of: `the snapshot ${snapshot.dir} (index ${meta.index})` };
    const restoreOwn: Entry[] = [];
    const progress = (): void => {
      options.onProgress?.({ entries: written, lastIndex, reachedMs, elapsedMs: performance.now() - startedMs });
    };
    try {
      let batch: Entry[] = [];
      const flush = (): void => {
        if (batch.length === 0) return;
        wal.append(batch);
        written += batch.length;
        lastIndex = batch.at(-1)?.index ?? lastIndex;
        next = lastIndex + 1;
        batch = [];
      };
      while (stoppedBefore === null) {
        const entries = await chain.entriesFrom(next);
        if (entries === null) break;
        for await (const e of entries) {
          if (e.timestampMs > options.until.limitMs) {
            stoppedBefore = e;
            break;
          }
          if (e.term < termBefore.term) {
            throw new SvcError("ARCHIVE_CONFLICT", `the archived entry ${e.index} is in term ${e.term}, below the term ${termBefore.term} of ${termBefore.of}: the snapshot and the WAL archive ${options.source.location} are of different histories; nothing was changed`, {
              hint: "a snapshot of a cluster restored from a backup or to a point in time goes with the archive that cluster wrote, not with the one of the history it replaced: " +
                "give --wal-dir the archive of the snapshot's history, or use a snapshot taken from the history this archive holds",
            });
          }
          termBefore = { term: e.term, of: `entry ${e.index}` };
          batch.push(e);
          if (e.timestampMs > 0) reachedMs = e.timestampMs;
          const set = pauseSetBy(e);
          if (set !== undefined) {
            pause = set;
            pauseFromReplay = true;
          }
          if (batch.length >= appendBatchEntries) {
            flush();
            // A batch's entry objects are garbage now; collected as it goes, memory stays flat.
            Bun.gc(false);
            if (performance.now() - lastProgressMs >= 250) {
              lastProgressMs = performance.now();
              progress();
            }
          }
        }
        flush();
        // The segment's bytes (tens of megabytes) are garbage now: collected at once, the
        // command's memory stays at about one segment however long the archive.
        Bun.gc(true);
      }
      // The term is past every term in the archive: entries the restored cluster writes never
      // share an archived segment's name with the history it replaced.
      restoreTerm = Math.max(meta.term, ...segments.map((s) => s.range.term)) + 1;
      const nowMs = Date.now();
      restoreOwn.push(restoreEntry({ op: "archived_through", index: lastIndex }, lastIndex + 1, restoreTerm, nowMs));
      if (pause !== null) restoreOwn.push(restoreEntry({ op: "resume_writes" }, lastIndex + 2, restoreTerm, nowMs));
      wal.append(restoreOwn);
      wal.sync();
    } finally {
      wal.close();
    }
    progress();
    const archiveLastIndex = Math.max(...segments.map((s) => s.range.lastIndex));
    if (stoppedBefore === null) {
      warnings.push(`the archive ends at entry ${archiveLastIndex}${reachedMs > 0 ? ` (stamped ${iso(reachedMs)})` : ""}, before the target: everything archived was replayed`);
    }
    for (const p of chain.partlyRead) {
      // Past its whole entries the replay went on only through another segment that holds the
      // entries after them (an overlap): it stopped before the damage only when it went no further.
      const after = lastIndex <= p.intactLastIndex ? `and the replay stopped at entry ${lastIndex}, before the damage`
        : `and the entries after ${p.intactLastIndex} were read from ${p.continuedIn ?? "another segment"}`;
      warnings.push(`the archived WAL segment ${p.name} is damaged ${p.damage}; its entries up to ${p.intactLastIndex} are whole, ${after}`);
    }
    if (pause !== null) warnings.push(backupPauseResumedText(pause, pauseFromReplay ? "target" : "backup"));

    // Everything checked and written: move the new WAL in, say it is committed, drop the store.
    // From the move-in on, raft/ holds WAL entries and a second run refuses it: a failure here
    // (the disk filling meanwhile) is reported with what was done and what is left.
    const commit = restoreOwn.at(-1)?.index ?? lastIndex;
    commitSteps = [
      `move the new WAL (entries ${meta.index + 1}…${commit}) into ${paths.walDir}`,
      `write ${paths.hardStatePath} (term ${restoreTerm}, entries committed through ${commit})`,
      `write ${join(paths.raftDir, logStartFile)} (the log starts after the snapshot)`,
      `remove ${paths.storePath} (rebuilt from the snapshot and the WAL at svc serve)`,
      `tidy ${paths.raftDir} (its RESTORED mark, the snapshot's .hold, its checkpoint record)`,
    ];
    commitStepsDone = 0;
    ensureDir(paths.walDir);
    for (const s of listSegments(paths.walDir)) fs.rmSync(s.path, { force: true });
    for (const name of fs.readdirSync(tmpDir)) fs.renameSync(join(tmpDir, name), join(paths.walDir, name));
    fsyncDir(paths.walDir);
    fs.rmSync(tmpDir, { recursive: true, force: true });
    commitStepsDone++;
    writeHardState(paths.hardStatePath, { term: restoreTerm, vote: null, commit, clusterId: meta.clusterId });
    commitStepsDone++;
    // This node's log starts over after the snapshot: no member holds the entries before it.
    writeLogStart(paths.raftDir, { index: meta.index, term: meta.term, reason: `wal-replay to ${iso(options.until.atMs)} from ${options.source.location}` });
    commitStepsDone++;
    Store.remove(paths.storePath);
    commitStepsDone++;
    // A full backup's raft/ (SPEC §4.5 from a backup's snapshot) names its snapshot as the log's
    // start; the replayed log now starts there and goes further.
    if (fs.existsSync(restoreMarkerPath(paths.raftDir))) {
      fs.rmSync(restoreMarkerPath(paths.raftDir), { force: true });
      warnings.push("raft/RESTORED (a full backup's mark) was consumed: the replayed log starts at the backup's snapshot");
    }
    // A hold that came with the copy (touch .hold, copy, rm .hold, as SPEC §4.4 step 3 is done by
    // hand) pins no copy here: left, it would keep this snapshot past every cleanup (SPEC §8).
    const hold = join(snapshot.dir, snapshotHoldFile);
    if (fs.existsSync(hold)) {
      fs.rmSync(hold, { force: true });
      warnings.push(`removed ${hold}: it came with the copy of the snapshot, and would have kept it from every cleanup`);
    }
    // A checkpoint record left from the history replaced vouches for nothing in the replayed one
    // (it named a store now removed, at an index the replayed log may not reach).
    fs.rmSync(join(paths.raftDir, "checkpoint"), { force: true });
    fsyncDir(paths.raftDir);
    const durationMs = performance.now() - startedMs;
    return {
      dataDir: options.dataDir,
      archive: options.source.location,
      until: iso(options.until.atMs),
      snapshot: { index: meta.index, term: meta.term, dir: snapshot.dir },
      entries: written,
      firstIndex: written > 0 ? meta.index + 1 : null,
      lastIndex,
      restoreEntries: restoreOwn.map((e) => ({ index: e.index, term: e.term, op: decodeCommand(e.data)?.op ?? "" })),
      reachedAt: reachedMs > 0 ? iso(reachedMs) : null,
      stoppedBefore: stoppedBefore === null ? null : { index: stoppedBefore.index, at: iso(stoppedBefore.timestampMs) },
      archiveLastIndex,
      segmentsRead: chain.segmentsRead,
      skippedDamaged: chain.skippedDamaged,
      durationMs,
      entriesPerSecond: durationMs > 0 ? Math.round((written * 1000) / durationMs) : 0,
      warnings,
    };
  } catch (e) {
    fs.rmSync(tmpDir, { recursive: true, force: true });
    if (isDiskFullError(e) && !(e instanceof SvcError) && commitSteps.length > 0) {
      const done = commitSteps.slice(0, commitStepsDone);
      const [failed, ...left] = commitSteps.slice(commitStepsDone);
      throw new SvcError("DISK_FULL", `wal-replay stopped after the new WAL was moved into ${paths.walDir}: ${errorMessage(e)}`, {
        hint: `done: ${done.join("; ")}; failed: ${failed ?? "syncing the directory"}${left.length > 0 ? `; not done: ${left.join("; ")}` : ""}. ` +
          `A second run refuses ${paths.raftDir} as it is now (it holds WAL entries): free space on the file system of ${options.dataDir}, ` +
          `remove what this run wrote (\`rm -f ${paths.walDir}/* ${paths.hardStatePath}\`; the snapshot and the archive are unchanged), then run wal-replay again`,
        cause: e,
      });
    }
    if (isDiskFullError(e) && !(e instanceof SvcError)) {
      throw new SvcError("DISK_FULL", `wal-replay stopped: ${errorMessage(e)}`, {
        hint: `free space on the file system of ${options.dataDir} (the new WAL is written in full beside raft/wal/, each segment wal.segment_size_mb, before it is moved in), ` +
          "or lower wal.segment_size_mb in the configuration; then run wal-replay again",
        cause: e,
      });
    }
    throw e;
  } finally {
    lock.release();
    giveToDataDirOwner(options.dataDir);
  }
}

/** SPEC §4.5 steps 2–3: raft/ was cleared and a snapshot copied in; nothing else. */
async function checkRaftHoldsOnlyASnapshot(paths: ReturnType<typeof dataPaths>): Promise<SnapshotEntry> {
  const refuse = (what: string): SvcError => new SvcError("WAL_REPLAY_REFUSED", `${paths.raftDir} ${what}`, {
    hint: "wal-replay runs on a stopped node whose raft/ was emptied and given only the snapshot to restore from (SPEC §4.5 steps 1–3): " +
      `remove the contents of ${paths.raftDir} and copy the snapshot directory into ${paths.snapshotsDir}`,
  });
  if (fs.existsSync(paths.hardStatePath)) throw refuse("holds a node's Raft state (raft/hardstate)");
  if (fs.existsSync(removedMarkPath(paths.raftDir))) throw refuse("holds a node's Raft state (raft/REMOVED: a member once told it that it was removed)");
  for (const s of listSegments(paths.walDir)) {
    if (readSegment(s.path).entries.length > 0) throw refuse(`holds WAL entries (${s.path})`);
  }
  const snapshots = new SnapshotStore(paths.snapshotsDir);
  const damaged: string[] = [];
  const latest = await snapshots.latestValid((entry, reason) => damaged.push(`${entry.dir}: ${reason}`));
  if (latest === null || latest.meta === null) {
    throw new SvcError("WAL_REPLAY_REFUSED", `no valid snapshot in ${paths.snapshotsDir}${damaged.length > 0 ? ` (damaged: ${damaged.join("; ")})` : ""}`, {
      hint: misplacedSnapshot(paths) ??
        "copy the latest snapshot directory (raft/snapshots/<term>-<index>/ of a node, or the <term>-<index>/ inside a backup's latest/) into it (SPEC §4.5 step 3)",
    });
  }
  return latest;
}

/**
 * Where a snapshot copied in for SPEC §4.5 step 3 landed beside its place, as the command that
 * moves it there: a backup's latest/ copied whole (its <term>-<index>/ one level down), a
 * snapshot directory under another name, its two files loose in raft/snapshots/, or the
 * directory in raft/ itself. Null when none is found.
 */
function misplacedSnapshot(paths: ReturnType<typeof dataPaths>): string | null {
  const snaps = paths.snapshotsDir;
  const placeOf = (dir: string): string | null => {
    const meta = readSnapshotMeta(dir);
    return meta === null ? null : join(snaps, snapshotDirName(meta.term, meta.index));
  };
  const say = (found: string, command: string): string => `${found}; wal-replay reads a snapshot only as ${snaps}/<term>-<index>/: put it there (${command}) and run wal-replay again`;
  const dirsIn = (dir: string): string[] => {
    try {
      return fs.readdirSync(dir, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name);
    } catch {
      return [];
    }
  };
  if (fs.existsSync(join(snaps, snapshotMetaFile)) && fs.existsSync(join(snaps, snapshotStateFile))) {
    const to = placeOf(snaps);
    if (to !== null) {
      return say(`the snapshot's ${snapshotStateFile} and ${snapshotMetaFile} are loose in ${snaps}`,
        `mkdir ${to} && mv ${join(snaps, snapshotStateFile)} ${join(snaps, snapshotMetaFile)} ${to}/`);
    }
  }
  for (const name of dirsIn(snaps)) {
    if (parseSnapshotDirName(name) !== null) continue;
    const dir = join(snaps, name);
    const to = placeOf(dir);
    if (to !== null) return say(`${dir} holds a snapshot under another name`, `mv ${dir} ${to}`);
    for (const inner of dirsIn(dir)) {
      const innerTo = placeOf(join(dir, inner));
      if (innerTo !== null) return say(`${join(dir, inner)} holds a snapshot one level down (a backup's latest/ copied whole)`, `mv ${join(dir, inner)} ${innerTo}`);
    }
  }
  for (const name of dirsIn(paths.raftDir)) {
    if (name === "snapshots" || name === "wal") continue;
    const dir = join(paths.raftDir, name);
    const to = placeOf(dir);
    if (to !== null) return say(`${dir} holds a snapshot beside ${snaps}`, `mv ${dir} ${to}`);
  }
  return null;
}

/**
 * The target must not lie before the snapshot: the snapshot would already hold writes after
 * it. Known from the archive's copy of the snapshot's last entry; without one, from the time
 * the snapshot was taken.
 */
async function checkTargetAfterSnapshot(options: WalReplayOptions, segments: readonly ArchivedSegment[], snapshot: SnapshotEntry, warnings: string[]): Promise<void> {
  const meta = snapshot.meta;
  if (meta === null) return;
  const holding = segments.filter((s) => s.range.firstIndex <= meta.index && meta.index <= s.range.lastIndex);
  for (const s of holding) {
    const copy = await fetchSegment(options.source, s.name);
    try {
      const check = await checkArchiveFile(s.name, copy.path);
      if (!check.ok) continue;
      refuseOtherCluster(options.source.location, s.name, check.clusterId, { clusterId: meta.clusterId, dir: snapshot.dir });
      let stamped: { index: number; timestampMs: number } | null = null;
      for await (const e of archiveFileEntries(copy.path)) {
        if (e.index > meta.index) break;
        if (e.timestampMs > 0) stamped = { index: e.index, timestampMs: e.timestampMs };
      }
      if (stamped !== null && stamped.timestampMs > options.until.limitMs) {
        throw new SvcError("WAL_REPLAY_REFUSED", `the target ${iso(options.until.atMs)} is before the snapshot ${snapshot.dir}: its entry ${stamped.index} was written at ${iso(stamped.timestampMs)}`, {
          hint: olderSnapshotsHint(snapshot) ?? "restore from an older snapshot (one taken before the target), or choose a later target",
        });
      }
      return;
    } finally {
      copy.release();
    }
  }
  const createdMs = Date.parse(meta.createdAt);
  if (Number.isFinite(createdMs) && createdMs > options.until.limitMs) {
    throw new SvcError("WAL_REPLAY_REFUSED", `the target ${iso(options.until.atMs)} is before the snapshot ${snapshot.dir} was taken (${meta.createdAt}), and the archive does not show that the snapshot holds nothing after the target`, {
      hint: olderSnapshotsHint(snapshot) ?? "restore from a snapshot taken before the target, or choose a later target",
    });
  }
  warnings.push(`the archive does not hold the snapshot's last entry ${meta.index}; the snapshot was taken at ${meta.createdAt}`);
}

/**
 * A target before the newest snapshot when older ones were copied in beside it (SPEC §4.5 step 3
 * with several): wal-replay replays onto the newest one only, so the way out is to move that
 * one out. Null when no older snapshot is there.
 */
function olderSnapshotsHint(snapshot: SnapshotEntry): string | null {
  const snapshotsDir = dirname(snapshot.dir);
  const older = new SnapshotStore(snapshotsDir).list().filter((e) => e.index < snapshot.index && e.meta !== null).map((e) => e.name);
  if (older.length === 0) return null;
  return `${snapshotsDir} also holds ${older.length === 1 ? "an older snapshot" : "older snapshots"} (${older.join(", ")}); wal-replay replays onto the newest one there: ` +
    `move ${snapshot.dir} out of it (and any other snapshot taken after the target) and run wal-replay again, or choose a later target`;
}

/**
 * A segment whose header names a cluster other than the snapshot's holds another cluster's log
 * (two clusters archiving to one location, segments copied from the wrong one): by index and
 * term alone it can pass for this one's, and reaching further than the segment beside it, be
 * read in its place. Segments archived before headers named a cluster cannot be told apart.
 */
function refuseOtherCluster(location: string, name: string, segmentClusterId: string | null, snapshot: { clusterId: string; dir: string }): void {
  if (segmentClusterId === null || snapshot.clusterId === "" || segmentClusterId === snapshot.clusterId) return;
  throw new SvcError("ARCHIVE_CONFLICT", `the archived WAL segment ${name} in ${location} holds the log of cluster ${segmentClusterId}, and the snapshot ${snapshot.dir} is of cluster ${snapshot.clusterId}: ` +
    "the location holds another cluster's segments; nothing was changed", {
    hint: "each segment's header names its cluster (`head -c 200 <segment> | strings`): move the other cluster's segments to another directory and give --wal-dir the archive of the snapshot's cluster, " +
      "or use a snapshot of the cluster that wrote this archive (a cluster made by init-cluster --bootstrap has a new cluster id: its archive goes with its own snapshots, not with the backup's)",
    details: { segment: name, segmentClusterId, snapshotClusterId: snapshot.clusterId },
  });
}

/**
 * The segments' names must fit one log: terms never go down along a log, so of two segments the
 * one that ends at a later entry ends in the same term or a later one, and two that end at the
 * same entry end in the same term. A cluster restored to a point in time writes in terms past
 * every term of the history it replaced; archived into the location of that history, its
 * segments meet the replaced ones here, before anything is read. (The chain below compares
 * overlapping segments where they meet, but a segment of each history ending at the same entry,
 * followed by one starting after it, would meet nowhere: the replay would go on from one history
 * into the other.)
 */
function checkOneHistory(location: string, segments: readonly ArchivedSegment[]): void {
  const byEnd = [...segments].sort((a, b) => a.range.lastIndex - b.range.lastIndex || a.range.term - b.range.term);
  for (let i = 1; i < byEnd.length; i++) {
    const a = byEnd[i - 1];
    const b = byEnd[i];
    if (a === undefined || b === undefined) throw new Error("two neighbouring segments");
    const sameEnd = a.range.lastIndex === b.range.lastIndex;
    if (sameEnd ? a.range.term === b.range.term : a.range.term <= b.range.term) continue;
    const [lowerTerm, higherTerm] = a.range.term < b.range.term ? [a, b] : [b, a];
    throw new SvcError("ARCHIVE_CONFLICT", `the WAL archive ${location} holds two histories: ${sameEnd
      ? `${a.name} and ${b.name} both end at entry ${a.range.lastIndex}, in terms ${a.range.term} and ${b.range.term}`
      : `${a.name} ends at entry ${a.range.lastIndex} in term ${a.range.term}, a later term than ${b.name}, which ends after it in term ${b.range.term}`}`, {
      hint: "the location mixes the archives of two clusters, or of a cluster before and after a point-in-time restore that went on archiving there " +
        `(a cluster restored by wal-replay writes in terms past every term of the history it replaced, so there ${higherTerm.name} would be the later history; ` +
        `one restored from a full backup or made by init-cluster may write in lower terms than ${lowerTerm.name}: which is the one wanted, the times of their entries tell): ` +
        "move the segments of the history not wanted to another directory, and give --wal-dir one history",
      details: { segments: [a.name, b.name] },
    });
  }
}

/**
 * The archive as one contiguous log: for each index the segment that holds it and reaches
 * furthest, intact. Overlaps (a range archived twice across a leader change) must agree;
 * a damaged segment is stepped over only when an intact one holds the same entries.
 */
class ArchiveChain {
  segmentsRead = 0;
  readonly skippedDamaged: string[] = [];
  /** Damaged segments whose entries before the damage were replayed (no intact one held them). */
  readonly partlyRead: { name: string; damage: string; intactLastIndex: number; continuedIn: string | null }[] = [];
  private previous: Entry | null = null;
  /** The segment `previous` came from. */
  private previousSegment: string | null = null;

  constructor(
    private readonly source: ArchiveSource,
    private readonly segments: readonly ArchivedSegment[],
    /** The snapshot replayed onto: a segment of another cluster is refused. */
    private readonly snapshot: { clusterId: string; dir: string },
  ) {}

  /**
   * The entries from `next` on out of one segment, one at a time (their data are views into
   * the segment's bytes); null when the archive ends before `next`.
   */
  async entriesFrom(next: number): Promise<AsyncIterable<Entry> | null> {
    const holding = this.segments
      .filter((s) => s.range.firstIndex <= next && next <= s.range.lastIndex)
      .sort((a, b) => b.range.lastIndex - a.range.lastIndex);
    if (holding.length === 0) {
      const later = this.segments.find((s) => s.range.firstIndex > next);
      if (later === undefined) return null;
      throw new SvcError("ARCHIVE_GAP", `the WAL archive ${this.source.location} has a gap: no segment holds entry ${next}; the next one, ${later.name}, starts at ${later.range.firstIndex}`, {
        hint: `entries ${next}…${later.range.firstIndex - 1} are missing: find the segments holding them (another archive location, a node's raft/wal/), or restore to ${this.targetBefore(next)}`,
        details: { missingFrom: next, missingTo: later.range.firstIndex - 1 },
      });
    }
    let firstDamage: { name: string; offset: number; reason: string } | null = null;
    // The damaged segment whose records before the damage hold `next` and reach furthest.
    // Its copy is kept: the bytes checked are the bytes read. Released here on every way out
    // (a fetch or check that throws included) unless handed to continuing(), which releases it.
    let partial: { segment: ArchivedSegment; copy: LocalCopy; lastIndex: number; clusterId: string | null; damage: string } | null = null;
    try {
      for (const s of holding) {
        const copy = await fetchSegment(this.source, s.name);
        this.segmentsRead++;
        let check;
        try {
          check = await checkArchiveFile(s.name, copy.path);
        } catch (e) {
          copy.release();
          throw e;
        }
        if (!check.ok) {
          firstDamage ??= { name: s.name, offset: check.offset, reason: check.reason };
          const intact = check.intact;
          if (intact !== undefined && intact.lastIndex >= next && intact.lastIndex > (partial?.lastIndex ?? 0)) {
            partial?.copy.release();
            partial = { segment: s, copy, lastIndex: intact.lastIndex, clusterId: intact.clusterId, damage: `at byte offset ${check.offset}: ${check.reason}` };
          } else {
            copy.release();
          }
          continue;
        }
        partial?.copy.release();
        partial = null;
        try {
          refuseOtherCluster(this.source.location, s.name, check.clusterId, this.snapshot);
        } catch (e) {
          copy.release();
          throw e;
        }
        if (firstDamage !== null) this.skippedDamaged.push(`${firstDamage.name} at byte ${firstDamage.offset}: ${firstDamage.reason}`);
        this.noteContinuedIn(s.name, next);
        return this.continuing(s, copy, next);
      }
      if (partial !== null) {
        // The entries before the damage are whole and checked: a target among them is reached
        // without the damaged part (as PostgreSQL replays up to its target and never reads past
        // it). Needing an entry past them is refused at the next call, naming a target that works.
        const p = partial;
        refuseOtherCluster(this.source.location, p.segment.name, p.clusterId, this.snapshot);
        this.noteContinuedIn(p.segment.name, next);
        this.partlyRead.push({ name: p.segment.name, damage: p.damage, intactLastIndex: p.lastIndex, continuedIn: null });
        partial = null;
        return this.continuing(p.segment, p.copy, next, p.lastIndex);
      }
    } finally {
      partial?.copy.release();
    }
    const d = firstDamage;
    if (d === null) throw new Error("a segment was damaged or read");
    throw new SvcError("ARCHIVE_DAMAGED", `the archived WAL segment ${d.name} in ${this.source.location} is damaged at byte offset ${d.offset}: ${d.reason}`, {
      hint: `no other segment holds entry ${next}: find an intact copy of ${d.name}, or restore to ${this.targetBefore(next)}`,
      details: { file: d.name, offset: d.offset },
    });
  }

  /** `name` holds the entries from `next` on: the one read after a damaged segment whose whole entries end before `next`. */
  private noteContinuedIn(name: string, next: number): void {
    const p = this.partlyRead.at(-1);
    if (p !== undefined && p.intactLastIndex === next - 1) p.continuedIn = name;
  }

  /**
   * The targets a replay reaches without entry `next`: it stops at the first entry stamped after
   * the target, so that must be one it holds (the last one read, before `next`).
   */
  private targetBefore(next: number): string {
    const prev = this.previous;
    // Nothing read yet: the snapshot ends at entry next − 1, and every target after the snapshot
    // needs entry next to know where to stop; only an older snapshot reaches a target before it.
    if (prev === null) return `a target before entry ${next} from an older snapshot (every target after this snapshot needs entry ${next} to know where to stop)`;
    if (prev.index !== next - 1 || prev.timestampMs === 0) return `a target before entry ${next}`;
    return `a target before ${new Date(prev.timestampMs).toISOString()} (the time of entry ${prev.index}, the last one held)`;
  }

  /** A checked segment's entries from `next` on; where it overlaps what came before, it must agree. */
  private async *continuing(s: ArchivedSegment, copy: LocalCopy, next: number, throughIndex = s.range.lastIndex): AsyncGenerator<Entry> {
    const prev = this.previous;
    let last: Entry | null = null;
    try {
      for await (const e of archiveFileEntries(copy.path)) {
        if (prev !== null && e.index === prev.index && (e.term !== prev.term || !equalBytes(e.data, prev.data))) {
          throw new SvcError("ARCHIVE_CONFLICT", `the WAL archive ${this.source.location} holds two histories: ${s.name} disagrees at entry ${prev.index} (term ${e.term}) with ${this.previousSegment ?? "the segment before it"} (term ${prev.term})`, {
            hint: "the location mixes the archives of two clusters, or of a cluster before and after a restore that went on archiving there: " +
              "move the segments of the history not wanted (one of these two, and those that continue it) to another directory, and give --wal-dir one history",
          });
        }
        if (e.index < next) continue;
        last = e;
        yield e;
        // A damaged segment's records from the damage on are not checked: never read (their
        // index fields included). Those before it run contiguously up to throughIndex.
        if (e.index === throughIndex) break;
      }
    } finally {
      // Kept past this segment's bytes, to compare with the next segment's overlap.
      if (last !== null) {
        this.previous = { ...last, data: last.data.slice() };
        this.previousSegment = s.name;
      }
      copy.release();
    }
  }
}

async function fetchSegment(source: ArchiveSource, name: string): Promise<LocalCopy> {
  try {
    return await source.fetchArchived(name);
  } catch (e) {
    throw new SvcError("ARCHIVE_UNREADABLE", `cannot read ${name} from ${source.location}: ${errorMessage(e)}`);
  }
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
