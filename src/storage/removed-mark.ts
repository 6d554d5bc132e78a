// raft/REMOVED: a member told this node that a configuration committed after every one this
// node holds leaves it out (RaftCore.handleNotMember): it was removed from the cluster while cut
// off, and its own log will never say so (no leader replicates to it). Kept across restarts so
// that a restarted node goes on saying it was removed instead of campaigning again in silence.
// One line of JSON with a CRC-32 of the same object without it; replaced atomically.

import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { readJsonRecord } from "./_json-record.ts";
import { fsyncDir, writeFileAtomic } from "../io/durable-file.ts";

export const removedMarkFile = "REMOVED";
const removedMarkFormat = 1;

export interface RemovedMark {
  /** The committed configuration's index the member named. */
  readonly configIndex: number;
  /** The member that said so. */
  readonly by: string;
  readonly clusterId: string;
}

export type RemovedMarkRead =
  | { kind: "none" }
  | { kind: "ok"; mark: RemovedMark }
  | { kind: "damaged"; reason: string };

export function removedMarkPath(raftDir: string): string {
  return join(raftDir, removedMarkFile);
}

function body(mark: RemovedMark): string {
  return JSON.stringify({ format: removedMarkFormat, configIndex: mark.configIndex, by: mark.by, clusterId: mark.clusterId });
}

/** Record the mark (null: remove it), durably: write a temp file, fsync, rename, fsync the directory. */
export function writeRemovedMark(raftDir: string, mark: RemovedMark | null): void {
  const path = removedMarkPath(raftDir);
  if (mark !== null) {
    const text = body(mark);
    writeFileAtomic(path, `${text.slice(0, -1)},"crc32":${Bun.hash.crc32(text) >>> 0}}\n`);
  } else if (existsSync(path)) {
    rmSync(path, { force: true });
    fsyncDir(raftDir);
  }
}

/** What raft/REMOVED holds; a file that cannot be read, fails its CRC or holds impossible fields is `damaged`, with why. */
export function inspectRemovedMark(raftDir: string): RemovedMarkRead {
  const read = readJsonRecord(removedMarkPath(raftDir), "a removal record");
  if (read.kind !== "object") return read;
  const v = read.value;
  const p = v as Partial<Record<"format" | "configIndex" | "by" | "clusterId" | "crc32", unknown>>;
  if (p.format !== removedMarkFormat) return { kind: "damaged", reason: `unsupported format ${JSON.stringify(p.format)}` };
  const index = p.configIndex;
  if (typeof index !== "number" || !Number.isSafeInteger(index) || index < 1 || typeof p.by !== "string" || p.by === "" || typeof p.clusterId !== "string") {
    return { kind: "damaged", reason: "missing fields, or a configuration index that is not a whole number from 1 to 2^53" };
  }
  const mark = { configIndex: index, by: p.by, clusterId: p.clusterId };
  if (p.crc32 !== Bun.hash.crc32(body(mark)) >>> 0) return { kind: "damaged", reason: "its CRC does not match its contents" };
  return { kind: "ok", mark };
}
