// Snapshot backup (SPEC §4.4, online) in one run: take an image on this node and wait, hold
// it (raft/snapshots/<dir>/.hold, lapsing after the lease) while it is copied, copy it with
// metadata.json (cluster-info) to <to>/snapshot-<YYYYMMDDTHHMMSSZ>/, and make <to>/latest/ the
// same: its contents copied into raft/snapshots/ are a snapshot the node uses (SPEC §4.5 step 3).

import * as fs from "node:fs";
import { basename, join } from "node:path";
import { sha256File } from "../io/file-hash.ts";
import { readSnapshotMeta, snapshotHoldFile, snapshotMetaFile, snapshotStateFile } from "../storage/snapshots.ts";
import { SvcError } from "../util/errors.ts";
import { metadataName } from "./backup-archive.ts";
import { notCounted, type BackupNodeApi } from "./backup-full.ts";
import { ObjectStore, isObjectUrl } from "./s3.ts";

export interface SnapshotBackupResult {
  location: string;
  latest: string;
  snapshot: { index: number; term: number; dir: string };
  sizeBytes: number;
}

export function snapshotBackupName(nowMs: number): string {
  return `snapshot-${new Date(nowMs).toISOString().replace(/[-:]/g, "").replace(/\.\d{3}/, "")}`;
}

export async function snapshotBackup(
  api: Pick<BackupNodeApi, "clusterInfo" | "snapshotHere" | "totalEntries">,
  o: { to: string; holdMs: number; nowMs: number; progress: (step: string) => void },
): Promise<SnapshotBackupResult> {
  const info = await api.clusterInfo();
  o.progress("taking a snapshot");
  const image = await api.snapshotHere();
  const holdPath = join(image.dir, snapshotHoldFile);
  fs.writeFileSync(holdPath, `${new Date(Date.now() + o.holdMs).toISOString()}\n`);
  try {
    const meta = readSnapshotMeta(image.dir);
    if (meta === null || !fs.existsSync(join(image.dir, snapshotStateFile))) {
      throw new SvcError("BACKUP_FAILED", `the snapshot ${image.dir} was removed before it could be held`, { hint: "retry the backup" });
    }
    const name = snapshotBackupName(o.nowMs);
    const dirName = basename(image.dir);
    const files = [snapshotStateFile, snapshotMetaFile];
    // Counted after the image, with writes going on: total_entries_applied_index says where.
    const counted = await api.totalEntries().catch(() => notCounted);
    const metadata = `${JSON.stringify({ ...info, ...counted }, null, 2)}\n`;
    if (isObjectUrl(o.to)) {
      const store = ObjectStore.at(o.to);
      for (const prefix of [name, "latest"]) {
        o.progress(`uploading ${prefix}/`);
        if (prefix === "latest") for (const old of await store.list({ under: "latest/" })) await store.delete(old.name);
        for (const f of files) await store.upload(join(image.dir, f), `${prefix}/${dirName}/${f}`);
        await store.put(`${prefix}/${metadataName}`, metadata);
      }
    } else {
      const target = join(o.to, name);
      const latestTemp = join(o.to, `.latest-${process.pid}`);
      try {
        o.progress(`copying to ${target}`);
        copySnapshot(image.dir, join(target, dirName), files);
        fs.writeFileSync(join(target, metadataName), metadata);
        const sha = await sha256File(join(target, dirName, snapshotStateFile));
        if (sha !== meta.stateSha256) throw new SvcError("BACKUP_FAILED", `the copy of ${image.dir} does not match its SHA-256`, { hint: "check the backup disk; retry" });
        fs.rmSync(latestTemp, { recursive: true, force: true });
        copySnapshot(image.dir, join(latestTemp, dirName), files);
        fs.writeFileSync(join(latestTemp, metadataName), metadata);
      } catch (e) {
        // A copy cut short (a full disk) is no backup: none is left behind to be taken for one.
        for (const partial of [target, latestTemp]) {
          try {
            fs.rmSync(partial, { recursive: true, force: true });
          } catch {
            // A destination that refuses even this (read-only) keeps it; the error below says why.
          }
        }
        throw e;
      }
      fs.rmSync(join(o.to, "latest"), { recursive: true, force: true });
      fs.renameSync(latestTemp, join(o.to, "latest"));
    }
    return {
      location: isObjectUrl(o.to) ? `${o.to.replace(/\/$/, "")}/${name}` : join(o.to, name),
      latest: isObjectUrl(o.to) ? `${o.to.replace(/\/$/, "")}/latest` : join(o.to, "latest"),
      snapshot: { index: image.index, term: image.term, dir: image.dir },
      sizeBytes: meta.stateSizeBytes,
    };
  } finally {
    fs.rmSync(holdPath, { force: true });
  }
}

function copySnapshot(from: string, to: string, files: readonly string[]): void {
  fs.mkdirSync(to, { recursive: true });
  for (const f of files) copyGradually(join(from, f), join(to, f));
}

/** Bytes copied between two write-backs: the most of the copy a WAL sync can be made to wait for. */
const copyChunkBytes = 4 * 1024 * 1024;
/** A pause after each chunk's write-back leaves the disk to the WAL's syncs for a moment. */
const copyPauseMs = 4;

/**
 * Copy a file beside a running node without holding up its WAL: the copy is made durable a
 * chunk at a time (io/writeback.ts says why: on a virtual disk a WAL fdatasync waits for
 * everything written before it), so a gigabyte never sits dirty for one WAL sync to wait behind.
 */
function copyGradually(from: string, to: string): void {
  const input = fs.openSync(from, "r");
  const output = fs.openSync(to, "w", 0o640);
  try {
    const buffer = Buffer.allocUnsafe(copyChunkBytes);
    for (;;) {
      const n = fs.readSync(input, buffer, 0, buffer.length, null);
      if (n === 0) break;
      fs.writeSync(output, buffer, 0, n);
      fs.fdatasyncSync(output);
      Bun.sleepSync(copyPauseMs);
    }
  } finally {
    fs.closeSync(input);
    fs.closeSync(output);
  }
}
