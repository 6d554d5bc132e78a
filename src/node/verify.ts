// verify-checksums: every WAL record's CRC, every snapshot's SHA-256, and the store's
// SQLite integrity check. Each finding names the file and, for the WAL, the offset and
// the entry index after which the damage lies.

import * as fs from "node:fs";
import { join } from "node:path";
import {
  checkpointPath, readMemberMark, formatRanges, inspectCheckpoint, inspectRemovedMark, listSegments, removedMarkPath, readEntriesLost, readHardState, readSegment, repairWal, segmentNameMismatch, SnapshotStore, verifySnapshot, type DataPaths,
} from "../storage/index.ts";
import { judgeCheckpoint } from "./checkpoint-trust.ts";
import { silentLogger } from "../util/logger.ts";
import { Store, damagedStoreFix, isStoreDamage, markStoreDamaged } from "../store/index.ts";
import { errorMessage, isSvcError, SvcError } from "../util/errors.ts";

export interface VerifyFinding {
  target: string;
  ok: boolean;
  detail: string;
}

export async function verifyDataDir(paths: DataPaths, options: { store?: Store; skipWal?: boolean } = {}): Promise<VerifyFinding[]> {
  const findings: VerifyFinding[] = [];
  if (options.skipWal !== true) findings.push(...verifyWal(paths.walDir));
  findings.push(verifyHardState(paths.hardStatePath, paths.walDir));
  // Read only: a SnapshotStore would make the folder where there is none.
  const snapshots = fs.existsSync(paths.snapshotsDir) ? new SnapshotStore(paths.snapshotsDir).list() : [];
  if (snapshots.length === 0) findings.push({ target: paths.snapshotsDir, ok: true, detail: "no snapshots" });
  let newestValidIndex = 0;
  for (const entry of snapshots) {
    const check = await verifySnapshot(entry);
    if (check.ok) newestValidIndex = Math.max(newestValidIndex, entry.meta?.index ?? entry.index);
    findings.push({ target: entry.dir, ok: check.ok, detail: check.ok ? `snapshot index ${entry.index} term ${entry.term}: sha256 ok` : `${check.reason}; ${damagedImageWayOut}` });
  }
  if (options.skipWal !== true) findings.push(...verifyLogContinuity(paths, newestValidIndex));
  const store = verifyStore(paths.storePath, options.store);
  findings.push(verifyCheckpoint(paths, newestValidIndex, store.appliedIndex));
  if (options.skipWal !== true) {
    const held = verifyCommittedHeld(paths, newestValidIndex, store);
    if (held !== null) findings.push(held);
  }
  const removed = verifyRemovedMark(paths);
  if (removed !== null) findings.push(removed);
  const member = verifyMemberMark(paths);
  if (member !== null) findings.push(member);
  findings.push(store.finding);
  return findings;
}

/** The cluster ids svc makes (bootstrap.ts): MEMBER holds one, or nothing else it wrote. */
const clusterIdForm = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * <data_dir>/MEMBER, when present: a cluster id. It tells a node whose raft/ and store/ were
 * removed that it was a member; a start rewrites it from raft/hardstate, so one that differs
 * (an init-cluster or restore since the last start) is not damage, one that is no cluster id is.
 */
function verifyMemberMark(paths: DataPaths): VerifyFinding | null {
  const target = join(paths.dataDir, "MEMBER");
  const mark = readMemberMark(paths.dataDir);
  if (mark === null) return null;
  if (!clusterIdForm.test(mark)) {
    return {
      target, ok: false,
      detail: `damaged: it holds ${JSON.stringify(mark.slice(0, 40))}, not a cluster id; the next start rewrites it from raft/hardstate. ` +
        "If raft/ is gone too, write the cluster id into it (`svc admin cluster-info` on a member shows it), or remove it to start this node as a new one",
    };
  }
  let raftCluster = "";
  try {
    raftCluster = readHardState(paths.hardStatePath)?.clusterId ?? "";
  } catch {
    // reported by the hard state's own finding
  }
  if (raftCluster !== "" && raftCluster !== mark) {
    return { target, ok: true, detail: `cluster ${mark}, while raft/hardstate names ${raftCluster} (an init-cluster or restore since the last start): the next start rewrites it` };
  }
  return { target, ok: true, detail: `cluster ${mark}` };
}

/**
 * What raft/hardstate and raft/checkpoint say was committed, against what the WAL, the newest
 * valid snapshot and the store still hold: past all of them, committed entries are gone from
 * this node (a removed WAL segment, a store removed with its WAL). A start refuses that on a
 * lone node (LOG_GAP); a cluster member fetches them from the leader. null: nothing to say
 * beyond the other findings (all is held, or wal-repair recorded the loss).
 */
function verifyCommittedHeld(paths: DataPaths, snapshotIndex: number, store: { appliedIndex: number; voters: number | null }): VerifyFinding | null {
  const storeAppliedIndex = store.appliedIndex;
  let commit = 0;
  try {
    commit = readHardState(paths.hardStatePath)?.commit ?? 0;
  } catch {
    return null; // reported by the hard state's own finding
  }
  const checkpoint = inspectCheckpoint(paths.raftDir);
  const checkpointed = checkpoint.kind === "ok" ? checkpoint.checkpoint.index : 0;
  // A member's saved commit may cover entries of the Ready whose sync a crash cut (the hard
  // state is saved first): only a lone voter's vouches for its WAL (as a start judges it,
  // load.ts lostCommittedEntries). The checkpoint vouches on any node.
  const lone = store.voters === 1;
  const committed = lone ? Math.max(commit, checkpointed) : checkpointed;
  let walLastIndex = 0;
  try {
    // The newest segment that holds an entry (a segment just begun holds none).
    for (const segment of listSegments(paths.walDir).reverse()) {
      walLastIndex = readSegment(segment.path).entries.at(-1)?.index ?? 0;
      if (walLastIndex > 0) break;
    }
  } catch {
    return null; // reported by the WAL's own findings
  }
  const heldThrough = Math.max(walLastIndex, snapshotIndex, storeAppliedIndex);
  if (committed <= heldThrough || readEntriesLost(paths.raftDir) !== null) return null;
  const missing = heldThrough + 1 === committed ? `entry ${committed} is` : `entries ${heldThrough + 1}..${committed} are`;
  return {
    target: paths.raftDir, ok: false,
    detail: `committed through ${committed} (raft/hardstate commits ${commit}, raft/checkpoint ${checkpointed}), but the WAL ends at ${walLastIndex}, ` +
      `the newest valid snapshot at ${snapshotIndex} and the store at ${storeAppliedIndex}: ${missing} missing on this node (WAL segments removed, or the store removed with them). ` +
      "A member of a multi-node cluster fetches them from the leader at its next start; a lone node refuses to start (LOG_GAP): " +
      "put the missing WAL segments back, or restore from a backup (SPEC §4.5)",
  };
}

/**
 * raft/checkpoint: its CRC, and that something else (the hard state's commit, the WAL, a valid
 * snapshot) reaches its index: the store was applied up to it, so the WAL held it.
 */
function verifyCheckpoint(paths: DataPaths, snapshotIndex: number, storeAppliedIndex: number): VerifyFinding {
  const target = checkpointPath(paths.raftDir);
  const read = inspectCheckpoint(paths.raftDir);
  if (read.kind === "none") return { target, ok: true, detail: "absent (no checkpoint yet)" };
  if (read.kind === "damaged") {
    return {
      target, ok: false,
      detail: `damaged: ${read.reason}; a start ignores it (the WAL and raft/hardstate vouch for the store) and the next checkpoint rewrites it; to clear this now, move it aside`,
    };
  }
  let commit = 0;
  try {
    commit = readHardState(paths.hardStatePath)?.commit ?? 0;
  } catch {
    // reported by the hard state's own finding
  }
  const cp = read.checkpoint;
  const crc = read.checksummed ? "crc ok" : "no crc (written by an older version; the next checkpoint adds one)";
  const reach = judgeCheckpoint(paths, { commit, snapshotIndex: Math.max(snapshotIndex, storeAppliedIndex) }, silentLogger).beyondRaft;
  if (reach === null) return { target, ok: true, detail: `${crc}: index ${cp.index}, term ${cp.term}` };
  const heldThrough = Math.max(reach.commit, reach.walLastIndex, reach.snapshotIndex);
  return {
    target, ok: false,
    detail: `${crc}, but its index ${cp.index} lies past all raft/ holds (raft/hardstate commits ${reach.commit}, the WAL ends at ${reach.walLastIndex}, ` +
      `the newest valid snapshot is at ${reach.snapshotIndex}): the file is damaged, or entries ${heldThrough + 1}..${cp.index} were lost ` +
      `(unless the store still holds them after its WAL was emptied). If no WAL segment was removed and store/ was not replaced, move ${target} aside; ` +
      "otherwise put the missing WAL segments back or restore from a backup",
  };
}

/** raft/REMOVED, when present: its CRC (a member told this node it was removed from the cluster). */
function verifyRemovedMark(paths: DataPaths): VerifyFinding | null {
  const target = removedMarkPath(paths.raftDir);
  const read = inspectRemovedMark(paths.raftDir);
  if (read.kind === "none") return null;
  if (read.kind === "damaged") {
    return { target, ok: false, detail: `damaged: ${read.reason}; a start ignores it (a member tells a removed node again); to clear this now, move it aside` };
  }
  const { mark } = read;
  return {
    target, ok: true,
    detail: `crc ok: member ${mark.by} said the configuration committed at index ${mark.configIndex} leaves this node out (it was removed from the cluster: stop it, or add it back with \`svc admin add-node\` on an empty data directory)`,
  };
}

function verifyHardState(path: string, walDir: string): VerifyFinding {
  try {
    const state = readHardState(path);
    if (state === null) {
      // Beyond a new cluster's first two entries, the WAL is a joined member's log: its hard state is lost.
      const newest = listSegments(walDir).at(-1);
      let last = newest?.firstIndex ?? 0;
      if (newest !== undefined) {
        try {
          last = Math.max(last, readSegment(newest.path).entries.at(-1)?.index ?? 0);
        } catch {
          // reported by the WAL's own finding
        }
      }
      if (last > 2) {
        return {
          target: path, ok: false,
          detail: `absent, but the WAL holds a cluster's log (through entry ${last}): the term and the votes this node cast are lost. ` +
            "If it was moved away, put it back; otherwise the node holds its vote until a leader has caught it up, and writes it again at its next election",
        };
      }
      return { target: path, ok: true, detail: "absent (this node has not joined a cluster yet)" };
    }
    return { target: path, ok: true, detail: `crc ok: term ${state.term}, commit ${state.commit}` };
  } catch (e) {
    const hint = e instanceof SvcError && e.hint !== undefined ? `; ${e.hint}` : "";
    return { target: path, ok: false, detail: `${errorMessage(e)}${hint}` };
  }
}

export function verifyWal(walDir: string): VerifyFinding[] {
  const segments = listSegments(walDir);
  if (segments.length === 0) return [{ target: walDir, ok: true, detail: "no WAL segments" }];
  return segments.map((segment, i) => {
    try {
      const scan = readSegment(segment.path);
      const first = scan.entries[0]?.index ?? 0;
      const last = scan.entries.at(-1)?.index ?? 0;
      const mismatch = segmentNameMismatch(segment, scan.header);
      if (mismatch !== null) {
        return { target: segment.path, ok: false, detail: `not a segment of this WAL: ${mismatch}; move it out of ${walDir} before the node starts` };
      }
      if (scan.damage === null) {
        return { target: segment.path, ok: true, detail: `${scan.entries.length} records ok (entries ${first}..${last})` };
      }
      const torn = i === segments.length - 1 && !scan.damage.validRecordAfter;
      return {
        target: segment.path,
        ok: false,
        detail: `${torn ? "torn tail" : "corrupt record"} at byte offset ${scan.damage.offset} after entry ${scan.damage.afterIndex}: ${scan.damage.reason}` +
          (torn ? " (cut on the next start)" : "; run `svc admin wal-repair --skip-corrupted` or rebuild the node"),
      };
    } catch (e) {
      return { target: segment.path, ok: false, detail: `unreadable: ${errorMessage(e)}` };
    }
  });
}

/**
 * Every record may be sound and the log still unusable: entries missing between the newest
 * valid snapshot and the rest of the WAL. Also reports entries an earlier wal-repair lost.
 */
function verifyLogContinuity(paths: DataPaths, snapshotIndex: number): VerifyFinding[] {
  const findings: VerifyFinding[] = [];
  try {
    const plan = repairWal(paths.walDir, { dryRun: true, snapshotIndex });
    findings.push(plan.lost.length === 0
      ? { target: paths.walDir, ok: true, detail: `the log continues from the newest valid snapshot (index ${snapshotIndex})` }
      : {
        target: paths.walDir,
        ok: false,
        detail: `the log misses entries ${formatRanges(plan.lost)} after the newest valid snapshot (index ${snapshotIndex})` +
          (plan.setAside === null ? "" : `; entries ${plan.setAside.from}..${plan.setAside.to} after the gap cannot be applied`) +
          "; run `svc admin wal-repair --skip-corrupted --dry-run` to see what a repair keeps",
      });
    // Sound records the log cannot hold (a stale copy of an entry): found by replaying, not per record.
    for (const d of plan.damages.filter((x) => x.staleCopy === true)) {
      findings.push({ target: d.file, ok: false, detail: `${d.reason} at byte offset ${d.offset}, after entry ${d.lastGoodIndex}; run \`svc admin wal-repair --skip-corrupted\` (it removes only the copy)` });
    }
  } catch (e) {
    findings.push({ target: paths.walDir, ok: false, detail: `unreadable: ${errorMessage(e)}` });
  }
  const lost = readEntriesLost(paths.raftDir);
  if (lost !== null) {
    findings.push({
      target: paths.raftDir,
      ok: true,
      detail: `wal-repair lost entries ${formatRanges(lost.lost)} on this node at ${lost.atIso} (known, not damage: reported until a snapshot covers them)`,
    });
  }
  return findings;
}

/**
 * The store's finding, the index it applied through (0 when there is none or it cannot be
 * read) and the voters of its membership (null when unknown).
 */
function verifyStore(storePath: string, open: Store | undefined): { finding: VerifyFinding; appliedIndex: number; voters: number | null } {
  if (open === undefined && !fs.existsSync(storePath)) return { finding: { target: storePath, ok: true, detail: "no store yet (rebuilt on start)" }, appliedIndex: 0, voters: null };
  let store = open;
  try {
    // Reported, not set aside: the node does that at its start.
    store ??= Store.open(storePath, { check: false, setAsideDamaged: false });
    const appliedIndex = store.meta.appliedIndex;
    const voters = store.meta.membership.voters.length === 0 ? null : store.meta.membership.voters.length;
    const problems = store.integrityProblems("integrity_check");
    if (problems.length === 0) return { finding: { target: storePath, ok: true, detail: `integrity ok, applied index ${appliedIndex}` }, appliedIndex, voters };
    return { finding: damagedStore(storePath, `integrity check failed: ${problems.slice(0, 5).join("; ")}`), appliedIndex: 0, voters: null };
  } catch (e) {
    if (isSvcError(e, "STORE_DAMAGED") || isStoreDamage(e)) return { finding: damagedStore(storePath, errorMessage(e)), appliedIndex: 0, voters: null };
    return { finding: { target: storePath, ok: false, detail: errorMessage(e) }, appliedIndex: 0, voters: null };
  } finally {
    if (open === undefined) store?.close();
  }
}

/** A damaged image is never used (a rebuild, a follower, a backup hash it first): the way out is a new one. */
const damagedImageWayOut = "the node does not use it: take a new image with `svc admin snapshot` (POST /admin/snapshot) while the node runs; " +
  "a rebuild meanwhile uses an older image that checks";

/**
 * A damaged store, with the way out. The store is marked, so that the node's next start sets it
 * aside and rebuilds it even where its own check at start would not read the damaged pages.
 */
function damagedStore(storePath: string, why: string): VerifyFinding {
  markStoreDamaged(storePath, why);
  return { target: storePath, ok: false, detail: `${why}; to repair: ${damagedStoreFix(storePath)}` };
}
