// Taking a snapshot image of the store off the main thread (see snapshot-worker.ts).

import { decodeMembership, emptyMembership, type Membership } from "../raft/types.ts";
import { SvcError } from "../util/errors.ts";
import { workerSpecifier } from "../util/worker.ts";
import type { SnapshotImageReply } from "./snapshot-worker.ts";

export interface SnapshotImage {
  appliedIndex: number;
  appliedTerm: number;
  membership: Membership;
  clusterId: string;
  /** SHA-256 of the image file, for its meta.json. */
  stateSha256: string;
}

export function createSnapshotImage(storePath: string, imagePath: string): Promise<SnapshotImage> {
  const worker = new Worker(workerSpecifier(import.meta.url, "store/snapshot-worker.ts"));
  return new Promise<SnapshotImage>((resolve, reject) => {
    worker.onmessage = (event: MessageEvent<SnapshotImageReply>) => {
      worker.terminate();
      const reply = event.data;
      if (!reply.ok) {
        reject(new SvcError("SNAPSHOT_FAILED", `could not copy the store into a snapshot: ${reply.message}`, {
          hint: "check free disk space and permissions under the data directory, then POST /admin/snapshot again",
        }));
        return;
      }
      resolve({
        appliedIndex: reply.appliedIndex,
        appliedTerm: reply.appliedTerm,
        membership: decodeMembership(new TextEncoder().encode(reply.membership)) ?? emptyMembership,
        clusterId: reply.clusterId,
        stateSha256: reply.stateSha256,
      });
    };
    worker.onerror = (event) => {
      worker.terminate();
      reject(new SvcError("SNAPSHOT_FAILED", `snapshot worker failed: ${event.message}`));
    };
    worker.postMessage({ storePath, imagePath });
  });
}
