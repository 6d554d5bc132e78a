// Looking at a path named in the configuration without throwing: a path too long, holding a
// NUL, running through a file or through a directory this user cannot search is a problem to
// report with the file's other problems, not an exception that hides them.

import { statSync, type Stats } from "node:fs";

/**
 * The path's stat, undefined when nothing is there, or why it cannot be looked at. `inText`:
 * the path as written cannot name a file (a NUL, too long, through a file): the configuration
 * must change; otherwise the file system may (permissions, a directory being made).
 */
export function statConfigPath(path: string): { stat: Stats | undefined } | { problem: string; inText: boolean } {
  if (path.includes("\u0000")) return { problem: "holds a NUL character, which no path can", inText: true };
  try {
    return { stat: statSync(path, { throwIfNoEntry: false }) };
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOTDIR") return { problem: `${JSON.stringify(path)} runs through a file, not a directory`, inText: true };
    if (code === "ENAMETOOLONG") return { problem: `is a path too long for this system (${path.length} characters)`, inText: true };
    if (code === "EACCES" || code === "EPERM") return { problem: `${JSON.stringify(path)} cannot be reached by this user (${code}); fix the permissions of its parent directories`, inText: false };
    return { problem: `${JSON.stringify(path)} cannot be looked at: ${e instanceof Error ? e.message : String(e)}`, inText: false };
  }
}
