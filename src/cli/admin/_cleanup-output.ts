// What the retention commands print: one line per removed path (or, in a dry run, per path that
// would be removed), then a summary; with --json, the whole report as one JSON object.
// Problems (a path that could not be removed, no valid snapshot) end the command with exit 1.

import { formatDuration, parseDuration, type CleanupReport, type SnapshotCleanupReport } from "../../backup/index.ts";
import { CliExit, ExitCode, usageError } from "../_exit.ts";

export function olderThanMs(text: string): number {
  const parsed = parseDuration(text);
  if (!parsed.ok) throw usageError(`--older-than: ${parsed.message}`);
  return parsed.ms;
}

export function printCleanupReport(command: string, report: CleanupReport | SnapshotCleanupReport, json: boolean): void {
  if (json) {
    process.stdout.write(`${JSON.stringify({ command, ...report }, null, 2)}\n`);
  } else {
    const verb = report.dryRun ? "would remove" : "removed";
    for (const entry of report.removed) {
      const age = entry.ageMs === null ? "" : `, age ${formatDuration(entry.ageMs)}`;
      process.stdout.write(`${verb} ${entry.path} (${entry.reason}${age})\n`);
    }
    process.stdout.write(`${summary(command, report)}\n`);
  }
  if (report.problems.length > 0) {
    throw new CliExit(ExitCode.failure, report.problems.map((p) => p.message).join("\n"));
  }
}

function summary(command: string, report: CleanupReport | SnapshotCleanupReport): string {
  const bytes = report.removed.reduce((sum, e) => sum + e.sizeBytes, 0);
  const head = report.dryRun ? `${command} (dry run): would remove` : `${command}: removed`;
  const parts = [
    `${head} ${report.removed.length} (${formatBytes(bytes)}) older than ${formatDuration(report.olderThanMs)} in ${report.dir}`,
    `kept ${report.kept.length}`,
  ];
  if (report.ignored.length > 0) parts.push(`left ${report.ignored.length} other entries alone`);
  if ("newestValid" in report && report.newestValid !== null) parts.push(`newest valid snapshot ${report.newestValid} kept`);
  if (report.problems.length > 0) parts.push(`${report.problems.length} problems`);
  return parts.join("; ");
}

function formatBytes(bytes: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${bytes} B` : `${value.toFixed(1)} ${units[unit]}`;
}
