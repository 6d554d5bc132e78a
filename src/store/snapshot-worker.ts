// Runs in a Worker, so that snapshot files of any size never stall the thread that applies
// writes. Two jobs:
//   image: copy the store into a snapshot image with VACUUM INTO on its own read-only
//          connection. The image is a consistent read of the store and carries its own
//          applied index, term and membership in the meta table.
//   seal:  a snapshot image received whole from the leader.
//   stage: copy a received snapshot's image to where it waits to become the store, so that
//          installing it is a rename (see Store.installImage).
//   checkpoint: make the store durable up to the index it had applied when the job began:
//          copy its SQLite WAL into the file (wal_checkpoint, which syncs both) and flush
//          both files. Costs what changed since the last one, not the store's size.
// The file written is then flushed gradually (see _writeback.ts); images are hashed here,
// while they are still in the page cache.

import { Database } from "bun:sqlite";
import * as fs from "node:fs";
import { dirname } from "node:path";
import { fsyncPath } from "../io/durable-file.ts";
import { sha256FileSync } from "../io/file-hash.ts";
import { fsyncGradually } from "../io/writeback.ts";

declare const self: Worker;

export type SnapshotWorkerRequest =
  | { kind: "image"; storePath: string; imagePath: string }
  | { kind: "seal"; path: string }
  | { kind: "stage"; imagePath: string; stagedPath: string }
  | { kind: "checkpoint"; storePath: string };

/** What an image's meta table says; null for a sealed file. */
export interface ImageMetaReply {
  appliedIndex: number;
  appliedTerm: number;
  membership: string;
  clusterId: string;
}

export type SnapshotWorkerReply =
  | { ok: true; sha256: string | null; image: ImageMetaReply | null }
  | { ok: false; message: string };

self.onmessage = (event: MessageEvent<SnapshotWorkerRequest>) => {
  const request = event.data;
  let reply: SnapshotWorkerReply;
  try {
    if (request.kind === "seal") {
      fsyncGradually(request.path);
      reply = { ok: true, sha256: sha256FileSync(request.path), image: null };
    } else if (request.kind === "checkpoint") {
      reply = { ok: true, sha256: null, image: checkpoint(request.storePath) };
    } else if (request.kind === "stage") {
      // Whole and durable under its final name, or not there at all.
      const tmp = `${request.stagedPath}.tmp`;
      fs.copyFileSync(request.imagePath, tmp);
      fsyncGradually(tmp);
      fs.renameSync(tmp, request.stagedPath);
      fsyncPath(dirname(request.stagedPath));
      reply = { ok: true, sha256: null, image: null };
    } else {
      const source = new Database(request.storePath, { readonly: true });
      try {
        source.run("VACUUM INTO ?", [request.imagePath]);
      } finally {
        source.close();
      }
      fsyncGradually(request.imagePath);
      const sha256 = sha256FileSync(request.imagePath);
      reply = { ok: true, sha256, image: readImageMeta(request.imagePath) };
    }
  } catch (e) {
    reply = { ok: false, message: e instanceof Error ? e.message : String(e) };
  }
  postMessage(reply);
};

/** The store's applied state as of the job's start, durable when this returns. */
function checkpoint(storePath: string): ImageMetaReply {
  // A connection of its own for each checkpoint: it holds nothing open between them, so the
  // store can be closed, replaced or removed at any time.
  const db = new Database(storePath);
  try {
    db.run("PRAGMA busy_timeout = 1000");
    db.run("PRAGMA synchronous = NORMAL");
    db.run("PRAGMA wal_autocheckpoint = 0");
    const applied = readMetaOf(db);
    // PASSIVE never blocks the applying connection. Frames it cannot copy yet (a reader holds
    // them) stay in the SQLite WAL, which it synced first; the flushes below cover both files.
    db.run("PRAGMA wal_checkpoint(PASSIVE)");
    fsyncPath(storePath);
    if (fs.existsSync(`${storePath}-wal`)) fsyncPath(`${storePath}-wal`);
    if (process.env[syncedCopyEnv] === "1") keepSyncedCopy(storePath);
    return applied;
  } finally {
    db.close();
  }
}

/**
 * Tests only: what a power loss right now could leave of the store — its files as of this
 * checkpoint's sync — kept beside it as `<file>.synced`, for a test to put in place after
 * killing the node. (The applying connection never writes the main file, so it is stable here;
 * a WAL copied mid-append ends in a torn frame, which SQLite's recovery drops, as a disk would.)
 */
const syncedCopyEnv = "SVC_TEST_KEEP_SYNCED_STORE";

function keepSyncedCopy(storePath: string): void {
  for (const suffix of ["", "-wal"]) {
    const from = storePath + suffix;
    const to = `${from}.synced`;
    if (fs.existsSync(from)) fs.copyFileSync(from, to);
    else fs.rmSync(to, { force: true });
  }
}

function readMetaOf(db: Database): ImageMetaReply {
  const rows = db.query("SELECT key, value FROM _svc_meta").all() as { key: string; value: unknown }[];
  const meta = new Map(rows.map((r) => [r.key, r.value]));
  return {
    appliedIndex: Number(meta.get("applied_index") ?? 0),
    appliedTerm: Number(meta.get("applied_term") ?? 0),
    membership: String(meta.get("membership") ?? '{"voters":[],"learners":[]}'),
    clusterId: String(meta.get("cluster_id") ?? ""),
  };
}

function readImageMeta(imagePath: string): ImageMetaReply {
  const image = new Database(imagePath, { readonly: true });
  try {
    return readMetaOf(image);
  } finally {
    image.close();
  }
}
