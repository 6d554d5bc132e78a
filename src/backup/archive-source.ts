// Where archived WAL segments are read from: a local directory (what `cp %p DIR/%f` fills) or
// an object store (`s3://bucket/prefix`, what `svc admin wal-archive-put` fills). Only files
// named like archived segments (`<first>-<last>-<term>.wal`) are listed; anything else in the
// location (temp files of a command, other .wal files) is not the archive's.

import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArchiveSegmentName, type ArchivedRange } from "../storage/index.ts";
import { SvcError, errorMessage } from "../util/errors.ts";
import { ObjectStore, isObjectUrl } from "./s3.ts";

export interface ArchivedSegment {
  readonly name: string;
  readonly range: ArchivedRange;
  readonly sizeBytes: number;
}

export interface ArchiveSource {
  /** The directory or URL, as an operator wrote it. */
  readonly location: string;
  /** Every archived segment, by first index, then last index. */
  listArchive(): Promise<ArchivedSegment[]>;
  readArchived(name: string): Promise<Uint8Array>;
  /** A local file holding the segment (the file itself, or a download of it), to read a window at a time. */
  fetchArchived(name: string): Promise<LocalCopy>;
}

export interface LocalCopy {
  readonly path: string;
  /** Done with it (a download is removed). */
  release(): void;
}

export function openArchiveSource(location: string): ArchiveSource {
  return isObjectUrl(location) ? objectArchive(location) : directoryArchive(location);
}

export function listArchive(location: string): Promise<ArchivedSegment[]> {
  return openArchiveSource(location).listArchive();
}

export function readArchived(location: string, name: string): Promise<Uint8Array> {
  return openArchiveSource(location).readArchived(name);
}

function byRange(a: ArchivedSegment, b: ArchivedSegment): number {
  return a.range.firstIndex - b.range.firstIndex || a.range.lastIndex - b.range.lastIndex || a.range.term - b.range.term;
}

function directoryArchive(dir: string): ArchiveSource {
  return {
    location: dir,
    async listArchive() {
      let names: string[];
      try {
        names = await fs.promises.readdir(dir);
      } catch (e) {
        throw new SvcError("ARCHIVE_UNREADABLE", `cannot read the WAL archive directory ${dir}: ${errorMessage(e)}`, {
          hint: "give --wal-dir the directory archive_command copies segments into (or an s3:// URL)",
        });
      }
      const out: ArchivedSegment[] = [];
      for (const name of names) {
        const range = parseArchiveSegmentName(name);
        if (range === null) continue;
        const st = await fs.promises.stat(join(dir, name));
        if (st.isFile()) out.push({ name, range, sizeBytes: st.size });
      }
      return out.sort(byRange);
    },
    async readArchived(name) {
      return await fs.promises.readFile(join(dir, name));
    },
    async fetchArchived(name) {
      return { path: join(dir, name), release: () => {} };
    },
  };
}

function objectArchive(url: string): ArchiveSource {
  const store = ObjectStore.at(url);
  return {
    location: url,
    async listArchive() {
      const out: ArchivedSegment[] = [];
      for (const o of await store.list()) {
        if (o.name.includes("/")) continue;
        const range = parseArchiveSegmentName(o.name);
        if (range !== null) out.push({ name: o.name, range, sizeBytes: o.sizeBytes });
      }
      return out.sort(byRange);
    },
    readArchived: (name) => store.get(name),
    async fetchArchived(name) {
      const dir = await fs.promises.mkdtemp(join(tmpdir(), "svc-wal-archive-"));
      const path = join(dir, name);
      try {
        await store.download(name, path);
      } catch (e) {
        fs.rmSync(dir, { recursive: true, force: true });
        throw e;
      }
      return { path, release: () => fs.rmSync(dir, { recursive: true, force: true }) };
    },
  };
}
