// The production LogStore: WAL segments under raft/wal/, the hard state in raft/hardstate
// (replaced atomically), and raft/LOST_LOG while a member that lost entries it held waits to
// catch up. Segment removals are made durable off the main thread (a directory fsync waits
// for the file system's journal).

import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { Entry } from "../util/log-data.ts";
import type { CheckpointRecord, HardStateRecord, LogStore, LogStoreStats } from "../io/log-store.ts";
import { fsyncDir, fsyncPathAsync, writeFileAtomic, writeFileAtomicAsync } from "../io/durable-file.ts";
import { writeHardState } from "./hardstate.ts";
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
  }

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
 */
export function writeCheckpoint(raftDir: string, checkpoint: CheckpointRecord): void {
  writeFileAtomic(join(raftDir, checkpointFile), checkpointText(checkpoint));
}

function checkpointText(checkpoint: CheckpointRecord): string {
  return `${JSON.stringify({ index: checkpoint.index, term: checkpoint.term, clusterId: checkpoint.clusterId })}\n`;
}

/** The recorded checkpoint, or null when there is none or it cannot be read (then nothing vouches for the store). */
export function readCheckpoint(raftDir: string): CheckpointRecord | null {
  try {
    const parsed = JSON.parse(readFileSync(join(raftDir, checkpointFile), "utf8")) as Partial<CheckpointRecord>;
    if (typeof parsed.index !== "number" || typeof parsed.term !== "number" || typeof parsed.clusterId !== "string") return null;
    return { index: parsed.index, term: parsed.term, clusterId: parsed.clusterId };
  } catch {
    return null;
  }
}
