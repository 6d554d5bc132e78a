// Durable file primitives. Bun.write never fsyncs, so everything that must survive a
// crash goes through these real syscalls.

import * as fs from "node:fs";
import { dirname } from "node:path";

/** fsync a file, or a directory so that a rename or a create inside it is durable. */
export function fsyncPath(path: string): void {
  const fd = fs.openSync(path, "r");
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

export const fsyncDir = fsyncPath;

/** fsync on the I/O thread pool: for the node's thread, which must not wait on the disk. */
export async function fsyncPathAsync(path: string): Promise<void> {
  const handle = await fs.promises.open(path, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Replace `path` with `data` atomically: write a temp file, fsync it, rename, fsync the directory. */
export function writeFileAtomic(path: string, data: Uint8Array | string): void {
  const tmp = `${path}.tmp-${process.pid}`;
  const fd = fs.openSync(tmp, "w", 0o640);
  try {
    fs.writeFileSync(fd, data);
    fs.fsyncSync(fd);
  } catch (e) {
    // A full disk must not leave half a temp file behind (it holds space, and is no state).
    fs.closeSync(fd);
    fs.rmSync(tmp, { force: true });
    throw e;
  }
  fs.closeSync(fd);
  fs.renameSync(tmp, path);
  fsyncDir(dirname(path));
}

/** writeFileAtomic with every write and sync on the I/O thread pool, for the node's thread. */
export async function writeFileAtomicAsync(path: string, data: Uint8Array | string): Promise<void> {
  const tmp = `${path}.tmp-${process.pid}`;
  const handle = await fs.promises.open(tmp, "w", 0o640);
  try {
    await handle.writeFile(data);
    await handle.sync();
  } catch (e) {
    await handle.close();
    await fs.promises.rm(tmp, { force: true });
    throw e;
  }
  await handle.close();
  await fs.promises.rename(tmp, path);
  await fsyncPathAsync(dirname(path));
}

export function ensureDir(dir: string, mode = 0o750): void {
  fs.mkdirSync(dir, { recursive: true, mode });
}

/** Write all of `data` at the current position of `fd` (writeSync may write less than asked). */
export function writeFully(fd: number, data: Uint8Array): void {
  let offset = 0;
  while (offset < data.length) {
    offset += fs.writeSync(fd, data, offset, data.length - offset);
  }
}
