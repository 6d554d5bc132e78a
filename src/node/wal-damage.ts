// Opening the WAL at start when it is not whole. Damage that the newest valid snapshot
// covers loses nothing: it is repaired on the spot (the intact entries after the snapshot are
// kept, the old WAL moved aside) with a warning, instead of stopping the node. Other damage on
// a member of a multi-node cluster is repaired the same way, and what it cuts is taken from the
// leader (SPEC §3.2); a lone node stops with the way out. Entries lost by
// an earlier wal-repair are reported at every start until a snapshot covers them. A WAL that
// ends before the snapshot (cut by an older repair) is continued after the snapshot.

import type { WalOpenResult } from "../storage/index.ts";
import type { StartImages } from "./start-images.ts";
import { clearEntriesLost, formatRanges, highestLostIndex, readEntriesLost, repairWal, type DataPaths } from "../storage/index.ts";
import { isSvcError } from "../util/errors.ts";
import type { Logger } from "../util/logger.ts";

export async function openWalAroundDamage(
  paths: DataPaths, images: StartImages, logger: Logger, open: () => WalOpenResult, memberOfCluster: boolean,
): Promise<WalOpenResult> {
  let result: WalOpenResult;
  try {
    result = open();
  } catch (e) {
    if (!isSvcError(e, "WAL_CORRUPT")) throw e;
    // Damage is dropped at no loss where an image that checks covers it.
    const snapshotIndex = (await images.verified())?.meta?.index ?? 0;
    const plan = repairWal(paths.walDir, { dryRun: true, snapshotIndex });
    if (plan.lost.length > 0 || plan.setAside !== null) {
      // SPEC §3.2, data corruption: a member of a multi-node cluster takes what it lost from the
      // leader (LOST_LOG: it does not vote until it holds it again). A lone node has no one to
      // take it from: it stops, and the operator decides (wal-repair --skip-corrupted).
      if (!memberOfCluster) throw e;
      const done = repairWal(paths.walDir, { dryRun: false, snapshotIndex });
      logger.warn("recovery: the WAL has damaged records; this member keeps the intact entries before the damage and takes the rest from the leader " +
        "(it does not vote until it holds them again)", {
        snapshotIndex,
        damaged: done.damages.map((d) => `${d.file} at byte ${d.offset} (after entry ${d.lastGoodIndex}): ${d.reason}`).join("; "),
        lost: formatRanges(done.lost),
        setAside: done.setAside === null ? "none" : `${done.setAside.from}..${done.setAside.to}`,
        oldWal: done.quarantineDir,
      });
      return open();
    }
    if (snapshotIndex === 0) throw e;
    const done = repairWal(paths.walDir, { dryRun: false, snapshotIndex });
    logger.warn("recovery: the WAL has damaged records that the newest snapshot covers; they were dropped and nothing is lost", {
      snapshotIndex,
      damaged: done.damages.map((d) => `${d.file} at byte ${d.offset} (after entry ${d.lastGoodIndex}): ${d.reason}`).join("; "),
      kept: done.kept === null ? "none" : `${done.kept.from}..${done.kept.to}`,
      oldWal: done.quarantineDir,
    });
    result = open();
  }
  const walLastIndex = result.wal.lastIndex;
  // The log continues after an image only when that image checks.
  const snapshotIndex = walLastIndex > 0 && walLastIndex < (images.current()?.meta?.index ?? 0) ? (await images.verified())?.meta?.index ?? 0 : images.current()?.meta?.index ?? 0;
  if (walLastIndex > 0 && walLastIndex < snapshotIndex) {
    // Nothing after the snapshot is in the log: new entries start right after it.
    logger.warn("recovery: the WAL ends before the newest snapshot; the log continues after the snapshot", { walLastIndex, snapshotIndex });
    result.wal.resetTo(snapshotIndex + 1);
  }
  reportEntriesLost(paths, snapshotIndex, logger);
  return result;
}

function reportEntriesLost(paths: DataPaths, snapshotIndex: number, logger: Logger): void {
  const record = readEntriesLost(paths.raftDir);
  if (record === null) return;
  const highest = highestLostIndex(record);
  if (snapshotIndex >= highest) {
    clearEntriesLost(paths.raftDir);
    logger.info("recovery: the entries lost by wal-repair are now covered by a snapshot", { snapshotIndex, lost: formatRanges(record.lost) });
    return;
  }
  logger.warn("recovery: this node runs with log entries lost by wal-repair", {
    lost: formatRanges(record.lost),
    setAside: record.setAside === null ? "none" : `${record.setAside.from}..${record.setAside.to}`,
    repairedAt: record.atIso,
    oldWal: record.quarantineDir,
    hint: "on a cluster member the leader sends them again (it does not vote until then); on a single-node cluster those writes are gone. " +
      "This warning stops once a snapshot covers them",
  });
}
