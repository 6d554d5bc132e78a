// `svc admin cleanup-wal-archive --dir D|s3://bucket/prefix [--older-than 30d] [--dry-run] [--json]`:
// removes archived WAL segments (names ending in .wal) older than the threshold; everything else stays.
// Run weekly by the svc-cleanup-wal-archive timer (SPEC §8).

import { defineCommand } from "citty";
import { cleanupWalArchive, cleanupWalArchiveObjects, isObjectUrl } from "../../backup/index.ts";
import { CliExit, ExitCode, usageError } from "../_exit.ts";
import { olderThanMs, printCleanupReport } from "./_cleanup-output.ts";

export const cleanupWalArchiveCommand = defineCommand({
  meta: { name: "cleanup-wal-archive", description: "Remove archived WAL segments (*.wal) older than a threshold" },
  args: {
    // Checked in run(): a missing --dir is a usage error (exit 2), which citty's own check is not.
    dir: { type: "string", description: "Where the archive command puts segments", valueHint: "DIR" },
    "older-than": { type: "string", default: "30d", description: "Age threshold: 30d, 12h, 90m, 3600s", valueHint: "DURATION" },
    "dry-run": { type: "boolean", default: false, description: "Print what would be removed; remove nothing" },
    json: { type: "boolean", default: false, description: "Print the report as JSON" },
  },
  async run({ args }) {
    const thresholdMs = olderThanMs(args["older-than"]);
    if (args.dir === undefined || args.dir === "") throw usageError("--dir DIR is required: the directory the archive command writes segments to");
    const options = { olderThanMs: thresholdMs, nowMs: Date.now(), dryRun: args["dry-run"] };
    let report;
    if (isObjectUrl(args.dir)) report = await cleanupWalArchiveObjects(args.dir, options);
    else if (/^[a-z][a-z0-9+.-]*:\/\//i.test(args.dir)) {
      throw new CliExit(ExitCode.usage, `--dir ${args.dir}: give a local directory or an s3://bucket/prefix location`);
    } else report = cleanupWalArchive(args.dir, options);
    printCleanupReport("cleanup-wal-archive", report, args.json);
  },
});
