// Runs in a Worker: copies the store into a snapshot image with VACUUM INTO on its own
// read-only connection, so taking a snapshot never stalls the thread that applies
// writes. The image is a consistent read of the store, and it carries its own applied
// index, term and membership in the meta table.

import { Database } from "bun:sqlite";
import { sha256FileSync } from "../storage/_hash.ts";
import { fsyncGradually } from "../storage/_writeback.ts";

declare const self: Worker;

export interface SnapshotImageRequest {
  storePath: string;
  imagePath: string;
}

export type SnapshotImageReply =
  | { ok: true; appliedIndex: number; appliedTerm: number; membership: string; clusterId: string; stateSha256: string }
  | { ok: false; message: string };

self.onmessage = (event: MessageEvent<SnapshotImageRequest>) => {
  const { storePath, imagePath } = event.data;
  let reply: SnapshotImageReply;
  try {
    const source = new Database(storePath, { readonly: true });
    try {
      source.run("VACUUM INTO ?", [imagePath]);
    } finally {
      source.close();
    }
    // Flushed here, off the main thread, and gradually: see _writeback.ts.
    fsyncGradually(imagePath);
    // Hashed here too, while the image is still in the page cache: on the main thread a
    // large image's hashing took CPU from the writes it serves.
    const stateSha256 = sha256FileSync(imagePath);
    const image = new Database(imagePath, { readonly: true });
    try {
      const rows = image.query("SELECT key, value FROM _svc_meta").all() as { key: string; value: unknown }[];
      const meta = new Map(rows.map((r) => [r.key, r.value]));
      reply = {
        ok: true,
        appliedIndex: Number(meta.get("applied_index") ?? 0),
        appliedTerm: Number(meta.get("applied_term") ?? 0),
        membership: String(meta.get("membership") ?? '{"voters":[],"learners":[]}'),
        clusterId: String(meta.get("cluster_id") ?? ""),
        stateSha256,
      };
    } finally {
      image.close();
    }
  } catch (e) {
    reply = { ok: false, message: e instanceof Error ? e.message : String(e) };
  }
  postMessage(reply);
};
