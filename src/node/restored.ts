// A node restored from a full backup (SPEC §4.5): raft/RESTORED names the backup's snapshot.
// Before the state is loaded, the snapshot becomes the start of this node's log: a WAL after it
// and a hard state committed up to it, in the backup's term, with no vote. The backup was taken
// while writes were paused: the log then starts with resume_writes, committed, made of the
// marker alone (same index, term, time and command on every member). Every member restored from
// the same backup starts from the same log and they elect a leader among themselves. Without
// the marker, a member with a snapshot and no WAL is one that lost entries (SPEC §4.6) and keeps
// the LOST_LOG protection.

import * as fs from "node:fs";
import { join } from "node:path";
import type { Config } from "../config/index.ts";
import { fsyncDir, fsyncPath } from "../io/durable-file.ts";
import { sha256File } from "../io/file-hash.ts";
import { readHardState, writeHardState } from "../storage/hardstate.ts";
import type { DataPaths } from "../storage/paths.ts";
import { logStartFile, readRestoreMarker, removeRestoreMarker, writeLogStart, type RestoreMarker } from "../storage/restore-marker.ts";
import { SnapshotStore, readSnapshotMeta, snapshotDirName, snapshotStateFile, verifySnapshot } from "../storage/snapshots.ts";
import { Wal, listSegments } from "../storage/wal.ts";
import { backupPauseResumedText, imageWritesPause, restoreEntry } from "../store/index.ts";
import { SvcError } from "../util/errors.ts";
import type { Logger } from "../util/logger.ts";

/**
 * A backup's raft/ or store/ copied into the node's raft/ or store/ rather than over them
 * (`cp -r /tmp/r/raft /var/lib/svc/raft` with raft/ there makes raft/raft/): the node would
 * start on the state the restore was to replace, and serve it without a word. svc makes no
 * directory of those names, so one is always such a copy; the node refuses to start.
 */
export function refuseNestedBackupCopy(paths: DataPaths): void {
  const nestedRaft = join(paths.raftDir, "raft");
  const nestedStore = join(paths.storeDir, "store");
  const found: string[] = [];
  if (["RESTORED", "snapshots", "wal", "hardstate"].some((n) => fs.existsSync(join(nestedRaft, n)))) found.push(nestedRaft);
  if (fs.existsSync(join(nestedStore, "state.db")) || (found.length > 0 && fs.existsSync(nestedStore))) found.push(nestedStore);
  if (found.length === 0) return;
  throw new SvcError("RESTORE_REFUSED", `${found.join(" and ")} ${found.length === 1 ? "holds" : "hold"} a backup's copy, made one level too deep ` +
    `(copied into ${found.map((f) => join(f, "..")).join(" and ")} rather than into ${paths.dataDir}): started, this node would serve the data the restore was to replace; nothing was changed`, {
    hint: `copy the extracted raft and store into the data directory itself, as SPEC §4.5 step 3 does (cp -r /tmp/r/raft /tmp/r/store ${paths.dataDir}/; ` +
      `a backup made by hand, into emptied raft/ and store/), remove ${found.join(" and ")}, and start the node`,
  });
}

/** Adopt a restored backup's snapshot as the log's start; the marker, or null when there is none. */
export async function adoptRestoredBackup(paths: DataPaths, config: Config, logger: Logger): Promise<RestoreMarker | null> {
  refuseNestedBackupCopy(paths);
  let marker: RestoreMarker | null;
  try {
    marker = readRestoreMarker(paths.raftDir);
  } catch (e) {
    throw new SvcError("RESTORE_REFUSED", `raft/RESTORED cannot be read: ${(e as Error).message}`, {
      hint: "extract raft/ from the backup archive again, or remove raft/RESTORED if this node is not being restored",
    });
  }
  if (marker === null) return null;
  const snapshotDir = join(paths.snapshotsDir, snapshotDirName(marker.term, marker.index));
  const meta = readSnapshotMeta(snapshotDir);
  if (meta === null || meta.clusterId !== marker.clusterId) {
    throw new SvcError("RESTORE_REFUSED", `raft/RESTORED names the snapshot ${snapshotDir}, which is missing or of another cluster`, {
      hint: "copy raft/snapshots/ from the same backup archive as raft/RESTORED",
    });
  }
  // The backup's pause ends with the backup: the restored log resumes it, identically on every
  // member (the time is the marker's, not this node's clock), in the term after the backup's,
  // so that no entry of the history the backup was taken from has its index and term.
  const pause = imageWritesPause(join(snapshotDir, snapshotStateFile));
  const start = pause === null ? { term: marker.term, commit: marker.index } : { term: marker.term + 1, commit: marker.index + 1 };
  const hardState = readHardState(paths.hardStatePath);
  // Already adopted when the hard state is the one adoption writes (a crash before the marker went).
  const adopted = hardState !== null && hardState.term === start.term && hardState.commit === start.commit &&
    hardState.vote === null && hardState.clusterId === marker.clusterId;
  if (!adopted) {
    const check = await verifySnapshot({ name: snapshotDirName(marker.term, marker.index), dir: snapshotDir, term: marker.term, index: marker.index, meta });
    if (!check.ok) {
      throw new SvcError("RESTORE_REFUSED", `the backup's snapshot ${snapshotDir} is damaged: ${check.reason}; nothing was changed`, {
        hint: "check the archive with `svc admin backup verify <archive>`, then extract raft/ and store/ again from a sound one",
      });
    }
    setAsidePriorState(paths, marker, logger);
    await keepOnlyTheBackupsStore(paths, join(snapshotDir, snapshotStateFile), meta.stateSha256, logger);
    const createdMs = Date.parse(marker.createdAt);
    const resume = pause === null ? [] : [restoreEntry({ op: "resume_writes" }, start.commit, start.term, Number.isFinite(createdMs) ? createdMs : 0)];
    const { wal } = Wal.open(paths.walDir, { segmentSizeBytes: config.wal.segmentSizeBytes, logger });
    wal.resetTo(marker.index + 1);
    wal.append(resume);
    wal.sync();
    wal.close();
    fs.rmSync(join(paths.raftDir, "checkpoint"), { force: true });
    writeHardState(paths.hardStatePath, { term: start.term, vote: null, commit: start.commit, clusterId: marker.clusterId });
    if (pause !== null) logger.warn(`recovery: ${backupPauseResumedText(pause, "backup")}`, { archive: marker.archive, index: marker.index + 1 });
  }
  writeLogStart(paths.raftDir, { index: marker.index, term: marker.term, reason: `restored from ${marker.archive}` });
  removeRestoreMarker(paths.raftDir);
  fsyncDir(paths.raftDir);
  logger.info("recovery: restored from a backup; its snapshot starts this node's log", {
    archive: marker.archive, index: marker.index, term: marker.term, clusterId: marker.clusterId,
  });
  return marker;
}

/**
 * SPEC §4.5 copies the backup's raft/ over the node's own: the WAL and hard state of the log
 * being replaced are moved to raft/pre-restore-<time>/ (kept, never replayed), so that the
 * restored snapshot is the whole log.
 */
function setAsidePriorState(paths: DataPaths, marker: RestoreMarker, logger: Logger): void {
  const names = ["wal", "hardstate", "checkpoint", "LOST_LOG", "ENTRIES_LOST", "REMOVED", logStartFile].filter((n) => {
    const p = join(paths.raftDir, n);
    return n === "wal" ? listSegments(p).length > 0 : fs.existsSync(p);
  });
  // Snapshots the node made after the backup's (copied over, they stay beside it) are of the
  // history being replaced: loaded as the newest, they would undo the restore.
  const later = new SnapshotStore(paths.snapshotsDir).list()
    .filter((e) => e.index > marker.index || (e.index === marker.index && e.term !== marker.term));
  if (names.length === 0 && later.length === 0) return;
  const aside = join(paths.raftDir, `pre-restore-${new Date().toISOString().replace(/[:.]/g, "")}`);
  fs.mkdirSync(aside, { recursive: true });
  for (const n of names) fs.renameSync(join(paths.raftDir, n), join(aside, n));
  if (later.length > 0) {
    fs.mkdirSync(join(aside, "snapshots"));
    for (const e of later) fs.renameSync(e.dir, join(aside, "snapshots", e.name));
    fsyncDir(paths.snapshotsDir);
  }
  fs.mkdirSync(paths.walDir, { recursive: true });
  fsyncDir(paths.raftDir);
  logger.warn("recovery: restoring a backup over this node's own Raft state; that state is kept aside, not used", {
    dir: aside, moved: [...names, ...later.map((e) => `snapshots/${e.name}`)],
  });
}

/**
 * The store must be the backup's (store/state.db of the archive is its snapshot's image, byte
 * for byte) or none, rebuilt from the snapshot: a store left from before the restore holds
 * newer writes, and an old SQLite WAL beside a restored file would be replayed into it.
 */
async function keepOnlyTheBackupsStore(paths: DataPaths, imagePath: string, stateSha256: string, logger: Logger): Promise<void> {
  for (const suffix of ["-wal", "-shm", "-boot"]) fs.rmSync(`${paths.storePath}${suffix}`, { force: true });
  for (const name of fs.existsSync(paths.storeDir) ? fs.readdirSync(paths.storeDir) : []) {
    if (name.includes(".staged-")) fs.rmSync(join(paths.storeDir, name), { force: true });
  }
  const store = fs.statSync(paths.storePath, { throwIfNoEntry: false });
  const image = fs.statSync(imagePath, { throwIfNoEntry: false });
  if (store !== undefined && image !== undefined && store.ino === image.ino && store.dev === image.dev) {
    // Extracted from the archive as a hard link to the image: the store gets its own copy, or
    // every write to it would change the image too.
    const copy = `${paths.storePath}.restoring`;
    fs.copyFileSync(imagePath, copy);
    fsyncPath(copy);
    fs.renameSync(copy, paths.storePath);
    fsyncDir(paths.storeDir);
    return;
  }
  if (store !== undefined && (await sha256File(paths.storePath)) !== stateSha256) {
    logger.warn("recovery: store/state.db is not the backup's; it is rebuilt from the restored snapshot", { path: paths.storePath });
    fs.rmSync(paths.storePath, { force: true });
  }
}
