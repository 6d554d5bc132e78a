// `svc admin cleanup-snapshots [--config F | --data-dir D] [--older-than 7d] [--dry-run] [--json]`:
// removes snapshots older than the threshold, never the newest valid one. Run daily by the
// svc-cleanup-snapshots timer (SPEC §8). Works on the data directory, with or without a running node.

import { existsSync } from "node:fs";
import { defineCommand } from "citty";
import { cleanupSnapshots } from "../../backup/index.ts";
import { formatProblems, loadConfigFile } from "../../config/index.ts";
import { defaultConfigPath, requireDataDir } from "../_config.ts";
import { usageError } from "../_exit.ts";
import { olderThanMs, printCleanupReport } from "./_cleanup-output.ts";


export const cleanupSnapshotsCommand = defineCommand({
  meta: { name: "cleanup-snapshots", description: "Remove snapshots older than a threshold, keeping the newest valid one" },
  args: {
    config: { type: "string", description: `Config file whose data_dir to clean (default ${defaultConfigPath()})`, valueHint: "FILE" },
    "data-dir": { type: "string", description: "Data directory to clean, instead of a config file", valueHint: "DIR" },
    "older-than": { type: "string", default: "7d", description: "Age threshold: 7d, 12h, 90m, 3600s", valueHint: "DURATION" },
    "dry-run": { type: "boolean", default: false, description: "Print what would be removed; remove nothing" },
    json: { type: "boolean", default: false, description: "Print the report as JSON" },
  },
  async run({ args }) {
    const thresholdMs = olderThanMs(args["older-than"]);
    const dataDir = resolveDataDir(args.config, args["data-dir"]);
    const report = await cleanupSnapshots(dataDir, { olderThanMs: thresholdMs, nowMs: Date.now(), dryRun: args["dry-run"] });
    printCleanupReport("cleanup-snapshots", report, args.json);
  },
});

/**
 * The data directory to clean; one that is not a svc data directory is refused (exit 2), not
 * reported clean. One a node has not started in yet (the timer runs from install on) has
 * nothing to clean.
 */
function resolveDataDir(configPath: string | undefined, dataDir: string | undefined): string {
  if (configPath !== undefined && dataDir !== undefined) throw usageError("give --config or --data-dir, not both");
  if (dataDir !== undefined) {
    requireDataDir(dataDir, "--data-dir", { orFresh: true });
    return dataDir;
  }
  const fallback = defaultConfigPath();
  const path = configPath ?? (existsSync(fallback) ? fallback : undefined);
  if (path === undefined) throw usageError(`no data directory: give --config FILE or --data-dir DIR (${fallback} does not exist)`);
  const loaded = loadConfigFile(path);
  if (!loaded.ok) throw usageError(`the config file has problems:\n${formatProblems(loaded.problems, path)}`);
  requireDataDir(loaded.config.dataDir, `data_dir in ${path}`, { orFresh: true });
  return loaded.config.dataDir;
}
