// Runs in a Worker: the WAL's fdatasync calls, one at a time, on a thread of their own.
// Through Bun's shared I/O pool each call cost about twice the CPU of the fdatasync itself
// (some 100-200 µs more, measured), and there a WAL sync can wait behind other file work (a
// snapshot's hashing, the next segment's zeros).

import { fdatasyncSync } from "node:fs";

declare const self: Worker;

export interface SyncRequest {
  seq: number;
  fd: number;
}

export interface SyncReply {
  seq: number;
  /** null when the data is on disk. */
  error: { message: string; code: string | null } | null;
}

self.onmessage = (event: MessageEvent<SyncRequest>) => {
  const { seq, fd } = event.data;
  let reply: SyncReply;
  try {
    fdatasyncSync(fd);
    reply = { seq, error: null };
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    reply = { seq, error: { message: e instanceof Error ? e.message : String(e), code: code ?? null } };
  }
  postMessage(reply);
};
