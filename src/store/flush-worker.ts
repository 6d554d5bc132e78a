// Runs in a Worker: flushes the store's files to disk a few times a second. The store itself
// never waits for the disk (see store.ts); without this, the kernel would let its writes pile
// up for half a minute and then write back hundreds of megabytes at once, and the WAL's own
// fdatasync calls would queue behind that. Flushing here keeps each writeback small, and
// keeps the wait off the thread that applies writes.
//
// A failed flush is not reported: nothing relies on these flushes for durability (a store
// left open by a machine that went down is rebuilt anyway), and a failing disk stops the node
// through the WAL's own fdatasync.

import { closeSync, fdatasyncSync, fstatSync, openSync } from "node:fs";

declare const self: Worker;

export type FlushRequest = { op: "start"; paths: string[]; intervalMs: number } | { op: "stop" };

interface Watched {
  path: string;
  fd: number | null;
  /** Size and change time at the last flush: unchanged files are not flushed again. */
  seen: string;
}

let watched: Watched[] = [];
let timer: ReturnType<typeof setInterval> | null = null;

self.onmessage = (event: MessageEvent<FlushRequest>) => {
  const request = event.data;
  if (request.op === "start") {
    watched = request.paths.map((path) => ({ path, fd: null, seen: "" }));
    timer = setInterval(flushChanged, request.intervalMs);
    return;
  }
  if (timer !== null) clearInterval(timer);
  for (const w of watched) if (w.fd !== null) closeSync(w.fd);
  watched = [];
  postMessage("stopped");
};

function flushChanged(): void {
  for (const w of watched) {
    try {
      w.fd ??= openSync(w.path, "r");
      const st = fstatSync(w.fd);
      const seen = `${st.size}/${st.ctimeMs}/${st.mtimeMs}`;
      if (seen === w.seen) continue;
      fdatasyncSync(w.fd);
      w.seen = seen;
    } catch {
      // Absent (the SQLite WAL comes and goes with the connection) or failing: see above.
    }
  }
}
