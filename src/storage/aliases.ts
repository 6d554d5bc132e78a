// The other names SPEC §2.1 gives the WAL and snapshot directories: <data_dir>/wal and
// <data_dir>/snapshots, beside raft/wal and raft/snapshots where svc keeps them. A node makes
// each as a relative symbolic link into raft/ when the name is free (relative, so a data
// directory copied or mounted elsewhere keeps working). Anything an operator put at one of
// those names is never replaced: it is reported, and the caller says so.
//
// The links are names only: svc reads and writes through raft/, and whatever walks a data
// directory (backups, the support bundle, install.sh's chown) does not follow them, so each
// file is seen once.

import * as fs from "node:fs";
import { join, relative, resolve } from "node:path";
import type { DataPaths } from "./paths.ts";

export type DataDirAliasOutcome =
  | { readonly name: string; readonly path: string; readonly target: string; readonly result: "made" | "present" }
  /** Something else is at `path`: `found` says what ("a directory", "a link to /x"). */
  | { readonly name: string; readonly path: string; readonly target: string; readonly result: "blocked"; readonly found: string };

/** Make <data_dir>/wal and <data_dir>/snapshots where they are absent; never fails (a link that cannot be made is reported). */
export function linkDataDirAliases(paths: DataPaths): DataDirAliasOutcome[] {
  return [paths.walDir, paths.snapshotsDir].map((dir) => {
    const target = relative(paths.dataDir, dir);
    const name = relative(paths.raftDir, dir);
    try {
      return linkOne(paths.dataDir, name, target);
    } catch (e) {
      return { name, path: join(paths.dataDir, name), target, result: "blocked", found: `unreadable (${(e as Error).message})` };
    }
  });
}

function linkOne(dataDir: string, name: string, target: string): DataDirAliasOutcome {
  const path = join(dataDir, name);
  const at = { name, path, target };
  const found = whatIsAt(path, dataDir, target);
  if (found === "absent") {
    try {
      fs.symlinkSync(target, path);
      return { ...at, result: "made" };
    } catch (e) {
      // Made meanwhile by someone else (EEXIST): look again; otherwise the file system refused it.
      const again = whatIsAt(path, dataDir, target);
      if (again === "ours") return { ...at, result: "present" };
      return { ...at, result: "blocked", found: again === "absent" ? `not makeable (${(e as Error).message})` : again };
    }
  }
  if (found === "ours") return { ...at, result: "present" };
  return { ...at, result: "blocked", found };
}

/** "absent", "ours" (a link to `target`, or the very directory it names), or what else is there. */
function whatIsAt(path: string, dataDir: string, target: string): string {
  const st = fs.lstatSync(path, { throwIfNoEntry: false });
  if (st === undefined) return "absent";
  if (st.isSymbolicLink()) {
    const link = fs.readlinkSync(path);
    return resolve(dataDir, link) === resolve(dataDir, target) || sameDirectory(path, join(dataDir, target)) ? "ours" : `a link to ${link}`;
  }
  if (st.isDirectory()) return sameDirectory(path, join(dataDir, target)) ? "ours" : "a directory";
  return st.isFile() ? "a file" : "a special file";
}

/** Whether two paths lead to one directory (a bind mount, a link by another route). */
function sameDirectory(a: string, b: string): boolean {
  const sa = fs.statSync(a, { throwIfNoEntry: false });
  const sb = fs.statSync(b, { throwIfNoEntry: false });
  return sa !== undefined && sb !== undefined && sa.isDirectory() && sa.dev === sb.dev && sa.ino === sb.ino;
}
