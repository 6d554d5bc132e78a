// A full backup archive, svc-backup-<YYYYMMDD>.tar.gz (SPEC §2.1, §4.4): laid out as the data
// directory it restores into, so that SPEC §4.5 ("copy the raft and store directories back")
// works as written:
//
//   raft/snapshots/<term>-<index>/{state.db,meta.json}   the image taken while writes were paused: a
//                                                        consistent copy of the store (never its live files)
//   raft/RESTORED                                        tells the node it was restored (restore-marker.ts)
//   store/                                               empty: the node makes the store from the image
//   etc/svc/…                                            the configuration directory
//   metadata.json                                        cluster-info at the time of the backup
//   MANIFEST.sha256                                      "<sha256>  <path>" for every other file
//
// Written with the `tar` package to a temporary name and renamed; verified by reading it back.

import * as fs from "node:fs";
import { createHash } from "node:crypto";
import { dirname, join, relative } from "node:path";
import * as tar from "tar";
import { fsyncPath } from "../io/durable-file.ts";
import { removeFilesOfDeadProcesses } from "../storage/replay-leftovers.ts";
import { SvcError } from "../util/errors.ts";

/**
 * An archive being written: `<name>.partial-<pid>`, renamed once whole. One a backup killed -9
 * left is removed by the next backup that writes to the same place, once it is an hour old: the
 * place may be shared (a network mount) with a backup running on another host, whose pid says
 * nothing here.
 */
export const partialPattern = /^(?:svc-backup-\d{8}|latest)\.tar\.gz\.partial-(\d+)$/;
export const partialAgeMs = 3_600_000;

export const manifestName = "MANIFEST.sha256";
export const metadataName = "metadata.json";
const fullBackupPattern = /^svc-backup-(\d{4})(\d{2})(\d{2})\.tar\.gz$/;

/** svc-backup-<YYYYMMDD>.tar.gz for a UTC day. */
export function fullBackupName(nowMs: number): string {
  return `svc-backup-${new Date(nowMs).toISOString().slice(0, 10).replaceAll("-", "")}.tar.gz`;
}

/** The UTC midnight a full backup's name dates it to; null for a name that is not one. */
export function fullBackupDateMs(name: string): number | null {
  const m = fullBackupPattern.exec(name);
  if (m === null) return null;
  const ms = Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]));
  return Number.isNaN(ms) ? null : ms;
}

/** Reads of at most 1 MiB (tar's default is 16 MiB): the command's memory stays small whatever the store's size. */
const readChunkBytes = 1 << 20;

/** A link cache that never finds a file: tar writes every name as a plain file. */
const noHardLinks = { get: () => undefined, set: () => undefined } as unknown as Map<`${number}:${number}`, string>;

function filesUnder(root: string, dir = root): string[] {
  const out: string[] = [];
  for (const d of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const path = join(dir, d.name);
    if (d.isDirectory()) out.push(...filesUnder(root, path));
    else if (d.isFile()) out.push(relative(root, path));
  }
  return out;
}

/** Directories with nothing in them (store/): archived as directory entries. */
function emptyDirsUnder(root: string, dir = root): string[] {
  const entries = fs.readdirSync(dir, { withFileTypes: true });
  if (entries.length === 0 && dir !== root) return [relative(root, dir)];
  return entries.filter((d) => d.isDirectory()).flatMap((d) => emptyDirsUnder(root, join(dir, d.name)));
}

async function sha256OfFile(path: string): Promise<string> {
  const h = createHash("sha256");
  for await (const chunk of fs.createReadStream(path, { highWaterMark: 1 << 20 })) h.update(chunk as Buffer);
  return h.digest("hex");
}

export interface ArchiveWritten {
  path: string;
  sizeBytes: number;
  files: number;
}

/**
 * Archive a staged tree (laid out as above, without the manifest) into `outPath`: the manifest
 * is computed and added, the archive written beside `outPath` and renamed onto it once synced.
 */
export async function writeArchive(
  stagingDir: string, outPath: string, onFile: (path: string) => void = () => {}, knownSha256: ReadonlyMap<string, string> = new Map(),
): Promise<ArchiveWritten> {
  const files = filesUnder(stagingDir).filter((f) => f !== manifestName);
  const lines: string[] = [];
  for (const f of files) {
    onFile(f);
    // An image's checksum is known (its meta.json; the worker hashed what it wrote): not read twice.
    lines.push(`${knownSha256.get(f) ?? (await sha256OfFile(join(stagingDir, f)))}  ${f}`);
  }
  fs.writeFileSync(join(stagingDir, manifestName), `${lines.join("\n")}\n`);
  fs.mkdirSync(dirname(outPath), { recursive: true });
  removeFilesOfDeadProcesses(dirname(outPath), partialPattern, partialAgeMs);
  const temp = `${outPath}.partial-${process.pid}`;
  try {
    // The manifest first: a reader meets it before the files it lists.
    // Level 1: a store's pages compress nearly as well as at 6 and several times faster, and a
    // backup's time is what an operator waits for (verify reads it back whole anyway).
    // Plain files only (tar's link entries can make its packer write after its end under Bun).
    await tar.c({ gzip: { level: 1 }, file: temp, cwd: stagingDir, portable: true, linkCache: noHardLinks, maxReadSize: readChunkBytes }, [manifestName, ...files, ...emptyDirsUnder(stagingDir)]);
    fsyncPath(temp);
    fs.renameSync(temp, outPath);
    fsyncPath(dirname(outPath));
  } finally {
    fs.rmSync(temp, { force: true });
  }
  return { path: outPath, sizeBytes: fs.statSync(outPath).size, files: files.length + 1 };
}

export interface ArchiveCheck {
  ok: boolean;
  path: string;
  /** Files listed in the archive (the manifest included). */
  files: number;
  bytes: number;
  /** What is wrong, one sentence each; empty when ok. */
  problems: string[];
  /** The snapshot the archive holds, from its meta.json. */
  snapshot: { term: number; index: number; clusterId: string } | null;
  metadata: Record<string, unknown> | null;
  /** The parts of a full backup (fullBackupParts) the archive lacks; empty when it could not be read. */
  missing: string[];
  /**
   * Why the file is no svc backup at all (not a gzip file, or none of a full backup's parts in
   * it): some other file given for one, not a backup that was damaged. null otherwise.
   */
  notBackup: string | null;
  /**
   * How the file is compressed, by its first bytes. tar reads an uncompressed or a zstd tar as
   * well, and its files are checked all the same, but only gzip is a full backup (SPEC §2.1).
   */
  compression: ArchiveCompression;
}

export type ArchiveCompression = "gzip" | "zstd" | "none";

const gzipMagic = [0x1f, 0x8b];
const zstdMagic = [0x28, 0xb5, 0x2f, 0xfd];

/** How a file that starts with `head` is compressed ("none" for anything but gzip and zstd). */
function compressionOf(head: Buffer): ArchiveCompression {
  const startsWith = (magic: readonly number[]): boolean => head.length >= magic.length && magic.every((b, i) => head[i] === b);
  return startsWith(gzipMagic) ? "gzip" : startsWith(zstdMagic) ? "zstd" : "none";
}

/** The first bytes of the file (fewer when it is shorter, none when it cannot be read: tar then says why). */
function headOf(path: string): Buffer {
  const head = Buffer.alloc(zstdMagic.length);
  try {
    const fd = fs.openSync(path, "r");
    try {
      return head.subarray(0, fs.readSync(fd, head, 0, head.length, 0));
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return head.subarray(0, 0);
  }
}

const requiredFiles = [manifestName, metadataName, "raft/RESTORED"];
const snapshotPart = "a snapshot in raft/snapshots/";
/** What every full backup holds (SPEC §2.1, §4.4 step 3), in the words verify names them. */
const fullBackupParts = [...requiredFiles, snapshotPart, "store/", "etc/svc/"];

/** List the archive and check every file against its manifest (SPEC §4.4 step 5, and more). */
export async function verifyArchive(path: string, onFile: (path: string) => void = () => {}): Promise<ArchiveCheck> {
  const head = headOf(path);
  const compression = compressionOf(head);
  const hashes = new Map<string, string>();
  const texts = new Map<string, string>();
  const links = new Map<string, string>();
  /** Directory entries, without their trailing slash (store/ is one, empty). */
  const dirs = new Set<string>();
  /** Entries that are neither files, hard links to them, nor directories: none is svc's. */
  const strange: string[] = [];
  let bytes = 0;
  try {
    await tar.t({
      file: path,
      strict: true,
      maxReadSize: readChunkBytes,
      onReadEntry(entry) {
        // An archive repacked with `tar czf x.tar.gz -C dir .` names its files ./raft/…: the same files.
        const name = withoutDotSlash(entry.path);
        if (entry.type === "Link" && entry.linkpath !== undefined) {
          links.set(name, withoutDotSlash(entry.linkpath));
          onFile(name);
          return;
        }
        if (entry.type === "Directory") {
          dirs.add(name.replace(/\/+$/, ""));
          return;
        }
        if (entry.type !== "File" && entry.type !== "OldFile" && entry.type !== "ContiguousFile") {
          strange.push(`${name} is a ${entry.type} entry${entry.linkpath === undefined ? "" : ` (to ${entry.linkpath})`}`);
          entry.resume();
          return;
        }
        const h = createHash("sha256");
        const keepText = name === manifestName || name === metadataName || name.endsWith("/meta.json");
        const chunks: Buffer[] = [];
        entry.on("data", (d: Buffer) => {
          h.update(d);
          bytes += d.length;
          if (keepText) chunks.push(d);
        });
        entry.on("end", () => {
          hashes.set(name, h.digest("hex"));
          if (keepText) texts.set(name, Buffer.concat(chunks).toString("utf8"));
          onFile(name);
        });
      },
    });
  } catch (e) {
    return unreadable(path, e, hashes.size, bytes, head);
  }
  // Read all the same, an archive that is not gzip is no full backup as svc restores one: `tar
  // xzf` (README, SPEC §4.5) cannot read it, and its off-site copies would be named .tar.gz.
  const problems: string[] = compression === "gzip" ? [] : [
    `the archive is ${compression === "zstd" ? "a zstd-compressed tar" : "an uncompressed tar"}, not gzip-compressed: ` +
    "a full backup is a gzip-compressed tar (`tar xzf`, which a restore runs, cannot read this one)",
  ];
  // A symbolic link (or a device, a FIFO) in a backup is none of svc's: extracted, a link in
  // raft/ or store/ would have the restored node write wherever it points.
  problems.push(...strange.map((s) => `${s}: a backup holds only files and directories (extracted, it could make the node write outside its data directory)`));
  // A hard link entry holds the bytes of the file it names.
  for (const [name, target] of links) {
    const h = hashes.get(target);
    if (h === undefined) problems.push(`${name} is a link to ${target}, which is not in the archive`);
    else hashes.set(name, h);
  }
  const metaPaths = [...texts.keys()].filter((p) => /^raft\/snapshots\/[0-9a-f]{16}-[0-9a-f]{16}\/meta\.json$/.test(p));
  const names = [...hashes.keys(), ...dirs];
  const holdsTree = (dir: string): boolean => names.some((n) => n === dir || n.startsWith(`${dir}/`));
  const missing = fullBackupParts.filter((part) =>
    part === snapshotPart ? metaPaths.length === 0 : part.endsWith("/") ? !holdsTree(part.slice(0, -1)) : !hashes.has(part));
  if (missing.length === fullBackupParts.length) {
    // Some other archive: what it lacks is the point, not a line for each of its files.
    const notBackup = `the archive holds none of ${fullBackupParts.join(", ")}`;
    return { ok: false, path, files: hashes.size, bytes, problems: [`the archive holds none of what a full backup holds: ${fullBackupParts.join(", ")}`], snapshot: null, metadata: null, missing, notBackup, compression };
  }
  for (const f of requiredFiles) if (!hashes.has(f)) problems.push(`${f} is missing`);
  for (const part of ["store/", "etc/svc/"]) if (missing.includes(part)) problems.push(`${part} is missing`);
  const manifest = texts.get(manifestName) ?? "";
  const listed = new Set<string>();
  for (const line of manifest.split("\n").filter((l) => l !== "")) {
    const m = /^([0-9a-f]{64}) {2}(.+)$/.exec(line);
    if (m === null) {
      problems.push(`${manifestName}: cannot read line ${JSON.stringify(line.slice(0, 80))}`);
      continue;
    }
    const [, want, file] = m as unknown as [string, string, string];
    listed.add(file);
    const got = hashes.get(file);
    if (got === undefined) problems.push(`${file} is in the manifest but not in the archive`);
    else if (got !== want) problems.push(`${file} does not match its checksum (manifest ${want.slice(0, 12)}…, archive ${got.slice(0, 12)}…)`);
  }
  // Without a manifest, every file would be "not in the manifest": its absence says it once.
  if (hashes.has(manifestName)) for (const f of hashes.keys()) if (f !== manifestName && !listed.has(f)) problems.push(`${f} is in the archive but not in the manifest`);
  let snapshot: ArchiveCheck["snapshot"] = null;
  if (metaPaths.length !== 1) problems.push(`the archive holds ${metaPaths.length} snapshots, not one`);
  else {
    const metaPath = metaPaths[0] ?? "";
    let meta: { term?: number; index?: number; clusterId?: string; stateSha256?: string } | null;
    try {
      meta = JSON.parse(texts.get(metaPath) ?? "{}") as { term?: number; index?: number; clusterId?: string; stateSha256?: string } | null;
    } catch {
      meta = null;
      problems.push(`${metaPath} is not JSON`);
    }
    if (meta !== null) {
      snapshot = { term: meta.term ?? 0, index: meta.index ?? 0, clusterId: meta.clusterId ?? "" };
      const statePath = metaPath.replace(/meta\.json$/, "state.db");
      if (hashes.get(statePath) !== meta.stateSha256) problems.push(`${statePath} does not match the SHA-256 in its meta.json`);
    }
  }
  let metadata: Record<string, unknown> | null = null;
  try {
    metadata = JSON.parse(texts.get(metadataName) ?? "null") as Record<string, unknown> | null;
  } catch {
    problems.push(`${metadataName} is not JSON`);
  }
  return { ok: problems.length === 0, path, files: hashes.size, bytes, problems, snapshot, metadata, missing, notBackup: null, compression };
}

/** A file tar could not read to its end: not gzip at all, cut short, or something else. `head`: its first bytes. */
function unreadable(path: string, e: unknown, files: number, bytes: number, head: Buffer): ArchiveCheck {
  const compression = compressionOf(head);
  const failed = { ok: false, path, files, bytes, snapshot: null, metadata: null, missing: [], compression };
  const code = (e as { code?: unknown } | null)?.code;
  // tar reads an uncompressed tar too: one it cannot read that does not start as gzip does (1f 8b) is no gzip file.
  if (code === "TAR_BAD_ARCHIVE" && compression !== "gzip") {
    // Not naming `path`, which for an archive fetched from an object store is a temporary file.
    const what = head.length === 0 ? "the file is empty" : "the file is not gzip-compressed";
    return { ...failed, problems: [`${what} (a full backup is a gzip-compressed tar)`], notBackup: what };
  }
  if (code === "TAR_BAD_ARCHIVE") {
    return { ...failed, problems: ["the file is gzip-compressed but holds no tar archive"], notBackup: "the file holds no tar archive" };
  }
  if (code === "Z_BUF_ERROR") return { ...failed, problems: [`the archive is cut short: it cannot be read to its end (${(e as Error).message})`], notBackup: null };
  return { ...failed, problems: [`cannot read ${path} as a gzip tar: ${(e as Error).message}`], notBackup: null };
}

/** Extract an archive into a directory (made if missing). */
export async function extractArchive(path: string, intoDir: string): Promise<void> {
  fs.mkdirSync(intoDir, { recursive: true });
  await tar.x({ file: path, cwd: intoDir, strict: true });
}

export function archiveDamaged(check: ArchiveCheck): SvcError {
  return new SvcError("BACKUP_DAMAGED", `${check.path} does not verify: ${check.problems.join("; ")}`, {
    hint: "use another backup (an older one, or another copy of this one); a damaged archive may still be extracted with tar for what it holds",
  });
}

function withoutDotSlash(path: string): string {
  return path.replace(/^(\.\/)+/, "");
}
