// `svc admin cleanup-wal-archive --dir D|s3://bucket/prefix [--older-than 30d] [--dry-run] [--json]`:
// removes archived WAL segments (names ending in .wal) older than the threshold; everything else stays.
// Run weekly by the svc-cleanup-wal-archive timer (SPEC §8). A threshold under a day is refused.

import { defineCommand } from "citty";
import { cleanupWalArchive, cleanupWalArchiveObjects, isObjectUrl } from "../../backup/index.ts";
import { CliExit, ExitCode, usageError } from "../_exit.ts";
import { checkedLocation } from "../_location.ts";
import { olderThanMs, printCleanupReport } from "./_cleanup-output.ts";

/**
 * The least --older-than taken. Full backups are daily (SPEC §8), and a point-in-time restore
 * replays the segments archived since the newest one (SPEC §4.5): a shorter threshold removes
 * some of them on every run, and 0 removes the whole archive at once.
 */
const olderThanMsMin = 86_400_000;

export const cleanupWalArchiveCommand = defineCommand({
  meta: { name: "cleanup-wal-archive", description: "Remove archived WAL segments (*.wal) older than a threshold" },
  args: {
    // Checked in run(): a missing --dir is a usage error (exit 2), which citty's own check is not.
    dir: { type: "string", description: "Where the archive command puts segments", valueHint: "DIR" },
    "older-than": { type: "string", default: "30d", description: "Age threshold, at least 1d: 30d, 36h, 2880m", valueHint: "DURATION" },
    "dry-run": { type: "boolean", default: false, description: "Print what would be removed; remove nothing" },
    json: { type: "boolean", default: false, description: "Print the report as JSON" },
  },
  async run({ args }) {
    const thresholdMs = olderThanMs(args["older-than"]);
    if (thresholdMs < olderThanMsMin) {
      throw usageError(`--older-than ${args["older-than"]} removes archived WAL segments written since the newest daily full backup (all of them at 0), ` +
        "which a point-in-time restore from it replays (SPEC §4.5)\n  → give at least 1d; the weekly timer keeps 30d, as long as full backups are kept");
    }
    if (args.dir === undefined || args.dir === "") throw usageError("--dir DIR is required: the directory the archive command writes segments to");
    checkedLocation(args.dir, "--dir");
    const options = { olderThanMs: thresholdMs, nowMs: Date.now(), dryRun: args["dry-run"] };
    let report;
    if (isObjectUrl(args.dir)) report = await cleanupWalArchiveObjects(args.dir, options);
    else if (/^[a-z][a-z0-9+.-]*:\/\//i.test(args.dir)) {
      throw new CliExit(ExitCode.usage, `--dir ${args.dir}: give a local directory or an s3://bucket/prefix location`);
    } else report = cleanupWalArchive(args.dir, options);
    printCleanupReport("cleanup-wal-archive", report, args.json);
  },
});
