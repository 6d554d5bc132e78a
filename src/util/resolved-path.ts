// A path as the file system resolves it when it may not exist yet (a data directory before
// its first start, a backup destination): the links of its nearest existing ancestor resolved,
// the rest as written.

import { realpathSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";

/** `path` (absolute), or the nearest directory above it that exists; null when none can be looked at. */
export function nearestExisting(path: string): string | null {
  for (let p = path; ; p = dirname(p)) {
    try {
      statSync(p);
      return p;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") return null;
    }
    if (dirname(p) === p) return null;
  }
}

/** `path` made absolute, with the links of its nearest existing ancestor resolved; as written when that cannot be. */
export function resolvedPath(path: string): string {
  const abs = resolve(path);
  const existing = nearestExisting(abs);
  if (existing === null) return abs;
  try {
    return join(realpathSync(existing), abs.slice(existing.length));
  } catch {
    return abs;
  }
}
