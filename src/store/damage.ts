// A damaged store file: SQLite says SQLITE_CORRUPT or SQLITE_NOTADB. The store is derived data
// (the newest snapshot image plus the WAL rebuild it), so damage is never a client's error and
// never a reason to stop for good: the node marks the store (state.db-damaged), stops, and the
// next start moves the store's files aside, never deleting them, and rebuilds it.

import * as fs from "node:fs";
import { basename, dirname, join } from "node:path";
import { fsyncPath, writeFileAtomic } from "../io/durable-file.ts";
import { SvcError, errorMessage } from "../util/errors.ts";

/** Beside state.db while the store is known damaged: the next start sets it aside and rebuilds. */
export const damageMarkSuffix = "-damaged";

/** The store's own files, moved aside together (staged snapshot copies are not the store's). */
const storeFileSuffixes = ["", "-wal", "-shm", "-boot", damageMarkSuffix];

/** Whether SQLite (here, or in a SQL process whose message came back as text) found the file damaged. */
export function isStoreDamage(e: unknown): boolean {
  // SQLite's code alone decides, never a message: a trigger's RAISE(ABORT, 'database disk image
  // is malformed') has that very message (SQLITE_CONSTRAINT_TRIGGER), and so has any error that
  // quotes a name a client chose. Taken for damage, one such write would stop every node
  // applying it, again at every restart. (A SQL process sends the verdict, made from the code.)
  // SQLITE_CORRUPT_VTAB is a virtual table's own finding about its contents: an FTS5 index a
  // client's 'delete' command put out of step with its table, the same on every node. Taken
  // for damage, one such read stopped each node it reached, again after every rebuild. (At
  // apply it is damage after all: see isDamageAtApply.)
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === "string" && ((code.startsWith("SQLITE_CORRUPT") && !isVirtualTableCorrupt(e)) || code === "SQLITE_NOTADB");
}

/** A virtual table (FTS5, R-Tree) found its own contents broken: SQLITE_CORRUPT_VTAB. */
export function isVirtualTableCorrupt(e: unknown): boolean {
  return (e as { code?: unknown } | null)?.code === "SQLITE_CORRUPT_VTAB";
}

/**
 * Damage, as an entry's apply judges it. A store with a virtual table has every write tried on
 * the leader before it is logged, and one its virtual table refused there never is (the
 * write gate): a virtual table that finds its contents broken while it applies a logged entry
 * differs from the leader's, and a flipped bit in its blobs (SQLite checks no page) is
 * damage to this node's file, not the entry's result (that would make this node differ).
 */
export function isDamageAtApply(e: unknown): boolean {
  return isStoreDamage(e) || isVirtualTableCorrupt(e);
}

/** What to do about a damaged store; every message about one ends with it. */
export function damagedStoreFix(storePath: string): string {
  const dir = dirname(storePath);
  return `restart the node (one that stopped on it is restarted by systemd by itself): its start moves ${dir}'s files aside to ${dir}.damaged-<time> (kept, never deleted) and rebuilds the store from the newest snapshot and the WAL; ` +
    "a member of a multi-node cluster gets what it lacks from the leader. Meanwhile send requests to another node";
}

/**
 * The error for damage found while the node runs. Writes the mark first, so that the next
 * start rebuilds the store even where its check at start would not look at the damaged pages.
 */
export function storeDamagedError(storePath: string, cause: unknown): SvcError {
  markStoreDamaged(storePath, cause);
  return new SvcError("STORE_DAMAGED", `this node's store ${storePath} is damaged (SQLite: ${errorMessage(cause)}); the node stops`, {
    hint: damagedStoreFix(storePath),
    details: { path: storePath },
    cause,
  });
}

/** Leave the mark (best effort: a node that cannot write it still stops, and its start checks the store). */
export function markStoreDamaged(storePath: string, cause: unknown): void {
  try {
    writeFileAtomic(storePath + damageMarkSuffix, `${new Date().toISOString()} ${errorMessage(cause)}\n`);
  } catch {
    // The disk refused it: the error that follows says the store is damaged all the same.
  }
}

/** Why the store was marked damaged; null when it was not. */
export function readDamageMark(storePath: string): string | null {
  try {
    return fs.readFileSync(storePath + damageMarkSuffix, "utf8").trim();
  } catch {
    return null;
  }
}

/** The copies of damaged stores set aside beside `storePath`'s directory (setStoreAside), oldest first. */
export function setAsideCopies(storePath: string): string[] {
  const storeDir = dirname(storePath);
  const prefix = `${basename(storeDir)}.damaged-`;
  try {
    return fs.readdirSync(dirname(storeDir)).filter((n) => n.startsWith(prefix)).sort().map((n) => join(dirname(storeDir), n));
  } catch {
    return [];
  }
}

/**
 * Move the store's files into `<store dir>.damaged-<time>/` beside the store directory, so the
 * node can rebuild the store and the damaged copy stays for a look. Returns that directory.
 * Throws STORAGE_FAILED when a move fails: then nothing may rebuild over the file.
 */
export function setStoreAside(storePath: string): string {
  const storeDir = dirname(storePath);
  const aside = `${storeDir}.damaged-${new Date().toISOString().replace(/[:.]/g, "-")}`;
  try {
    fs.mkdirSync(aside, { recursive: true, mode: 0o750 });
    for (const suffix of storeFileSuffixes) {
      const from = storePath + suffix;
      if (fs.existsSync(from)) fs.renameSync(from, join(aside, basename(from)));
    }
    fsyncPath(aside);
    fsyncPath(storeDir);
    fsyncPath(dirname(storeDir));
  } catch (e) {
    throw new SvcError("STORAGE_FAILED", `the store ${storePath} is damaged, and moving it aside to ${aside} failed: ${errorMessage(e)}`, {
      hint: `move ${storeDir}'s files elsewhere by hand (or remove them), then start the node: it rebuilds the store from the newest snapshot and the WAL`,
      cause: e,
    });
  }
  return aside;
}
