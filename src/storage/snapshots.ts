// Snapshots under raft/snapshots/<term>-<index>/ (16 hex digits each): state.db, an
// image of the store, and meta.json. A snapshot is built in a `.tmp-` directory, every
// file fsynced, meta.json written last, then renamed into place and the parent fsynced:
// a directory without a readable meta.json is incomplete and never used.

import * as fs from "node:fs";
import { join } from "node:path";
import { membershipOf, type Membership } from "../util/log-data.ts";
import { ensureDir, fsyncDir, fsyncPathAsync } from "../io/durable-file.ts";
import { sha256File } from "../io/file-hash.ts";

export const snapshotFormatVersion = 1;
export const snapshotStateFile = "state.db";
export const snapshotMetaFile = "meta.json";
/**
 * A hold pins a snapshot directory against pruning while someone copies it (SPEC §4.4 step 3):
 * a file `.hold` in it, empty (held until removed) or holding an ISO 8601 time when it lapses
 * (a backup killed midway cannot pin an image forever).
 */
export const snapshotHoldFile = ".hold";

/** Whether a snapshot directory is held at `nowMs` (an unreadable hold counts as held). */
export function snapshotHeld(dir: string, nowMs: number): boolean {
  let text: string;
  try {
    text = fs.readFileSync(join(dir, snapshotHoldFile), "utf8").trim();
  } catch (e) {
    return (e as NodeJS.ErrnoException).code !== "ENOENT";
  }
  if (text === "") return true;
  const untilMs = Date.parse(text);
  return Number.isNaN(untilMs) || nowMs < untilMs;
}

/**
 * meta.json's own checksum: CRC-32 (as hex) of the JSON of its fields in this order, without
 * metaCrc32, as the hard state and the checkpoint carry one. Its membership goes to the Raft
 * core as it is (a flipped bit in a node id made a follower a lone voter that elected itself),
 * so damage must be told from a value.
 */
function metaChecksum(m: Omit<SnapshotFileMeta, "metaCrc32">): string {
  const canonical = {
    formatVersion: m.formatVersion, clusterId: m.clusterId, index: m.index, term: m.term,
    membership: { voters: m.membership.voters, learners: m.membership.learners },
    createdAt: m.createdAt, stateSha256: m.stateSha256, stateSizeBytes: m.stateSizeBytes,
  };
  return Bun.hash.crc32(JSON.stringify(canonical)).toString(16).padStart(8, "0");
}

export interface SnapshotFileMeta {
  formatVersion: number;
  clusterId: string;
  index: number;
  term: number;
  membership: Membership;
  /** ISO 8601 UTC. */
  createdAt: string;
  stateSha256: string;
  stateSizeBytes: number;
  /** metaChecksum of the rest; absent in files of versions before it (read as before). */
  metaCrc32?: string;
}

export interface SnapshotEntry {
  name: string;
  dir: string;
  term: number;
  index: number;
  /** null when meta.json is missing or unreadable: an incomplete snapshot. */
  meta: SnapshotFileMeta | null;
}

const hex16 = (n: number): string => n.toString(16).padStart(16, "0");

export function snapshotDirName(term: number, index: number): string {
  return `${hex16(term)}-${hex16(index)}`;
}

export function parseSnapshotDirName(name: string): { term: number; index: number } | null {
  const m = /^([0-9a-f]{16})-([0-9a-f]{16})$/.exec(name);
  if (m === null) return null;
  return { term: Number.parseInt(m[1] ?? "", 16), index: Number.parseInt(m[2] ?? "", 16) };
}

/**
 * A snapshot directory's meta.json, or null when it is missing, unreadable or damaged (an
 * incomplete or damaged snapshot: snapshotMetaProblem says which). Every field present is
 * checked, and the file's own checksum: its membership and indexes go on to the Raft core.
 * Fields older files may lack (clusterId, createdAt, stateSizeBytes, learners, metaCrc32) may
 * be absent, as before; of the wrong kind they may not.
 */
export function readSnapshotMeta(dir: string): SnapshotFileMeta | null {
  const read = parseSnapshotMeta(dir);
  return "meta" in read ? read.meta : null;
}

/** Why a snapshot directory's meta.json cannot be used; null when it can. */
export function snapshotMetaProblem(dir: string): string | null {
  const read = parseSnapshotMeta(dir);
  return "problem" in read ? read.problem : null;
}

function parseSnapshotMeta(dir: string): { meta: SnapshotFileMeta } | { problem: string } {
  let v: unknown;
  try {
    v = JSON.parse(strictUtf8.decode(fs.readFileSync(join(dir, snapshotMetaFile))));
  } catch (e) {
    const missing = (e as NodeJS.ErrnoException).code === "ENOENT";
    return { problem: missing ? "meta.json is missing (incomplete snapshot)" : "meta.json is unreadable (not UTF-8 JSON: damaged)" };
  }
  const damaged = { problem: "meta.json does not hold the fields of a snapshot's metadata (damaged)" };
  if (typeof v !== "object" || v === null || Array.isArray(v)) return damaged;
  const m = v as Record<string, unknown>;
  // A key svc never writes is damage too: a flipped bit in "metaCrc32" itself would otherwise
  // read as a file from before the checksum, and go unchecked.
  if (Object.keys(m).some((k) => !metaKeys.has(k))) return damaged;
  const { formatVersion, clusterId, index, term, createdAt, stateSha256, stateSizeBytes, metaCrc32 } = m;
  const rawMembership = m["membership"];
  const membership = membershipOf(typeof rawMembership === "object" && rawMembership !== null && !("learners" in rawMembership) ? { ...rawMembership, learners: [] } : rawMembership);
  if (!isCount(formatVersion) || !isCount(index) || !isCount(term) || typeof stateSha256 !== "string" || membership === null) return damaged;
  if (!optional(clusterId, isString) || !optional(createdAt, isString) || !optional(stateSizeBytes, isCount) || !optional(metaCrc32, isString)) return damaged;
  const meta = { ...m, formatVersion, index, term, stateSha256, membership } as SnapshotFileMeta;
  if (metaCrc32 !== undefined && metaCrc32 !== metaChecksum(meta)) return { problem: "meta.json does not match its own checksum (metaCrc32): damaged or edited" };
  return { meta };
}

/** The keys of meta.json, in every version that wrote one. */
const metaKeys: ReadonlySet<string> = new Set(["formatVersion", "clusterId", "index", "term", "membership", "createdAt", "stateSha256", "stateSizeBytes", "metaCrc32"]);

/** Bytes that are not UTF-8 make meta.json unreadable, not a value with U+FFFD in it. */
const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/** A whole number from 0 to 2^53. */
function isCount(v: unknown): v is number {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
}

function isString(v: unknown): v is string {
  return typeof v === "string";
}

function optional(v: unknown, is: (v: unknown) => boolean): boolean {
  return v === undefined || is(v);
}

export type SnapshotCheck = { ok: true } | { ok: false; reason: string };

/** Whether a snapshot's files are whole: meta matches its name, state.db matches its checksum. */
export async function verifySnapshot(entry: SnapshotEntry): Promise<SnapshotCheck> {
  const meta = entry.meta;
  if (meta === null) return { ok: false, reason: snapshotMetaProblem(entry.dir) ?? "meta.json is missing or unreadable (incomplete snapshot)" };
  if (meta.formatVersion !== snapshotFormatVersion) return { ok: false, reason: `unsupported format ${meta.formatVersion}` };
  if (meta.index !== entry.index || meta.term !== entry.term) return { ok: false, reason: "meta.json does not match the directory name" };
  const statePath = join(entry.dir, snapshotStateFile);
  if (!fs.existsSync(statePath)) return { ok: false, reason: "state.db is missing" };
  const sha = await sha256File(statePath);
  if (sha !== meta.stateSha256) return { ok: false, reason: `state.db checksum mismatch (expected ${meta.stateSha256}, found ${sha})` };
  return { ok: true };
}

export class SnapshotStore {
  constructor(readonly dir: string) {
    ensureDir(dir);
  }

  /** Snapshot directories, oldest first (by index, then term). Temp directories are skipped. */
  list(): SnapshotEntry[] {
    if (!fs.existsSync(this.dir)) return [];
    const out: SnapshotEntry[] = [];
    for (const name of fs.readdirSync(this.dir)) {
      const parsed = parseSnapshotDirName(name);
      if (parsed === null) continue;
      const dir = join(this.dir, name);
      out.push({ name, dir, ...parsed, meta: readSnapshotMeta(dir) });
    }
    return out.sort((a, b) => a.index - b.index || a.term - b.term);
  }

  /** The newest snapshot that verifies, checking from newest to oldest; damaged ones are reported. */
  async latestValid(onInvalid: (entry: SnapshotEntry, reason: string) => void = () => {}): Promise<SnapshotEntry | null> {
    const all = this.list();
    for (let i = all.length - 1; i >= 0; i--) {
      const entry = all[i];
      if (entry === undefined) continue;
      const check = await verifySnapshot(entry);
      if (check.ok) return entry;
      onInvalid(entry, check.reason);
    }
    return null;
  }

  /** Newest snapshot with a readable meta.json, without hashing state.db. */
  latest(): SnapshotEntry | null {
    const all = this.list().filter((e) => e.meta !== null);
    return all[all.length - 1] ?? null;
  }

  /** A fresh temp directory to build a snapshot in; commit() or discard() it. */
  beginTemp(): string {
    const dir = join(this.dir, `.tmp-${process.pid}-${Date.now()}-${Math.floor(Math.random() * 1e9)}`);
    fs.mkdirSync(dir, { mode: 0o750 });
    return dir;
  }

  discard(tempDir: string): void {
    fs.rmSync(tempDir, { recursive: true, force: true });
  }

  /**
   * Finish a snapshot whose state.db is already in `tempDir`: fsync it, write
   * meta.json last, rename into place and fsync the parent. The fsyncs run on the I/O pool.
   * `stateSha256` is the image's checksum, which the caller has already (the snapshot worker
   * hashes what it writes; a received image is hashed to verify it): nothing reads the image here,
   * unless a snapshot of the same term and index is held already; that one is hashed, and
   * replaced when it is damaged (`replacedDamaged` says why).
   */
  async commit(
    tempDir: string,
    meta: Omit<SnapshotFileMeta, "formatVersion" | "stateSizeBytes" | "createdAt"> & { createdAt?: string },
  ): Promise<SnapshotEntry & { replacedDamaged?: string }> {
    const statePath = join(tempDir, snapshotStateFile);
    await fsyncPathAsync(statePath);
    const full: SnapshotFileMeta = {
      formatVersion: snapshotFormatVersion,
      clusterId: meta.clusterId,
      index: meta.index,
      term: meta.term,
      membership: meta.membership,
      createdAt: meta.createdAt ?? new Date().toISOString(),
      stateSha256: meta.stateSha256,
      stateSizeBytes: fs.statSync(statePath).size,
    };
    full.metaCrc32 = metaChecksum(full);
    const metaPath = join(tempDir, snapshotMetaFile);
    fs.writeFileSync(metaPath, `${JSON.stringify(full, null, 2)}\n`, { mode: 0o640 });
    await fsyncPathAsync(metaPath);
    await fsyncPathAsync(tempDir);
    const name = snapshotDirName(meta.term, meta.index);
    const finalDir = join(this.dir, name);
    let replacedDamaged: string | undefined;
    if (fs.existsSync(finalDir)) {
      // The same snapshot again (an install of one already held, an image made with nothing
      // applied since): the one held stays if it is whole; a damaged one is replaced.
      const held = await verifySnapshot({ name, dir: finalDir, term: meta.term, index: meta.index, meta: readSnapshotMeta(finalDir) });
      if (held.ok) {
        this.discard(tempDir);
      } else {
        replacedDamaged = held.reason;
        const aside = join(this.dir, `.tmp-damaged-${process.pid}-${Date.now()}`);
        fs.renameSync(finalDir, aside);
        fs.renameSync(tempDir, finalDir);
        await fsyncPathAsync(this.dir);
        fs.rmSync(aside, { recursive: true, force: true });
      }
    } else {
      fs.renameSync(tempDir, finalDir);
      await fsyncPathAsync(this.dir);
    }
    const entry: SnapshotEntry & { replacedDamaged?: string } = { name, dir: finalDir, term: meta.term, index: meta.index, meta: readSnapshotMeta(finalDir) };
    if (replacedDamaged !== undefined) entry.replacedDamaged = replacedDamaged;
    return entry;
  }

  /**
   * Remove a snapshot directory so that a crash part way never leaves it half there (a
   * meta.json without its state.db would still be listed): renamed to a temp name first, which
   * the next prune or start clears.
   */
  async removeWhole(dir: string): Promise<void> {
    const aside = join(this.dir, `.tmp-removed-${process.pid}-${Date.now()}-${Math.floor(Math.random() * 1e9)}`);
    fs.renameSync(dir, aside);
    await fsyncPathAsync(this.dir);
    fs.rmSync(aside, { recursive: true, force: true });
  }

  /**
   * Remove all but the newest `keepCount` complete snapshots, and stale temp directories.
   * `syncDir: false` leaves the fsync of the directory to the caller (see fsyncPathAsync).
   */
  prune(keepCount: number, options: { syncDir?: boolean } = {}): string[] {
    const removed: string[] = [];
    const complete = this.list().filter((e) => e.meta !== null);
    const nowMs = Date.now();
    for (const entry of complete.slice(0, Math.max(0, complete.length - keepCount))) {
      if (snapshotHeld(entry.dir, nowMs)) continue; // being copied: pruned once released
      fs.rmSync(entry.dir, { recursive: true, force: true });
      removed.push(entry.dir);
    }
    for (const name of fs.readdirSync(this.dir)) {
      if (name.startsWith(".tmp-") && !name.startsWith(`.tmp-${process.pid}-`)) {
        fs.rmSync(join(this.dir, name), { recursive: true, force: true });
        removed.push(join(this.dir, name));
      }
    }
    if (removed.length > 0 && options.syncDir !== false) fsyncDir(this.dir);
    return removed;
  }
}
