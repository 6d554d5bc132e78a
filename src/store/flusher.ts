// Flushes the store's files to disk a few times a second, on Bun's I/O thread pool. The store
// itself never waits for the disk (see store.ts); without this, the kernel would let its
// writes pile up for half a minute and then write back hundreds of megabytes at once, and
// the WAL's own fdatasync calls would queue behind that at the disk. Flushing often keeps
// each writeback small, and keeps the wait off the thread that applies writes.
//
// A failed flush is not reported: nothing relies on these flushes for durability (checkpoints
// do: see store.ts), and a failing disk stops the node through the WAL's own fdatasync.

import * as fs from "node:fs";

/** How often the store's files are flushed while it is open and written. */
const flushIntervalMs = 200;

/** What fstat says of a file's contents: when none of it changed, neither did the file. */
interface FileVersion {
  readonly sizeBytes: number;
  readonly ctimeMs: number;
  readonly mtimeMs: number;
}

interface Watched {
  path: string;
  fd: number | null;
  /** The file as of its last flush (null: never flushed); a file unchanged since is not flushed again. */
  flushed: FileVersion | null;
  inFlight: boolean;
}

function sameVersion(a: FileVersion | null, b: FileVersion): boolean {
  return a !== null && a.sizeBytes === b.sizeBytes && a.ctimeMs === b.ctimeMs && a.mtimeMs === b.mtimeMs;
}

export class StoreFlusher {
  private readonly watched: Watched[];
  private readonly timer: ReturnType<typeof setInterval>;

  constructor(paths: string[]) {
    this.watched = paths.map((path) => ({ path, fd: null, flushed: null, inFlight: false }));
    this.timer = setInterval(() => this.flushChanged(), flushIntervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    for (const w of this.watched) {
      if (w.fd !== null) fs.closeSync(w.fd);
      w.fd = null;
    }
  }

  private flushChanged(): void {
    for (const w of this.watched) {
      if (w.inFlight) continue;
      try {
        w.fd ??= fs.openSync(w.path, "r");
        const st = fs.fstatSync(w.fd);
        const version: FileVersion = { sizeBytes: st.size, ctimeMs: st.ctimeMs, mtimeMs: st.mtimeMs };
        if (sameVersion(w.flushed, version)) continue;
        w.inFlight = true;
        fs.fdatasync(w.fd, (error) => {
          w.inFlight = false;
          if (error === null) w.flushed = version;
        });
      } catch {
        // Absent (the SQLite WAL comes and goes with the connection): see above.
      }
    }
  }
}
