// Retention of archived WAL segments in a local directory (SPEC §8: weekly, 30 days). Object-store
// locations come with the backup capability.

import * as fs from "node:fs";
import { join } from "node:path";
import type { CleanupOptions, CleanupReport } from "./types.ts";
import { formatDuration } from "./_duration.ts";
import { readDirOrThrow, removePath } from "./_fs.ts";
import { SvcError, errorMessage } from "../util/errors.ts";

/** Archived WAL segments are files named `<name>.wal`; nothing else in the place is touched. */
export const WAL_ARCHIVE_SUFFIX = ".wal";

/**
 * Remove archived WAL segments older than the threshold from a local directory. Only regular
 * files whose name ends in `.wal` are candidates; their age is their modification time, which
 * is when the archive command wrote them.
 */
export function cleanupWalArchive(dir: string, options: CleanupOptions): CleanupReport {
  const report: CleanupReport = { dir, dryRun: options.dryRun, olderThanMs: options.olderThanMs, removed: [], kept: [], ignored: [], problems: [] };
  for (const dirent of readDirOrThrow(dir, "WAL archive directory", "check --dir: the directory [wal] archive_command copies segments to")) {
    const path = join(dir, dirent.name);
    // A symlink or a directory named *.wal is not something the archive command wrote.
    if (!dirent.isFile() || !dirent.name.endsWith(WAL_ARCHIVE_SUFFIX)) {
      report.ignored.push(path);
      continue;
    }
    let stat: fs.Stats | undefined;
    try {
      stat = fs.lstatSync(path, { throwIfNoEntry: false });
    } catch (e) {
      // A directory this user may list but not search (mode r without x): no file's age can be read.
      throw new SvcError("CLEANUP_DIR_UNREADABLE", `cannot read the age of ${path}: ${errorMessage(e)}`, {
        hint: `run the job as the user the archive command writes as (svc) or as root, or give that user search permission on ${dir} (chmod u+x)`,
      });
    }
    if (stat === undefined) continue; // removed by someone else meanwhile
    const ageMs = Math.round(options.nowMs - stat.mtimeMs);
    if (ageMs <= options.olderThanMs) {
      report.kept.push({ path, reason: "not old enough", ageMs, sizeBytes: stat.size });
      continue;
    }
    const entry = { path, reason: `archived WAL segment older than ${formatDuration(options.olderThanMs)}`, ageMs, sizeBytes: stat.size };
    if (!options.dryRun && !removePath(path, report)) continue;
    report.removed.push(entry);
  }
  return report;
}
