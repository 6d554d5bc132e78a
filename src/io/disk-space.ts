// Telling a full disk from a failed one. A write refused for want of space (ENOSPC, EDQUOT,
// SQLite's SQLITE_FULL) changed nothing that was durable and may be retried once space is
// freed: the caller undoes what it wrote and tries again later. Any other I/O error, and an
// fsync error of any kind, is not retried (see Wal.sync for why).

import * as fs from "node:fs";

const diskFullCodes = new Set(["ENOSPC", "EDQUOT", "SQLITE_FULL"]);

/** The disk (or the user's quota) had no room for a write. */
export function isDiskFullError(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  if (typeof code === "string" && diskFullCodes.has(code)) return true;
  // bun:sqlite names the code on some errors only; its message is SQLite's own.
  return e instanceof Error && /database or disk is full/.test(e.message);
}

/** Bytes an unprivileged writer can still use on the file system holding `path`; null when unknown. */
export function freeBytes(path: string): number | null {
  try {
    const s = fs.statfsSync(path);
    return Number(s.bavail) * Number(s.bsize);
  } catch {
    return null;
  }
}

/** An ENOSPC-coded error that names the file and the free space, for the node to report. */
export class DiskFullError extends Error {
  readonly code = "ENOSPC";
  constructor(message: string, readonly path: string, readonly bytesFree: number | null, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "DiskFullError";
  }
}
