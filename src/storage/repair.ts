// wal-repair --skip-corrupted: cut the log at its first damaged record. Entries after the
// damage cannot be applied without the damaged one, so they are cut too; nothing is deleted:
// the cut segments are moved into raft/wal-corrupt-<time>/ for inspection. On a cluster node
// the cut entries come back from the leader; on a lone node they are lost.

import * as fs from "node:fs";
import { join } from "node:path";
import { fsyncDir } from "../io/durable-file.ts";
import { nonZeroEndBytes, readSegment } from "./_segment.ts";
import { listSegments } from "./wal.ts";

export interface RepairReport {
  /** null when no damage was found. */
  damage: { file: string; offset: number; reason: string; lastGoodIndex: number } | null;
  /** Segment files moved aside whole, and the copy of the cut segment. */
  quarantined: string[];
  quarantineDir: string | null;
}

export function repairWal(walDir: string, options: { dryRun: boolean }): RepairReport {
  const segments = listSegments(walDir);
  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i];
    if (segment === undefined) continue;
    const scan = readSegment(segment.path);
    if (scan.damage === null) continue;
    const later = segments.slice(i + 1);
    const damage = { file: segment.path, offset: scan.damage.offset, reason: scan.damage.reason, lastGoodIndex: scan.damage.afterIndex };
    const quarantineDir = join(walDir, "..", `wal-corrupt-${new Date().toISOString().replace(/[:.]/g, "-")}`);
    const quarantined = [segment.path, ...later.map((s) => s.path)];
    if (options.dryRun) return { damage, quarantined, quarantineDir };
    fs.mkdirSync(quarantineDir, { recursive: true, mode: 0o750 });
    fs.copyFileSync(segment.path, join(quarantineDir, segment.name));
    for (const s of later) fs.renameSync(s.path, join(quarantineDir, s.name));
    zeroFrom(segment.path, scan.damage.offset);
    fsyncDir(quarantineDir);
    fsyncDir(walDir);
    return { damage, quarantined, quarantineDir };
  }
  return { damage: null, quarantined: [], quarantineDir: null };
}

function zeroFrom(path: string, offset: number): void {
  const buf = new Uint8Array(fs.readFileSync(path));
  const end = nonZeroEndBytes(buf);
  const fd = fs.openSync(path, "r+");
  try {
    if (end > offset) fs.writeSync(fd, new Uint8Array(end - offset), 0, end - offset, offset);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
