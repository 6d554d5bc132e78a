// Retention of archived WAL segments in an object store (SPEC §8: weekly, older than 30 days,
// only names ending in `.wal`): the same rules as for a local directory (_cleanup-wal-archive.ts),
// with an object's last-modified time (when the archive command wrote it) as its age.

import { formatDuration } from "./_duration.ts";
import { WAL_ARCHIVE_SUFFIX } from "./_cleanup-wal-archive.ts";
import { ObjectStore } from "./s3.ts";
import type { CleanupOptions, CleanupReport } from "./types.ts";

export async function cleanupWalArchiveObjects(url: string, options: CleanupOptions, env: Readonly<Record<string, string | undefined>> = process.env): Promise<CleanupReport> {
  const store = ObjectStore.at(url, env);
  const report: CleanupReport = { dir: store.url(), dryRun: options.dryRun, olderThanMs: options.olderThanMs, removed: [], kept: [], ignored: [], problems: [] };
  for (const object of await store.list()) {
    const path = store.url(object.name);
    // Below another "directory" of the prefix, or not a segment: not the archive command's.
    if (object.name.includes("/") || !object.name.endsWith(WAL_ARCHIVE_SUFFIX)) {
      report.ignored.push(path);
      continue;
    }
    const ageMs = object.modifiedMs === null ? null : Math.round(options.nowMs - object.modifiedMs);
    if (ageMs === null || ageMs <= options.olderThanMs) {
      report.kept.push({ path, reason: ageMs === null ? "no last-modified time" : "not old enough", ageMs, sizeBytes: object.sizeBytes });
      continue;
    }
    const entry = { path, reason: `archived WAL segment older than ${formatDuration(options.olderThanMs)}`, ageMs, sizeBytes: object.sizeBytes };
    if (!options.dryRun) {
      try {
        await store.delete(object.name);
      } catch (e) {
        report.problems.push({ code: "REMOVE_FAILED", path, message: (e as Error).message });
        continue;
      }
    }
    report.removed.push(entry);
  }
  return report;
}
