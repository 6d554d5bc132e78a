// The start of a history restored from a backup (a full backup's raft/RESTORED, a point-in-time
// replay, a lone node whose raft/ was removed): what a restore reads of the data it restores, and
// the entries it writes after it. A backup's image is taken while writes are paused (SPEC §4.4),
// so the restored data holds that pause; the restored cluster must not keep it. The resume is an
// entry of the restored log, committed before the node starts, so every member applies the same
// one and images made later carry it: the replicated state never differs between members.

import { Database } from "bun:sqlite";
import type { Entry } from "../util/log-data.ts";
import { internalTablePrefix } from "./_sql.ts";
import { decodeCommand, encodeCommand, type Command } from "./command.ts";

/** A write pause held in the data: `untilMs` its lease's end (ms since the epoch), 0 for none. */
export interface HeldPause {
  readonly untilMs: number;
}

/**
 * The write pause a store image (a snapshot's state.db) holds; null when it holds none, or when
 * the file is no store this version reads (the node refuses such an image when it loads it).
 */
export function imageWritesPause(imagePath: string): HeldPause | null {
  let db: Database | null = null;
  try {
    db = new Database(imagePath, { readonly: true });
    const rows = db.query(`SELECT key, value FROM ${internalTablePrefix}meta WHERE key IN ('writes_paused', 'writes_paused_until_ms')`).all() as { key: string; value: unknown }[];
    const meta = new Map(rows.map((r) => [r.key, Number(r.value)]));
    if (meta.get("writes_paused") !== 1) return null;
    return { untilMs: meta.get("writes_paused_until_ms") ?? 0 };
  } catch {
    return null;
  } finally {
    db?.close();
  }
}

const pausePrefix = new TextEncoder().encode('{"op":"pause_writes"');
const resumePrefix = new TextEncoder().encode('{"op":"resume_writes"');

function startsWith(data: Uint8Array, prefix: Uint8Array): boolean {
  if (data.length < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (data[i] !== prefix[i]) return false;
  return true;
}

/**
 * The pause an entry sets: its lease for pause_writes, null for resume_writes, undefined for any
 * other entry. Only the two commands' first bytes are compared before decoding: a replay reads
 * millions of entries.
 */
export function pauseSetBy(e: Entry): HeldPause | null | undefined {
  if (e.kind !== "normal" || !(startsWith(e.data, pausePrefix) || startsWith(e.data, resumePrefix))) return undefined;
  const command = decodeCommand(e.data);
  if (command?.op === "pause_writes") return { untilMs: command.untilMs ?? 0 };
  if (command?.op === "resume_writes") return null;
  return undefined;
}

/** An entry the restore itself writes into the restored log (committed before the node starts). */
export function restoreEntry(command: Command, index: number, term: number, timestampMs: number): Entry {
  return { term, index, kind: "normal", timestampMs, data: encodeCommand(command) };
}

/** The line a restore logs once when it resumes a pause held in the data it restores. */
export function backupPauseResumedText(pause: HeldPause, where: "backup" | "target"): string {
  const lease = pause.untilMs > 0 ? ` (a pause for the backup, with a lease until ${new Date(pause.untilMs).toISOString()})` : " (a pause with no lease)";
  const when = where === "backup" ? "when the backup was taken" : "at the target time, as a backup pauses them";
  return `writes had been paused ${when}${lease}; they are resumed: the restored log holds resume_writes, so the restored cluster takes writes`;
}
