// The WAL's sync thread (see sync-worker.ts): fdatasync on a file descriptor, answered by a
// promise. The caller keeps the descriptor open until the promise settles.

import { workerSpecifier } from "../util/worker.ts";
import type { SyncReply, SyncRequest } from "./sync-worker.ts";

export class Syncer {
  private readonly worker: Worker;
  private readonly pending = new Map<number, { resolve: () => void; reject: (e: Error) => void }>();
  private nextSeq = 1;
  private failure: Error | null = null;

  constructor() {
    this.worker = new Worker(workerSpecifier(import.meta.url, "storage/sync-worker.ts"));
    // The servers keep the process alive; an idle sync thread must not.
    this.worker.unref();
    this.worker.onmessage = (event: MessageEvent<SyncReply>) => {
      const { seq, error } = event.data;
      const waiter = this.pending.get(seq);
      this.pending.delete(seq);
      if (waiter === undefined) return;
      if (error === null) waiter.resolve();
      else waiter.reject(Object.assign(new Error(error.message), { code: error.code ?? undefined }));
    };
    this.worker.onerror = (event) => this.failAll(new Error(`the WAL sync thread failed: ${event.message}`));
  }

  fdatasync(fd: number): Promise<void> {
    if (this.failure !== null) return Promise.reject(this.failure);
    const seq = this.nextSeq++;
    return new Promise<void>((resolve, reject) => {
      this.pending.set(seq, { resolve, reject });
      const request: SyncRequest = { seq, fd };
      this.worker.postMessage(request);
    });
  }

  close(): void {
    this.failAll(new Error("the WAL was closed during a sync"));
    this.worker.terminate();
  }

  private failAll(e: Error): void {
    this.failure ??= e;
    for (const waiter of this.pending.values()) waiter.reject(e);
    this.pending.clear();
  }
}
