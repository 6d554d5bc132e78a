// wal-repair --skip-corrupted: offline, on a stopped node's data directory (--data-dir, or
// data_dir in --config or in the installed configuration).

import { defineCommand } from "citty";
import { dataPaths, lockDataDir, repairWal } from "../../storage/index.ts";
import { SvcError } from "../../util/index.ts";
import { defaultConfigPath, offlineDataDir } from "../_config.ts";
import { printJson } from "../_client.ts";
import { CliExit, ExitCode, usageError } from "../_exit.ts";

export const walRepairCommand = defineCommand({
  meta: { name: "wal-repair", description: "Cut the WAL at its first corrupted record (offline; entries from there on are lost on this node)" },
  args: {
    "skip-corrupted": { type: "boolean", description: "Required: acknowledge that entries from the damage on are dropped" },
    "data-dir": { type: "string", description: "Data directory of the stopped node", valueHint: "DIR" },
    config: { type: "string", description: `Take data_dir from this configuration file (default ${defaultConfigPath()})`, valueHint: "FILE" },
    "dry-run": { type: "boolean", description: "Say what would be cut without changing anything" },
    json: { type: "boolean", description: "Print machine-readable JSON" },
  },
  async run({ args }) {
    if (!args["skip-corrupted"]) {
      throw usageError("wal-repair drops every entry from the first damaged record on; pass --skip-corrupted to confirm (or --dry-run to look first)");
    }
    const dataDir = offlineDataDir({ dataDir: args["data-dir"], config: args.config });
    let lock;
    try {
      lock = lockDataDir(dataDir, "wal-repair");
    } catch (e) {
      throw e instanceof SvcError ? new CliExit(ExitCode.failure, `${e.message}\n  → stop the node first (systemctl stop svc)`) : e;
    }
    try {
      const report = repairWal(dataPaths(dataDir).walDir, { dryRun: args["dry-run"] === true });
      if (args.json) return printJson(report);
      if (report.damage === null) {
        process.stdout.write("no damaged WAL records found; nothing to do\n");
        return;
      }
      const d = report.damage;
      process.stdout.write(
        `${args["dry-run"] ? "would cut" : "cut"} the WAL at ${d.file} byte ${d.offset} (${d.reason}); ` +
          `entries after ${d.lastGoodIndex} ${args["dry-run"] ? "would be" : "are"} dropped on this node\n` +
          `${args["dry-run"] ? "would move aside" : "moved aside"} into ${report.quarantineDir}: ${report.quarantined.join(", ")}\n` +
          (args["dry-run"] ? "" : "start the node: on a cluster it fetches the missing entries from the leader\n"),
      );
    } finally {
      lock.release();
    }
  },
});
