// wal-repair --skip-corrupted: rebuild a stopped node's WAL from every intact record.
//
// Never worse than before: every intact entry after the newest valid snapshot is kept,
// damage at or below that snapshot loses nothing (the snapshot holds those entries' effect),
// and the repaired WAL always continues from the snapshot, so the node starts. Only damage
// above the snapshot loses entries: the log is cut at the first missing index; the intact
// entries after that gap are set aside (they cannot be applied without the missing ones) in
// the quarantine directory, which also keeps the whole old WAL. The indexes lost and set
// aside are reported, and recorded in raft/ENTRIES_LOST, which the node reports at every
// start until a snapshot covers them (a cluster member gets them back from the leader).
//
// The new WAL is built beside the old one (raft/wal.repair-tmp) and swapped in by two
// renames; a crash in between is finished by running the repair again.

import * as fs from "node:fs";
import { dirname, join } from "node:path";
import type { Entry } from "../util/log-data.ts";
import { fsyncDir, writeFileAtomic } from "../io/durable-file.ts";
import { silentLogger } from "../util/logger.ts";
import { readWholeFile, scanSegmentSkippingDamage } from "./_segment.ts";
import { markLostLog } from "./file-log-store.ts";
import { checkSegmentNames, listSegments, Wal } from "./wal.ts";

export interface IndexRange {
  from: number;
  to: number;
}

export interface RepairDamage {
  file: string;
  offset: number;
  reason: string;
  /** Index of the last good entry before the damage in that file, 0 when none. */
  lastGoodIndex: number;
  /** A sound record the log cannot hold (a stale copy of an entry): found by replaying, not by reading the record. */
  staleCopy?: true;
}

export interface RepairReport {
  /** The first damage found; null when the WAL is intact (nothing is changed then). */
  damage: RepairDamage | null;
  damages: RepairDamage[];
  /** The newest valid snapshot's index the repair counted on (0: none). */
  snapshotIndex: number;
  /** Entries in the repaired WAL, null when it holds none. */
  kept: IndexRange | null;
  /** Indexes above the snapshot whose records are damaged or missing: lost on this node. */
  lost: IndexRange[];
  /** Intact entries after the first lost index: not in the repaired WAL, kept in the quarantine directory. */
  setAside: IndexRange | null;
  /** Damaged records whose entries the snapshot covers: dropped, nothing lost. */
  coveredBySnapshot: boolean;
  /** The highest term of any intact record (0: none): what a rebuilt hard state starts from. */
  maxTerm: number;
  /** The old WAL's segment files, moved into quarantineDir. */
  quarantined: string[];
  quarantineDir: string | null;
}

export const entriesLostFile = "ENTRIES_LOST";

/** What raft/ENTRIES_LOST records. */
export interface EntriesLostRecord {
  lost: IndexRange[];
  setAside: IndexRange | null;
  snapshotIndex: number;
  quarantineDir: string | null;
  atIso: string;
}

export function repairWal(walDir: string, options: { dryRun: boolean; snapshotIndex?: number }): RepairReport {
  const snapshotIndex = options.snapshotIndex ?? 0;
  const tmpDir = `${walDir}.repair-tmp`;
  if (!options.dryRun) finishInterruptedSwap(walDir, tmpDir);
  const plan = planRepair(walDir, snapshotIndex);
  const first = plan.damages[0] ?? null;
  const lossless = plan.lost.length === 0 && plan.setAside === null;
  const report: RepairReport = {
    damage: first,
    damages: plan.damages,
    snapshotIndex,
    kept: plan.kept.length === 0 ? null : { from: plan.kept[0]?.index ?? 0, to: plan.kept.at(-1)?.index ?? 0 },
    lost: plan.lost,
    setAside: plan.setAside,
    coveredBySnapshot: plan.damages.length > 0 && lossless,
    maxTerm: plan.maxTerm,
    quarantined: plan.segmentPaths,
    quarantineDir: null,
  };
  if (plan.damages.length === 0 && !plan.gapFound) return report;
  const raftDir = dirname(walDir);
  const quarantineDir = join(raftDir, `wal-corrupt-${new Date().toISOString().replace(/[:.]/g, "-")}`);
  report.quarantineDir = quarantineDir;
  if (options.dryRun) return report;

  fs.rmSync(tmpDir, { recursive: true, force: true });
  const { wal } = Wal.open(tmpDir, { segmentSizeBytes: plan.segmentSizeBytes, logger: silentLogger });
  const firstKept = plan.kept[0]?.index ?? snapshotIndex + 1;
  if (firstKept > 1 || plan.kept.length > 0) wal.resetTo(firstKept);
  for (let i = 0; i < plan.kept.length; i += 1024) wal.append(plan.kept.slice(i, i + 1024));
  wal.sync();
  wal.close();
  fsyncDir(tmpDir);
  if (!lossless) {
    // Recorded before the swap: a node must never start on the cut log without knowing.
    const record: EntriesLostRecord = { lost: plan.lost, setAside: plan.setAside, snapshotIndex, quarantineDir, atIso: new Date().toISOString() };
    writeFileAtomic(join(raftDir, entriesLostFile), `${JSON.stringify(record)}\n`);
    // A member that lost entries it may have acknowledged must not vote until a leader has
    // caught it up (the same gate as a cleared WAL); a lone node ignores the mark.
    markLostLog(raftDir, true);
  }
  fs.renameSync(walDir, quarantineDir);
  fs.renameSync(tmpDir, walDir);
  fsyncDir(raftDir);
  return report;
}

/** The entries lost by an earlier repair, or null when none are recorded. */
export function readEntriesLost(raftDir: string): EntriesLostRecord | null {
  const path = join(raftDir, entriesLostFile);
  if (!fs.existsSync(path)) return null;
  try {
    return JSON.parse(fs.readFileSync(path, "utf8")) as EntriesLostRecord;
  } catch {
    return { lost: [], setAside: null, snapshotIndex: 0, quarantineDir: null, atIso: "unknown (unreadable record)" };
  }
}

export function clearEntriesLost(raftDir: string): void {
  fs.rmSync(join(raftDir, entriesLostFile), { force: true });
  fsyncDir(raftDir);
}

/** The highest index a lost-entries record names; a snapshot at or past it covers the loss. */
export function highestLostIndex(record: EntriesLostRecord): number {
  let highest = record.setAside?.to ?? 0;
  for (const r of record.lost) highest = Math.max(highest, r.to);
  return highest;
}

export function formatRanges(ranges: readonly IndexRange[]): string {
  return ranges.map((r) => (r.from === r.to ? `${r.from}` : `${r.from}..${r.to}`)).join(", ");
}

interface RepairPlan {
  damages: RepairDamage[];
  kept: Entry[];
  lost: IndexRange[];
  setAside: IndexRange | null;
  /** The log jumps over indexes above the snapshot (with or without damaged records). */
  gapFound: boolean;
  segmentPaths: string[];
  segmentSizeBytes: number;
  maxTerm: number;
}

/**
 * Replay every intact record as the WAL does (a later record for an index replaces it and
 * what follows), ignoring what the snapshot covers, and stop at the first missing index
 * above it: what comes after is set aside.
 */
function planRepair(walDir: string, snapshotIndex: number): RepairPlan {
  const segments = listSegments(walDir);
  // A copy named as a segment would be taken for a rewrite, and the log cut back to it.
  checkSegmentNames(segments);
  const damages: RepairDamage[] = [];
  const kept: Entry[] = [];
  const lost: IndexRange[] = [];
  let setAside: IndexRange | null = null;
  let segmentSizeBytes = 1024 * 1024;
  let maxTerm = 0;
  for (const segment of segments) {
    const buf = readWholeFile(segment.path);
    segmentSizeBytes = Math.max(segmentSizeBytes, buf.length);
    const scan = scanSegmentSkippingDamage(buf);
    for (const d of scan.damages) damages.push({ file: segment.path, offset: d.offset, reason: d.reason, lastGoodIndex: d.afterIndex });
    for (const [k, entry] of scan.entries.entries()) {
      maxTerm = Math.max(maxTerm, entry.term);
      if (setAside !== null) {
        setAside = { from: Math.min(setAside.from, entry.index), to: Math.max(setAside.to, entry.index) };
        continue;
      }
      if (entry.index <= snapshotIndex) continue;
      const next = (kept.at(-1)?.index ?? snapshotIndex) + 1;
      // A later record with the entry's own term is a stale copy (the log rewrites an index only
      // with another term), not a rewrite: it is damage, and what follows it stays (see ReplayLog).
      const startsOver = k === 0 && entry.index === segment.firstIndex;
      if (entry.index < next && !startsOver && kept[entry.index - (snapshotIndex + 1)]?.term === entry.term) {
        damages.push({ file: segment.path, offset: scan.offsets[k] ?? 0, reason: `a stale copy of entry ${entry.index} (a second record with its own term)`, lastGoodIndex: kept.at(-1)?.index ?? 0, staleCopy: true });
        continue;
      }
      if (entry.index < next) {
        kept.length = entry.index - (snapshotIndex + 1);
        kept.push(entry);
      } else if (entry.index === next) {
        kept.push(entry);
      } else {
        lost.push({ from: next, to: entry.index - 1 });
        setAside = { from: entry.index, to: entry.index };
      }
    }
  }
  // Damage at the very end of the WAL with nothing valid after it hides an unknown number of
  // entries after the last one read (a torn write at the end is the usual case, and a node
  // cuts it on start all the same).
  return {
    damages, kept, lost, setAside, gapFound: lost.length > 0,
    segmentPaths: segments.map((s) => s.path), segmentSizeBytes, maxTerm,
  };
}

function finishInterruptedSwap(walDir: string, tmpDir: string): void {
  if (fs.existsSync(walDir) || !fs.existsSync(tmpDir)) return;
  fs.renameSync(tmpDir, walDir);
  fsyncDir(dirname(walDir));
}
