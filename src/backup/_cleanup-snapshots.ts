// Retention of snapshots (SPEC §8: daily, older than 7 days). Rules:
// - the newest snapshot that verifies (meta.json matches its name, state.db matches its SHA-256)
//   is never removed, whatever its age: the node restarts from it and sends it to followers;
// - any other snapshot directory older than the threshold is removed, valid or damaged; its age
//   is meta.createdAt, else the directory's modification time;
// - incomplete temp directories (`.tmp…`) older than the threshold are removed too, but never
//   one of a process still running (`.tmp-<pid>-…`): the node may be writing a snapshot there,
//   for as long as a large one takes, and a zero threshold must not take it from under it;
// - if snapshots exist but none verifies, none is removed: that is reported as a problem to look
//   at (verify-checksums), not something to tidy away.

import * as fs from "node:fs";
import { basename, join } from "node:path";
import {
  dataPaths, fsyncDir, parseSnapshotDirName, processAlive, readSnapshotMeta, snapshotHeld, snapshotMetaFile, verifySnapshot,
  type SnapshotEntry,
} from "../storage/index.ts";
import { errorMessage } from "../util/errors.ts";
import type { CleanupEntry, CleanupOptions, SnapshotCleanupReport } from "./types.ts";
import { formatDuration } from "./_duration.ts";
import { readDirOrThrow, removePath, treeSizeBytes } from "./_fs.ts";

const TEMP_PREFIX = ".tmp";
/** A snapshot being built or received: `.tmp-<pid>-<ms>-<random>` (storage/snapshots.ts beginTemp). */
const tempPidPattern = /^\.tmp-(\d+)-/;

interface Candidate {
  readonly entry: SnapshotEntry;
  readonly ageMs: number | null;
  /** Why it failed verification; undefined when it verified or was not checked. */
  invalidReason?: string;
}

export async function cleanupSnapshots(dataDir: string, options: CleanupOptions): Promise<SnapshotCleanupReport> {
  readDirOrThrow(dataDir, "data directory"); // a wrong data_dir must fail loudly, not clean nothing
  const dir = dataPaths(dataDir).snapshotsDir;
  const report: SnapshotCleanupReport = {
    dir, dryRun: options.dryRun, olderThanMs: options.olderThanMs,
    removed: [], kept: [], ignored: [], problems: [], newestValid: null,
  };
  if (!fs.existsSync(dir)) return report; // a node that never took a snapshot

  const snapshots: Candidate[] = [];
  const temps: string[] = [];
  for (const dirent of readDirOrThrow(dir, "snapshot directory")) {
    const path = join(dir, dirent.name);
    const parsed = dirent.isDirectory() ? parseSnapshotDirName(dirent.name) : null;
    if (dirent.isDirectory() && dirent.name.startsWith(TEMP_PREFIX)) temps.push(path);
    else if (parsed === null) report.ignored.push(path);
    else {
      const meta = readSnapshotMeta(path);
      const entry: SnapshotEntry = { name: dirent.name, dir: path, ...parsed, meta };
      snapshots.push({ entry, ageMs: ageMs(path, meta?.createdAt, options.nowMs) });
    }
  }

  const newest = await findNewestValid(snapshots);
  const newestValid = newest?.entry.name ?? null;
  Object.assign(report, { newestValid });
  if (newest === null && snapshots.length > 0) {
    report.problems.push({
      code: "NO_VALID_SNAPSHOT", path: dir,
      message: `no snapshot in ${dir} verifies, so none was removed; run \`svc admin verify-checksums\` and look at the node's log`,
    });
  }

  for (const candidate of snapshots.sort((a, b) => a.entry.index - b.entry.index || a.entry.term - b.entry.term)) {
    const path = candidate.entry.dir;
    const sizeBytes = treeSizeBytes(path);
    const keep = (reason: string): void => void report.kept.push({ path, reason, ageMs: candidate.ageMs, sizeBytes });
    if (candidate === newest) keep("newest valid snapshot: the node needs it");
    else if (newest === null) keep("no snapshot verifies");
    else if (!isOlder(candidate.ageMs, options)) keep("not old enough");
    // Being copied (SPEC §4.4 step 3: `.hold`, empty or until an ISO 8601 time): kept whatever its age.
    else if (snapshotHeld(path, options.nowMs)) keep("held (.hold): being copied");
    else {
      const damage = candidate.invalidReason === undefined ? "" : `; damaged: ${candidate.invalidReason}`;
      remove({ path, reason: `snapshot older than ${formatDuration(options.olderThanMs)}${damage}`, ageMs: candidate.ageMs, sizeBytes }, report, options);
    }
  }

  for (const path of temps) {
    const tempAgeMs = ageMs(path, undefined, options.nowMs);
    const sizeBytes = treeSizeBytes(path);
    const pid = Number(tempPidPattern.exec(basename(path))?.[1] ?? Number.NaN);
    if (Number.isSafeInteger(pid) && processAlive(pid)) {
      report.kept.push({ path, reason: `incomplete snapshot of a running process (pid ${pid}), possibly being written`, ageMs: tempAgeMs, sizeBytes });
    } else if (isOlder(tempAgeMs, options)) {
      remove({ path, reason: `incomplete snapshot older than ${formatDuration(options.olderThanMs)}`, ageMs: tempAgeMs, sizeBytes }, report, options);
    } else {
      report.kept.push({ path, reason: "incomplete snapshot, possibly being written", ageMs: tempAgeMs, sizeBytes });
    }
  }

  if (!options.dryRun && report.removed.length > 0) fsyncDir(dir);
  return report;
}

/** Checks newest first and stops at the first that verifies: older ones need no hashing. */
async function findNewestValid(snapshots: Candidate[]): Promise<Candidate | null> {
  const newestFirst = [...snapshots].sort((a, b) => b.entry.index - a.entry.index || b.entry.term - a.entry.term);
  for (const candidate of newestFirst) {
    // The running node may prune a snapshot while it is being hashed: then it is simply gone.
    const check = await verifySnapshot(candidate.entry).catch((e: unknown) => ({ ok: false as const, reason: errorMessage(e) }));
    if (check.ok) return candidate;
    candidate.invalidReason = check.reason;
  }
  return null;
}

/** Removes meta.json first, so that an interrupted removal leaves an incomplete snapshot, never a wrong one. */
function remove(entry: CleanupEntry, report: SnapshotCleanupReport, options: CleanupOptions): void {
  if (!options.dryRun) {
    if (!removePath(join(entry.path, snapshotMetaFile), report, { missingOk: true })) return;
    if (!removePath(entry.path, report)) return;
  }
  report.removed.push(entry);
}

function isOlder(ageMs: number | null, options: CleanupOptions): boolean {
  return ageMs !== null && ageMs > options.olderThanMs;
}

function ageMs(path: string, createdAt: string | undefined, nowMs: number): number | null {
  const createdMs = createdAt === undefined ? Number.NaN : Date.parse(createdAt);
  if (Number.isFinite(createdMs)) return Math.round(nowMs - createdMs);
  const stat = fs.lstatSync(path, { throwIfNoEntry: false });
  return stat === undefined ? null : Math.round(nowMs - stat.mtimeMs);
}
