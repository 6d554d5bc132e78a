// <data_dir>/BALLAST: a few megabytes of zeros kept on the data directory's disk so that a
// node found on a completely full disk can still start. SQLite cannot open its store there
// (the shared-memory index of its WAL needs pages of its own), so the node removes the
// ballast, starts, serves reads and refuses writes until space is freed; the ballast is made
// again at a later start that finds room for it.

import * as fs from "node:fs";
import { join } from "node:path";
import { freeBytes } from "../io/disk-space.ts";
import { fsyncDir, writeFully } from "../io/durable-file.ts";

export const ballastBytes = 4 * 1024 * 1024;

export type BallastOutcome = "kept" | "made" | "released" | "absent";

/**
 * Release the ballast when less than `needBytes` are free; otherwise make it when it is
 * missing and there is room for it and `needBytes` besides.
 */
export function manageBallast(dataDir: string, needBytes: number): BallastOutcome {
  const path = join(dataDir, "BALLAST");
  const exists = fs.existsSync(path);
  const free = freeBytes(dataDir);
  if (free === null) return exists ? "kept" : "absent";
  if (exists) {
    if (free >= needBytes) return "kept";
    fs.rmSync(path, { force: true });
    fsyncDir(dataDir);
    return "released";
  }
  if (free < needBytes + ballastBytes) return "absent";
  const tmp = `${path}.creating`;
  const fd = fs.openSync(tmp, "w", 0o640);
  try {
    writeFully(fd, new Uint8Array(ballastBytes));
    fs.fsyncSync(fd);
  } catch {
    fs.closeSync(fd);
    fs.rmSync(tmp, { force: true });
    return "absent";
  }
  fs.closeSync(fd);
  fs.renameSync(tmp, path);
  fsyncDir(dataDir);
  return "made";
}
