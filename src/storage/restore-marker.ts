// raft/RESTORED: what a full backup carries so that a node restored from it (SPEC §4.5,
// "Restore from a full backup") is told apart from a member that merely lost its WAL (SPEC
// §4.6). A member with a snapshot and no WAL has lost entries it may have acknowledged and
// must not vote until the leader gives them back (LOST_LOG); a node restored from a backup
// holds exactly the backup's snapshot, as every other member restored from it does, and
// starts from it as from a complete log. Only the backup writes this file; the node removes
// it once it has made the snapshot its log's start.

import * as fs from "node:fs";
import { join } from "node:path";
import type { Membership } from "../util/log-data.ts";
import { writeFileAtomic } from "../io/durable-file.ts";

export const restoreMarkerFile = "RESTORED";
const restoreMarkerFormat = 1;

export interface RestoreMarker {
  readonly format: number;
  /** The cluster the backup was taken of (its snapshot's cluster id). */
  readonly clusterId: string;
  /** The snapshot of the backup, raft/snapshots/<term>-<index>/: the restored log's start. */
  readonly index: number;
  readonly term: number;
  readonly membership: Membership;
  /** The archive it came from and when that was made (ISO 8601 UTC), for the log. */
  readonly archive: string;
  readonly createdAt: string;
}

export function restoreMarkerPath(raftDir: string): string {
  return join(raftDir, restoreMarkerFile);
}

/** The marker of a restored backup; null when there is none. A damaged one is an error. */
export function readRestoreMarker(raftDir: string): RestoreMarker | null {
  const path = restoreMarkerPath(raftDir);
  let text: string;
  try {
    text = fs.readFileSync(path, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw e;
  }
  const v = JSON.parse(text) as Partial<RestoreMarker>;
  if (
    v.format !== restoreMarkerFormat || typeof v.clusterId !== "string" || !Number.isSafeInteger(v.index) || !Number.isSafeInteger(v.term) ||
    typeof v.membership !== "object" || v.membership === null || !Array.isArray(v.membership.voters)
  ) {
    throw new Error(`${path} is not a restore marker this version reads`);
  }
  return v as RestoreMarker;
}

export function encodeRestoreMarker(m: Omit<RestoreMarker, "format">): string {
  return `${JSON.stringify({ format: restoreMarkerFormat, ...m }, null, 2)}\n`;
}

export function writeRestoreMarker(raftDir: string, m: Omit<RestoreMarker, "format">): void {
  writeFileAtomic(restoreMarkerPath(raftDir), encodeRestoreMarker(m));
}

export function removeRestoreMarker(raftDir: string): void {
  fs.rmSync(restoreMarkerPath(raftDir), { force: true });
}

/**
 * raft/LOG_START: this node's log was started over after a snapshot by a restore from a full
 * backup or by init-cluster --bootstrap. Every member restored so starts there, so no member
 * of the cluster holds the entries before it: WAL archiving goes on from there rather than
 * wait for them (node/wal-archiver.ts). Kept: it says where the restored cluster's history begins.
 */
export const logStartFile = "LOG_START";

export interface LogStart {
  /** The snapshot the log starts after. */
  readonly index: number;
  readonly term: number;
  /** What started it over ("restored from <archive>", "init-cluster --bootstrap"), for the log. */
  readonly reason: string;
  /**
   * init-cluster --bootstrap: the restored snapshot the new cluster id was derived from, so that
   * running it again derives the same id rather than one from its own new snapshot.
   */
  readonly derivedFrom?: { clusterId: string; index: number; term: number; stateSha256: string };
}

export function writeLogStart(raftDir: string, start: LogStart): void {
  writeFileAtomic(join(raftDir, logStartFile), `${JSON.stringify(start)}\n`);
}

/** The record, or null when there is none or it cannot be read (then nothing is assumed). */
export function readLogStart(raftDir: string): LogStart | null {
  try {
    const v = JSON.parse(fs.readFileSync(join(raftDir, logStartFile), "utf8")) as Partial<LogStart>;
    if (!Number.isSafeInteger(v.index) || !Number.isSafeInteger(v.term) || typeof v.reason !== "string") return null;
    return v as LogStart;
  } catch {
    return null;
  }
}
