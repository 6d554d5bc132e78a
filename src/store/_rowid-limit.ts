// A row SQLite cannot number. A table whose largest rowid is 9223372036854775807 has no next
// one: with AUTOINCREMENT SQLite refuses the insert, without it SQLite tries random rowids.
// It refuses with SQLITE_FULL, "database or disk is full", although no disk is: and it rolls
// back the connection's whole open transaction with the statement, not just the statement.
//
// The connections that apply writes and try them (Store, the write-check process) keep every
// change in memory until their commit (cache_spill off, temporary files in memory), so a
// statement of theirs never writes to disk: SQLITE_FULL from one is this, and alike on every
// node. It is a statement error, never a full disk (which would stop the node's applying until
// space is freed, on every node at once, for ever).

/** What a statement that needed a rowid none is left for fails with (the same on every node). */
export const rowidsUsedUpMessage =
  "no rowid is left for a new row: the table already holds rowid 9223372036854775807, the largest there is " +
  "(SQLite says \"database or disk is full\"; no disk is). Give new rows an explicit rowid or INTEGER PRIMARY KEY " +
  "value, or delete the row that holds the largest one (for an AUTOINCREMENT table, also lower its seq in sqlite_sequence)";

/** The pragmas that keep a connection's statements off the disk until its commit (see above). */
export const changesInMemoryPragmas = ["PRAGMA cache_spill = OFF", "PRAGMA temp_store = MEMORY"];

/** Whether a statement's error is SQLite's answer to a row it cannot number (on a connection set up with changesInMemoryPragmas). */
export function isRowidsUsedUp(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  if (code === "SQLITE_FULL") return true;
  return e instanceof Error && /database or disk is full/.test(e.message);
}
