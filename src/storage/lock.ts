// The data directory's lock: one running node (or offline tool) per data directory.
// flock(2) on <data_dir>/LOCK, so the kernel releases it when the holder dies, kill -9
// included; the file also records the holder's pid for the error message.

import * as fs from "node:fs";
import { join } from "node:path";
import { dlopen, FFIType } from "bun:ffi";
import { SvcError } from "../util/errors.ts";

const LOCK_EX = 2;
const LOCK_NB = 4;

let libc: { symbols: { flock: (fd: number, op: number) => number } } | null = null;
function flock(fd: number, op: number): number {
  libc ??= dlopen("libc.so.6", { flock: { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 } });
  return libc.symbols.flock(fd, op);
}

export interface DataDirLock {
  readonly path: string;
  release(): void;
}

export function lockDataDir(dataDir: string, holder: string): DataDirLock {
  const path = join(dataDir, "LOCK");
  return lockOpened(fs.openSync(path, fs.constants.O_RDWR | fs.constants.O_CREAT, 0o640), dataDir, path, holder);
}

/**
 * As lockDataDir, for a tool that only reads the directory: it creates no LOCK file. Null when
 * there is none: a running node always holds one, so none runs there now. (A node started
 * meanwhile is not kept out; the tool writes nothing, so at worst what it reports is confused.)
 */
export function lockDataDirIfPresent(dataDir: string, holder: string): DataDirLock | null {
  const path = join(dataDir, "LOCK");
  let fd: number;
  try {
    fd = fs.openSync(path, fs.constants.O_RDWR);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw e;
  }
  return lockOpened(fd, dataDir, path, holder);
}

function lockOpened(fd: number, dataDir: string, path: string, holder: string): DataDirLock {
  if (flock(fd, LOCK_EX | LOCK_NB) !== 0) {
    let owner: string | null = null;
    try {
      owner = fs.readFileSync(path, "utf8").trim() || null;
    } catch {
      // unreadable: say nothing about the owner
    }
    fs.closeSync(fd);
    throw new SvcError("DATA_DIR_LOCKED", `data directory ${dataDir} is in use by another svc process${owner === null ? "" : ` (${owner})`}`, {
      hint: "stop the other node first (two nodes on one data directory would destroy it), or point this one at its own data_dir",
    });
  }
  fs.ftruncateSync(fd, 0);
  fs.writeSync(fd, `pid ${process.pid} ${holder}\n`, 0);
  return {
    path,
    release() {
      try {
        flock(fd, 8 /* LOCK_UN */);
        fs.closeSync(fd);
      } catch {
        // already closed
      }
    },
  };
}
