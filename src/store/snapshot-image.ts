// Snapshot files made ready off the main thread (see snapshot-worker.ts).

import { decodeMembership, emptyMembership, type Membership } from "../util/log-data.ts";
import { SvcError } from "../util/errors.ts";
import { workerSpecifier } from "../util/worker.ts";
import type { SnapshotWorkerReply, SnapshotWorkerRequest } from "./snapshot-worker.ts";

export interface SnapshotImage {
  appliedIndex: number;
  appliedTerm: number;
  membership: Membership;
  clusterId: string;
  /** SHA-256 of the image file, for its meta.json. */
  stateSha256: string;
}

/** Copy the store into a durable snapshot image at `imagePath`. */
export async function createSnapshotImage(storePath: string, imagePath: string): Promise<SnapshotImage> {
  const reply = await runSnapshotWorker({ kind: "image", storePath, imagePath }, {
    what: "could not copy the store into a snapshot",
    hint: "check free disk space and permissions under the data directory, then POST /admin/snapshot again",
  });
  const image = reply.image;
  if (image === null || reply.sha256 === null) throw new SvcError("SNAPSHOT_FAILED", "the snapshot worker returned no image metadata");
  return {
    appliedIndex: image.appliedIndex,
    appliedTerm: image.appliedTerm,
    membership: decodeMembership(new TextEncoder().encode(image.membership)) ?? emptyMembership,
    clusterId: image.clusterId,
    stateSha256: reply.sha256,
  };
}

/**
 * Copy a filed snapshot's image to `stagedPath`, durable, for Store.installImage to rename into
 * place: the copy of a large image then happens here, not on the thread that installs it.
 */
export async function stageStoreImage(imagePath: string, stagedPath: string): Promise<void> {
  await runSnapshotWorker({ kind: "stage", imagePath, stagedPath }, {
    what: "could not copy a received snapshot beside the store",
    hint: "check free disk space under the data directory; the snapshot is installed by a copy instead",
  });
}

/** What a checkpoint made durable: the store's applied state when it began. */
export interface CheckpointResult {
  appliedIndex: number;
  appliedTerm: number;
  membership: Membership;
}

/**
 * Checkpoints of one store, on a worker of their own that lives as long as the store: one
 * runs every snapshot_interval entries, too often to start a thread each time.
 */
export class StoreCheckpointer {
  private worker: Worker | null = null;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly storePath: string) {}

  /** Make the store durable up to what it has applied now; resolves with that state. */
  checkpoint(): Promise<CheckpointResult> {
    const run = this.queue.then(() => this.request({ kind: "checkpoint", storePath: this.storePath }));
    this.queue = run.catch(() => undefined);
    return run.then((reply) => {
      const image = reply.image;
      if (image === null) throw new SvcError("CHECKPOINT_FAILED", "the checkpoint worker returned no applied index");
      return {
        appliedIndex: image.appliedIndex,
        appliedTerm: image.appliedTerm,
        membership: decodeMembership(new TextEncoder().encode(image.membership)) ?? emptyMembership,
      };
    });
  }

  /** End the worker once a checkpoint in progress is done (the store closes). */
  async close(): Promise<void> {
    await this.queue;
    this.worker?.terminate();
    this.worker = null;
  }

  private request(request: SnapshotWorkerRequest): Promise<Extract<SnapshotWorkerReply, { ok: true }>> {
    this.worker ??= new Worker(workerSpecifier(import.meta.url, "store/snapshot-worker.ts"));
    const worker = this.worker;
    return new Promise((resolve, reject) => {
      worker.onmessage = (event: MessageEvent<SnapshotWorkerReply>) => {
        const reply = event.data;
        if (reply.ok) resolve(reply);
        else reject(new SvcError("CHECKPOINT_FAILED", `could not checkpoint the store: ${reply.message}`, { hint: "check free disk space and the kernel log for I/O errors; the store is checkpointed again at the next interval" }));
      };
      worker.onerror = (event) => {
        this.worker?.terminate();
        this.worker = null;
        reject(new SvcError("CHECKPOINT_FAILED", `checkpoint worker failed: ${event.message}`));
      };
      worker.postMessage(request);
    });
  }
}

/** Make a snapshot image received from the leader durable; its SHA-256. */
export async function sealReceivedImage(path: string): Promise<string> {
  const reply = await runSnapshotWorker({ kind: "seal", path }, {
    what: "could not flush a received snapshot",
    hint: "check free disk space and permissions under the data directory; the leader sends the snapshot again",
  });
  if (reply.sha256 === null) throw new SvcError("SNAPSHOT_FAILED", "the snapshot worker returned no checksum");
  return reply.sha256;
}

function runSnapshotWorker(
  request: SnapshotWorkerRequest,
  failure: { what: string; hint: string },
): Promise<Extract<SnapshotWorkerReply, { ok: true }>> {
  const worker = new Worker(workerSpecifier(import.meta.url, "store/snapshot-worker.ts"));
  return new Promise((resolve, reject) => {
    worker.onmessage = (event: MessageEvent<SnapshotWorkerReply>) => {
      worker.terminate();
      const reply = event.data;
      if (reply.ok) resolve(reply);
      else reject(new SvcError("SNAPSHOT_FAILED", `${failure.what}: ${reply.message}`, { hint: failure.hint }));
    };
    worker.onerror = (event) => {
      worker.terminate();
      reject(new SvcError("SNAPSHOT_FAILED", `snapshot worker failed: ${event.message}`));
    };
    worker.postMessage(request);
  });
}
