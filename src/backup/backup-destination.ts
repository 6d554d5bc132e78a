// Where backups go: a directory or an object store (`s3://bucket/prefix`), with the same
// three operations either way: put a local file under a name, list names with their dates,
// remove a name. Retention removes dated full backups (svc-backup-<YYYYMMDD>.tar.gz) older
// than a duration, judged by the date in the name, never latest.tar.gz or anything else.

import * as fs from "node:fs";
import { join } from "node:path";
import { fsyncPath } from "../io/durable-file.ts";
import { SvcError, errorMessage } from "../util/errors.ts";
import { removeFilesOfDeadProcesses } from "../storage/replay-leftovers.ts";
import { fullBackupDateMs, partialAgeMs, partialPattern } from "./backup-archive.ts";
import { ObjectStore, isObjectUrl } from "./s3.ts";

export interface Destination {
  readonly url: string;
  /** Copy a local file in under `name` (replacing one of that name). */
  put(localPath: string, name: string): Promise<void>;
  /** Fetch `name` into a local file. */
  get(name: string, localPath: string): Promise<void>;
  names(): Promise<string[]>;
  remove(name: string): Promise<void>;
}

export function openDestination(url: string, env: Readonly<Record<string, string | undefined>> = process.env): Destination {
  if (isObjectUrl(url)) {
    const store = ObjectStore.at(url, env);
    return {
      url,
      put: (localPath, name) => store.upload(localPath, name),
      get: async (name, localPath) => {
        await store.download(name, localPath);
      },
      names: async () => (await store.list()).map((o) => o.name).filter((n) => !n.includes("/")),
      remove: (name) => store.delete(name),
    };
  }
  const dir = url;
  return {
    url,
    async put(localPath, name) {
      fs.mkdirSync(dir, { recursive: true });
      const target = join(dir, name);
      if (fs.realpathSync(localPath) === join(fs.realpathSync(dir), name)) return;
      removeFilesOfDeadProcesses(dir, partialPattern, partialAgeMs);
      const temp = `${target}.partial-${process.pid}`;
      fs.copyFileSync(localPath, temp);
      fsyncPath(temp);
      fs.renameSync(temp, target);
      fsyncPath(dir);
    },
    async get(name, localPath) {
      const from = join(dir, name);
      if (fs.statSync(from, { throwIfNoEntry: false })?.isFile() !== true) {
        throw new SvcError("BACKUP_FAILED", `${from} does not exist or is not a file`, { hint: "name a backup archive that exists (svc-backup-<YYYYMMDD>.tar.gz, latest.tar.gz)" });
      }
      try {
        fs.copyFileSync(from, localPath);
      } catch (e) {
        throw new SvcError("BACKUP_FAILED", `cannot copy ${from} to ${localPath}: ${errorMessage(e)}`, { hint: "check that the directory written to exists, is writable and has room" });
      }
    },
    async names() {
      return fs.existsSync(dir) ? fs.readdirSync(dir).sort() : [];
    },
    async remove(name) {
      fs.rmSync(join(dir, name), { force: true });
    },
  };
}

/** Remove dated full backups older than `retainMs` (by the day in their name); the names removed. */
export async function applyRetention(dest: Destination, retainMs: number, nowMs: number, keep: ReadonlySet<string> = new Set()): Promise<string[]> {
  const removed: string[] = [];
  for (const name of await dest.names()) {
    const dayMs = fullBackupDateMs(name);
    if (dayMs === null || keep.has(name)) continue;
    if (nowMs - dayMs > retainMs) {
      await dest.remove(name);
      removed.push(name);
    }
  }
  return removed;
}

/** The newest dated full backup at a destination, or null. */
export async function newestFullBackup(dest: Destination): Promise<string | null> {
  const dated = (await dest.names()).filter((n) => fullBackupDateMs(n) !== null).sort();
  return dated.at(-1) ?? null;
}
