// `svc admin wal-replay --wal-dir DIR|s3://… --until <ISO 8601>`: point-in-time restore, SPEC
// §4.5 step 4, offline, on the stopped node whose raft/ holds only the snapshot to restore
// from (--data-dir, or data_dir in --config or in the installed configuration; a directory
// that is not a svc data directory is refused before anything is written). Progress on a
// terminal, a one-line summary, --json for scripts; exit 0 only when the replay was written.

import { defineCommand } from "citty";
import { openArchiveSource, parseReplayTarget, replayWalArchive, type ReplayProgress, type ReplayTarget, type WalReplayReport } from "../../backup/index.ts";
import { isSvcError, silentLogger } from "../../util/index.ts";
import { defaultConfigPath, loadConfigOrExit, offlineDataDir } from "../_config.ts";
import { printJson } from "../_client.ts";
import { usageError } from "../_exit.ts";
import { checkedLocation } from "../_location.ts";

export const walReplayCommand = defineCommand({
  meta: { name: "wal-replay", description: "Replay archived WAL up to a point in time onto a node holding only a snapshot (offline, SPEC §4.5)" },
  args: {
    "wal-dir": { type: "string", description: "Where the archived segments are: a directory, or s3://bucket/prefix", valueHint: "DIR|URL" },
    until: { type: "string", description: "Replay every entry stamped at or before this time: ISO 8601 with a zone, e.g. 2026-11-22T21:30:00Z", valueHint: "TIME" },
    "data-dir": { type: "string", description: "Data directory of the stopped node", valueHint: "DIR" },
    config: { type: "string", description: `Take data_dir (and wal.segment_size_mb) from this configuration file (default ${defaultConfigPath()})`, valueHint: "FILE" },
    json: { type: "boolean", description: "Print machine-readable JSON" },
  },
  async run({ args }) {
    const walDir = args["wal-dir"];
    if (walDir === undefined || walDir === "") throw usageError("--wal-dir DIR (or s3://bucket/prefix) is required: where archive_command put the segments");
    checkedLocation(walDir, "--wal-dir");
    if (args.until === undefined || args.until === "") throw usageError("--until TIME is required, e.g. --until 2026-11-22T21:30:00Z");
    const until = untilArg(args.until);
    const dataDir = offlineDataDir({ dataDir: args["data-dir"], config: args.config });
    // The new WAL's segment size comes from the file data_dir came from (none with --data-dir).
    const given = (v: string | undefined): v is string => v !== undefined && v !== "";
    const configPath = given(args.config) ? args.config : given(args["data-dir"]) ? undefined : defaultConfigPath();
    const segmentSizeBytes = loadConfigOrExit(configPath).wal.segmentSizeBytes;
    const onTerminal = process.stderr.isTTY === true && args.json !== true;
    const report = await replayWalArchive({
      dataDir, source: openArchiveSource(walDir), until, segmentSizeBytes, logger: silentLogger,
      ...(onTerminal ? { onProgress: showProgress } : {}),
    });
    if (onTerminal) process.stderr.write("\n");
    if (args.json) return printJson(report);
    for (const w of report.warnings) process.stderr.write(`svc: warning: ${w}\n`);
    for (const d of report.skippedDamaged) process.stderr.write(`svc: warning: skipped a damaged segment another one holds intact: ${d}\n`);
    process.stdout.write(`${summary(report)}\n`);
  },
});

/** --until as a time; one that is none is a wrong command line (exit 2), like a missing one. */
function untilArg(text: string): ReplayTarget {
  try {
    return parseReplayTarget(text);
  } catch (e) {
    throw isSvcError(e, "WAL_REPLAY_REFUSED") ? usageError(e.describe()) : e;
  }
}

function showProgress(p: ReplayProgress): void {
  const rate = p.elapsedMs > 0 ? Math.round((p.entries * 1000) / p.elapsedMs) : 0;
  const reached = p.reachedMs > 0 ? new Date(p.reachedMs).toISOString() : "-";
  process.stderr.write(`\r\u001b[Kwal-replay: ${p.entries} entries (${rate}/s), through entry ${p.lastIndex}, reached ${reached}`);
}

function summary(r: WalReplayReport): string {
  const range = r.firstIndex === null ? "no entries" : `${r.entries} ${r.entries === 1 ? "entry" : "entries"} (${r.firstIndex}…${r.lastIndex})`;
  const stop = r.stoppedBefore === null
    ? `the archive ended at entry ${r.archiveLastIndex}`
    : `stopped before entry ${r.stoppedBefore.index} (stamped ${r.stoppedBefore.at})`;
  const reached = r.reachedAt === null || r.reachedAt === undefined ? "" : `, reached ${r.reachedAt}`;
  return `wal-replay: replayed ${range} after snapshot ${r.snapshot.index} to ${r.until}${reached}; ${stop}; ` +
    `${r.segmentsRead} segment(s) in ${(r.durationMs / 1000).toFixed(1)} s (${r.entriesPerSecond} entries/s). ` +
    "Next: start this node (svc serve / systemctl start svc), then the others with their raft/ emptied (SPEC §4.5 steps 5–6). " +
    "Point wal.archive_command at a new location first: the restored cluster's history is a new one, and this archive holds the one it replaced. " +
    `The restored cluster archives from entry ${r.lastIndex + 1} on (this archive holds those before it)`;
}
