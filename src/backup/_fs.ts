// File helpers shared by the retention jobs: listing a directory that must exist, removing
// without stopping at the first failure, measuring what a removal frees.

import * as fs from "node:fs";
import { join } from "node:path";
import { SvcError } from "../util/errors.ts";
import type { CleanupReport } from "./types.ts";

/** Entries of a directory that must exist; a missing one is an operator error with a hint. */
export function readDirOrThrow(dir: string, what: string, pathHint = "check the path (--data-dir, or data_dir in the config file)"): fs.Dirent[] {
  try {
    return fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") {
      throw new SvcError("CLEANUP_DIR_MISSING", `${what} ${dir} does not exist or is not a directory`, {
        hint: pathHint,
      });
    }
    throw new SvcError("CLEANUP_DIR_UNREADABLE", `cannot read ${what} ${dir}: ${(e as Error).message}`, {
      hint: "run the job as the svc user or as root",
    });
  }
}

/** Remove a file or a tree; a failure becomes a problem in the report and returns false. */
export function removePath(path: string, report: CleanupReport, options: { missingOk?: boolean } = {}): boolean {
  try {
    fs.rmSync(path, { recursive: true, force: options.missingOk === true });
    return true;
  } catch (e) {
    report.problems.push({ code: "REMOVE_FAILED", path, message: `cannot remove ${path}: ${(e as Error).message}` });
    return false;
  }
}

/**
 * Total size of the regular files under a path, without following symlinks. For reports only:
 * a tree that changes meanwhile (the node pruning it) counts as what could still be read.
 */
export function treeSizeBytes(path: string): number {
  const stat = fs.lstatSync(path, { throwIfNoEntry: false });
  if (stat === undefined) return 0;
  if (!stat.isDirectory()) return stat.isFile() ? stat.size : 0;
  let names: string[];
  try {
    names = fs.readdirSync(path);
  } catch {
    return 0;
  }
  let total = 0;
  for (const name of names) total += treeSizeBytes(join(path, name));
  return total;
}
