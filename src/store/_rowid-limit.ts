// A row SQLite cannot number. A table whose AUTOINCREMENT sequence is at 9223372036854775807
// (or, without AUTOINCREMENT, whose random picks of a free rowid all collide) has no next one,
// and SQLite refuses the insert with SQLITE_FULL, "database or disk is full", although no disk
// is. It may roll back the connection's whole open transaction with the statement (Store
// handles that), not just the statement.
//
// The same code comes from a disk that is really full, when SQLite writes mid-statement (a
// page cache spilling, a temporary file). The two are told apart by the room left on the
// store's file system: SQLite writes only what a statement needs, so a write refused for want
// of space leaves less than a statement's worth free (and svc counts its disk as full well
// before, at diskReserveBytes). With room left, it is the row, the same on every node: a
// statement error. Without, it is the disk: the apply waits for space (disk-guard.ts), and
// tries again.

import { dirname } from "node:path";
import { freeBytes } from "../io/disk-space.ts";

/** What a statement that needed a rowid none is left for fails with (the same on every node). */
export const rowidsUsedUpMessage =
  "no rowid is left for a new row: the table's rowids reached 9223372036854775807, the largest there is " +
  "(SQLite says \"database or disk is full\"; no disk is). Give new rows an explicit rowid or INTEGER PRIMARY KEY " +
  "value, or delete the row that holds the largest one (for an AUTOINCREMENT table, also lower its seq in sqlite_sequence)";

/** Free space past which SQLITE_FULL from a statement is the row, not the disk. */
const roomBytesMin = 64 * 1024 * 1024;

/**
 * Whether a statement's error is SQLite's answer to a row it cannot number: SQLITE_FULL with
 * room left on the file system of `storePath` (null: a store in memory, which has no disk).
 */
export function isRowidsUsedUp(e: unknown, storePath: string | null): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  const full = code === "SQLITE_FULL" || (e instanceof Error && /database or disk is full/.test(e.message));
  if (!full) return false;
  if (storePath === null) return true;
  const free = freeBytes(dirname(storePath));
  return free !== null && free >= roomBytesMin;
}
