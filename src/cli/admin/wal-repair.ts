// wal-repair --skip-corrupted: offline, on a stopped node's data directory (--data-dir, or
// data_dir in --config or in the installed configuration). Rebuilds the WAL
// from every intact record (storage/repair.ts) and a damaged raft/hardstate from the WAL and
// the snapshots; says exactly which indexes were lost, and what that means on a cluster
// member and on a lone node. A directory that is not a svc data directory is refused before
// anything is written; --dry-run writes nothing at all.

import * as fs from "node:fs";
import { defineCommand } from "citty";
import {
  SnapshotStore, dataPaths, formatRanges, giveToDataDirOwner, lockDataDir, lockDataDirIfPresent, markLostLog, readHardState, rebuildHardState, repairWal,
  type RepairReport,
} from "../../storage/index.ts";
import { SvcError, isSvcError } from "../../util/index.ts";
import { defaultConfigPath, offlineDataDir } from "../_config.ts";
import { printJson } from "../_client.ts";
import { CliExit, ExitCode, usageError } from "../_exit.ts";

export const walRepairCommand = defineCommand({
  meta: { name: "wal-repair", description: "Rebuild the WAL from its intact records and say which entries are lost (offline)" },
  args: {
    "skip-corrupted": { type: "boolean", description: "Required for a repair (not for --dry-run): acknowledge that damaged entries (and intact ones after a gap) leave the log" },
    "data-dir": { type: "string", description: "Data directory of the stopped node", valueHint: "DIR" },
    config: { type: "string", description: `Take data_dir from this configuration file (default ${defaultConfigPath()})`, valueHint: "FILE" },
    "dry-run": { type: "boolean", description: "Say what would be done without changing anything" },
    json: { type: "boolean", description: "Print machine-readable JSON" },
  },
  async run({ args }) {
    // The acknowledgement is for removing entries; a dry run removes nothing, so it looks without it.
    if (!args["skip-corrupted"] && args["dry-run"] !== true) {
      throw usageError("wal-repair takes damaged entries out of the log; pass --skip-corrupted to confirm (or --dry-run alone to look first)");
    }
    const dataDir = offlineDataDir({ dataDir: args["data-dir"], config: args.config });
    const dryRun = args["dry-run"] === true;
    let lock;
    try {
      lock = dryRun ? lockDataDirIfPresent(dataDir, "wal-repair --dry-run") : lockDataDir(dataDir, "wal-repair");
    } catch (e) {
      throw e instanceof SvcError ? new CliExit(ExitCode.failure, `${e.message}\n  → stop the node first (systemctl stop svc)`) : e;
    }
    try {
      const paths = dataPaths(dataDir);
      const skipped: string[] = [];
      // A SnapshotStore makes its folder: none is made where there is none to read.
      const latest = fs.existsSync(paths.snapshotsDir)
        ? await new SnapshotStore(paths.snapshotsDir).latestValid((entry, reason) => skipped.push(`${entry.dir}: ${reason}`))
        : null;
      const snapshotIndex = latest?.meta?.index ?? 0;
      const hardState = checkHardState(paths.hardStatePath);
      const report = repairWal(paths.walDir, { dryRun, snapshotIndex });
      let hardStateAside: string | null = null;
      if (hardState !== null && !dryRun) {
        hardStateAside = rebuildHardState(paths.hardStatePath, {
          term: Math.max(report.maxTerm, latest?.meta?.term ?? 0),
          vote: null,
          commit: snapshotIndex,
          clusterId: latest?.meta?.clusterId ?? "",
        });
        markLostLog(paths.raftDir, true);
      }
      if (args.json) return printJson({ ...report, hardStateDamaged: hardState, hardStateAside, skippedSnapshots: skipped });
      const out: string[] = [];
      for (const s of skipped) out.push(`ignored a damaged snapshot: ${s}`);
      if (hardState !== null) {
        out.push(`raft/hardstate is damaged (${hardState}); ${dryRun ? "would be rebuilt" : "rebuilt"} from the WAL and the snapshots` +
          (hardStateAside === null ? "" : ` (the damaged file is kept as ${hardStateAside})`) +
          "; a cluster member does not vote until the leader has caught it up");
      }
      out.push(...describe(report, dryRun));
      process.stdout.write(`${out.join("\n")}\n`);
    } finally {
      lock?.release();
      if (!dryRun) giveToDataDirOwner(dataDir);
    }
  },
});

/** The reason raft/hardstate cannot be read, or null when it is fine (or absent). */
function checkHardState(path: string): string | null {
  try {
    readHardState(path);
    return null;
  } catch (e) {
    if (isSvcError(e, "HARDSTATE_CORRUPT")) return e.message;
    throw e;
  }
}

function describe(report: RepairReport, dryRun: boolean): string[] {
  const out: string[] = [];
  if (report.damage === null && report.lost.length === 0) {
    out.push("no damaged WAL records found; the WAL is left as it is");
    return out;
  }
  for (const d of report.damages) out.push(`damaged record in ${d.file} at byte ${d.offset} (after entry ${d.lastGoodIndex}): ${d.reason}`);
  const would = (done: string, planned: string): string => (dryRun ? planned : done);
  if (report.snapshotIndex > 0) out.push(`the newest valid snapshot covers entries up to ${report.snapshotIndex}`);
  out.push(report.kept === null
    ? `the repaired WAL ${would("starts", "would start")} empty after entry ${report.snapshotIndex}`
    : `the repaired WAL ${would("holds", "would hold")} entries ${report.kept.from}..${report.kept.to}`);
  if (report.lost.length === 0 && report.setAside === null) {
    out.push("no entry is lost: every damaged record is covered by the snapshot or superseded by a later record");
  } else {
    out.push(`LOST on this node: entries ${formatRanges(report.lost)}`);
    if (report.setAside !== null) {
      out.push(`set aside (intact, but after the gap, so not applied): entries ${report.setAside.from}..${report.setAside.to}`);
    }
    out.push("on a member of a multi-node cluster the leader sends them again (the node does not vote until it has them);",
      "on a single-node cluster those writes are gone: the node starts without them and warns at every start until a snapshot covers them");
  }
  if (report.quarantineDir !== null) out.push(`${would("moved", "would move")} the old WAL into ${report.quarantineDir}`);
  if (!dryRun) out.push("start the node");
  return out;
}
