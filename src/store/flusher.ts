// The store's background flusher (see flush-worker.ts): started with the store, stopped with it.

import type { FlushRequest } from "./flush-worker.ts";

/** How often the store's files are flushed while it is open and written. */
const flushIntervalMs = 200;

export class StoreFlusher {
  private readonly worker: Worker;

  constructor(paths: string[]) {
    this.worker = new Worker(workerSpecifier());
    this.worker.unref();
    this.worker.onmessage = () => this.worker.terminate();
    this.post({ op: "start", paths, intervalMs: flushIntervalMs });
  }

  /** Stop flushing; the worker closes its files and ends on its own. */
  stop(): void {
    this.post({ op: "stop" });
  }

  private post(request: FlushRequest): void {
    this.worker.postMessage(request);
  }
}

/** As for the snapshot worker: beside this file from source, an extra entry point when compiled. */
function workerSpecifier(): string {
  return import.meta.url.includes("$bunfs") ? "./store/flush-worker.ts" : new URL("./flush-worker.ts", import.meta.url).href;
}
