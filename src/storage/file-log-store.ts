// The production LogStore: WAL segments under raft/wal/, the hard state in raft/hardstate
// (replaced atomically), and raft/LOST_LOG while a member that lost entries it held waits to
// catch up. Segment removals are made durable off the main thread (a directory fsync waits
// for the file system's journal).

import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { readJsonRecord } from "./_json-record.ts";
import type { Entry } from "../util/log-data.ts";
import type { CheckpointRecord, HardStateRecord, LogStore, LogStoreStats, RemovedRecord } from "../io/log-store.ts";
import { fsyncDir, fsyncPathAsync, writeFileAtomic, writeFileAtomicAsync } from "../io/durable-file.ts";
import { writeHardState } from "./hardstate.ts";
import { ensureMemberMark } from "./member-mark.ts";
import { writeRemovedMark } from "./removed-mark.ts";
import type { DataPaths } from "./paths.ts";
import type { Wal } from "./wal.ts";
import { WalReader } from "./wal-reader.ts";

const lostLogFile = "LOST_LOG";
const checkpointFile = "checkpoint";

/** Sequential readers kept at once (one per member being caught up); the oldest goes first. */
const readersMax = 16;

export class FileLogStore implements LogStore<Entry> {
  private readonly readers = new Map<string, WalReader>();

  constructor(readonly wal: Wal, private readonly paths: DataPaths) {}

  get lastIndex(): number {
    return this.wal.lastIndex;
  }

  append(entries: readonly Entry[]): void {
    this.wal.append(entries);
  }

  sync(): Promise<void> {
    return this.wal.syncAsync();
  }

  syncNow(): void {
    this.wal.sync();
  }

  saveHardState(state: HardStateRecord): void {
    writeHardState(this.paths.hardStatePath, state);
    // The first hard state with a cluster id (a node that joined): the data directory now belongs to one.
    if (state.clusterId !== "" && state.clusterId !== this.memberMarkedAs) {
      ensureMemberMark(this.paths.dataDir, state.clusterId);
      this.memberMarkedAs = state.clusterId;
    }
  }

  /** The cluster <data_dir>/MEMBER is known to name (member-mark.ts). */
  private memberMarkedAs = "";

  resetTo(nextIndex: number): void {
    this.wal.resetTo(nextIndex);
  }

  async compact(index: number): Promise<number> {
    const removed = this.wal.removeSegmentsCoveredBy(index, undefined, { syncDir: false });
    if (removed.length > 0) await fsyncPathAsync(this.paths.walDir);
    return removed.length;
  }

  readCommitted(reader: string, from: number, through: number, bytesMax: number): Promise<Entry[] | null> {
    let cursor = this.readers.get(reader);
    if (cursor === undefined) {
      if (this.readers.size >= readersMax) this.readers.delete(this.readers.keys().next().value!);
      cursor = new WalReader(this.wal);
      this.readers.set(reader, cursor);
    }
    return cursor.read(from, through, bytesMax);
  }

  saveCheckpoint(checkpoint: CheckpointRecord): Promise<void> {
    return writeFileAtomicAsync(join(this.paths.raftDir, checkpointFile), checkpointText(checkpoint));
  }

  setLostLog(lost: boolean): void {
    markLostLog(this.paths.raftDir, lost);
  }

  setRemoved(mark: RemovedRecord | null): void {
    writeRemovedMark(this.paths.raftDir, mark);
  }

  stats(): LogStoreStats {
    const segments = this.wal.segments();
    return {
      segmentCount: segments.length,
      sizeBytes: segments.reduce((sum, s) => sum + s.sizeBytes, 0),
      firstIndex: segments[0]?.firstIndex ?? 0,
    };
  }

  close(): void {
    this.wal.close();
  }
}

/**
 * raft/LOST_LOG records, across restarts, that the node lost log entries and must not vote
 * or campaign until a leader has confirmed it caught up.
 */
export function markLostLog(raftDir: string, lost: boolean): void {
  const path = join(raftDir, lostLogFile);
  if (lost) writeFileAtomic(path, `log entries lost at ${new Date().toISOString()}; no votes until caught up with a leader\n`);
  else if (existsSync(path)) {
    rmSync(path, { force: true });
    fsyncDir(raftDir);
  }
}

export function hasLostLog(raftDir: string): boolean {
  return existsSync(join(raftDir, lostLogFile));
}

/**
 * raft/checkpoint: the store was made durable up to this index, in this cluster. It vouches
 * for the store at start: a store behind it lost durable writes (damaged), and a store with
 * no checkpoint and no hard state beside it is not this log's (SPEC §4.5 clears raft/).
 *
 * One line of JSON, so that an older version still reads it: `format` 2 adds `crc32`, the
 * CRC-32 of the same object without it (format 1, written before, has neither and is still read).
 */
export function writeCheckpoint(raftDir: string, checkpoint: CheckpointRecord): void {
  writeFileAtomic(join(raftDir, checkpointFile), checkpointText(checkpoint));
}

const checkpointFormat = 2;

function checkpointBody(checkpoint: CheckpointRecord): string {
  return JSON.stringify({ format: checkpointFormat, index: checkpoint.index, term: checkpoint.term, clusterId: checkpoint.clusterId });
}

function checkpointText(checkpoint: CheckpointRecord): string {
  const body = checkpointBody(checkpoint);
  return `${body.slice(0, -1)},"crc32":${Bun.hash.crc32(body) >>> 0}}\n`;
}

export function checkpointPath(raftDir: string): string {
  return join(raftDir, checkpointFile);
}

/**
 * What raft/checkpoint holds. `checksummed`: its CRC matched (false for one written before the
 * CRC was added: nothing then tells a changed digit from the truth). A file that cannot be
 * read, fails its CRC or holds impossible fields is `damaged`, with why.
 */
export type CheckpointRead =
  | { kind: "none" }
  | { kind: "ok"; checkpoint: CheckpointRecord; checksummed: boolean }
  | { kind: "damaged"; reason: string };

export function inspectCheckpoint(raftDir: string): CheckpointRead {
  const read = readJsonRecord(checkpointPath(raftDir), "a checkpoint object");
  if (read.kind !== "object") return read;
  const v = read.value;
  const p = v as Partial<Record<"format" | "index" | "term" | "clusterId" | "crc32", unknown>>;
  const isIndex = (x: unknown): x is number => typeof x === "number" && Number.isSafeInteger(x) && x >= 0;
  if (!isIndex(p.index) || !isIndex(p.term) || typeof p.clusterId !== "string") {
    return { kind: "damaged", reason: "missing fields, or an index or term that is not a whole number from 0 to 2^53" };
  }
  const checkpoint = { index: p.index, term: p.term, clusterId: p.clusterId };
  if (p.format === undefined && p.crc32 === undefined) return { kind: "ok", checkpoint, checksummed: false };
  if (p.format !== checkpointFormat) return { kind: "damaged", reason: `unsupported format ${JSON.stringify(p.format)}` };
  if (p.crc32 !== Bun.hash.crc32(checkpointBody(checkpoint)) >>> 0) return { kind: "damaged", reason: "its CRC does not match its contents" };
  return { kind: "ok", checkpoint, checksummed: true };
}

/** The recorded checkpoint, or null when there is none or it is damaged (then nothing vouches for the store). */
export function readCheckpoint(raftDir: string): CheckpointRecord | null {
  const read = inspectCheckpoint(raftDir);
  return read.kind === "ok" ? read.checkpoint : null;
}
