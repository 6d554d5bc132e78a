// Runs in a Worker: makes the WAL's next segment ahead of time, a file of zeros (reserved, or
// written a page at a time and synced as it goes: see _zero-fill.ts), so that the writing
// thread neither writes tens of megabytes itself nor makes thousands of calls to the I/O pool.

import * as fs from "node:fs";
import { reserveZeros } from "./_zero-fill.ts";

declare const self: Worker;

export interface ZeroFillRequest {
  readonly path: string;
  readonly sizeBytes: number;
}

export interface ZeroFillReply {
  readonly error: { readonly message: string; readonly code: string | null } | null;
}

const syncEveryBytes = 1024 * 1024;

self.onmessage = (event: MessageEvent<ZeroFillRequest>) => {
  const { path, sizeBytes } = event.data;
  let reply: ZeroFillReply;
  try {
    const fd = fs.openSync(path, "w", 0o640);
    try {
      reserveZeros(fd, 0, sizeBytes, syncEveryBytes);
      fs.fdatasyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    reply = { error: null };
  } catch (e) {
    reply = { error: { message: e instanceof Error ? e.message : String(e), code: (e as NodeJS.ErrnoException).code ?? null } };
  }
  postMessage(reply);
};
