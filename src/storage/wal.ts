// The write-ahead log: Raft entries in segment files `<seq>-<first_index>.wal` (16 hex
// digits each) under raft/wal/. Appends are written at once and made durable by sync():
// one fdatasync covers every record written since the last, which is group commit.
// Nothing may be acknowledged before the sync() that covers it has returned.
//
// A later record for index i replaces the earlier records for i and everything after
// it (a follower's conflicting suffix being overwritten), so replay keeps the newest.
//
// A full disk: an append or a segment's preallocation that fails with ENOSPC is undone
// before the error is thrown (the bytes written are zeroed back, a half-made segment file
// is removed), so the WAL is exactly as before the call and the same append may be retried
// once space is freed. Nothing of a failed append was synced, so nothing of it can have
// been acknowledged. A failed fsync is another matter: see sync().

import * as fs from "node:fs";
import { dirname, join } from "node:path";
import type { Entry } from "../util/log-data.ts";
import { assert } from "../util/assert.ts";
import { SvcError, errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/logger.ts";
import { encodeRecordInto, recordHeaderBytes } from "./_record.ts";
import { entryHeaderBytes, writeEntryRecord } from "./_entry-codec.ts";
import { ensureDir, fsyncDir, writeFully } from "../io/durable-file.ts";
import { DiskFullError, freeBytes, isDiskFullError } from "../io/disk-space.ts";
import { nonZeroEndOfFile, readSegment, readSegmentHeader, segmentHeaderPayload, segmentNameMismatch, RecordType, type SegmentScan } from "./_segment.ts";
import { Syncer } from "./syncer.ts";
import { reserveZeros, writeZeroPages } from "./_zero-fill.ts";
import type { ZeroFillReply, ZeroFillRequest } from "./zero-fill-worker.ts";
import { workerSpecifier } from "../util/worker.ts";
import { ReplayLog } from "./_replay.ts";
import { findFinalFrom } from "./_final-scan.ts";

import type { SegmentInfo, WalFinalFrom } from "./_wal-types.ts";

export type { SegmentInfo, WalFinalFrom };

export interface WalOptions {
  segmentSizeBytes: number;
  logger: Logger;
  /** Open keeps in memory only the entries after this index (the store holds the rest); default 0. */
  keepEntriesAfter?: number;
}

export interface WalOpenResult {
  wal: Wal;
  /** The log as replayed: contiguous, newest record for each index, in index order. */
  entries: Entry[];
  /** Bytes cut from a torn tail, 0 when the log ended cleanly. */
  truncatedBytes: number;
  /**
   * The term of the last entry record read (0: none, or not read): this node appended it, so it
   * had taken that term, whatever its store applied since. A log that starts after a snapshot
   * (a restore) holds no record of the snapshot's terms.
   */
  lastRecordTerm?: number;
}

const hex16 = (n: number): string => n.toString(16).padStart(16, "0");

/** The append buffer a WAL keeps between appends; a larger append is written in pieces of this size (one record larger than it, alone). */
const appendBufferBytesKept = 1024 * 1024;

/** At most one WAL mark (see Wal.marks) per this many entries: 10 M entries keep 10,000 marks. */
export const walMarkEveryEntries = 1024;

export function segmentName(seq: number, firstIndex: number): string {
  return `${hex16(seq)}-${hex16(firstIndex)}.wal`;
}

export function parseSegmentName(name: string): { seq: number; firstIndex: number } | null {
  const m = /^([0-9a-f]{16})-([0-9a-f]{16})\.wal$/.exec(name);
  if (m === null) return null;
  return { seq: Number.parseInt(m[1] ?? "", 16), firstIndex: Number.parseInt(m[2] ?? "", 16) };
}

/** Segment files in a directory, in sequence order. Other files are ignored. */
export function listSegments(dir: string): SegmentInfo[] {
  if (!fs.existsSync(dir)) return [];
  const segments: SegmentInfo[] = [];
  for (const name of fs.readdirSync(dir)) {
    const parsed = parseSegmentName(name);
    if (parsed === null) continue;
    const path = join(dir, name);
    segments.push({ ...parsed, name, path, maxIndex: 0, sizeBytes: fs.statSync(path).size });
  }
  return segments.sort((a, b) => a.seq - b.seq);
}

export class Wal {
  private fd: number | null = null;
  private unsyncedBytes = 0;
  /** A zero-filled file ready to become the next segment (see prepareSpare). */
  private spareReady: string | null = null;
  private sparePending = false;
  /** The spare being written, and how to stop its thread (close() does: nothing writes here after it). */
  private spareInProgress: { path: string; cancel: () => void } | null = null;
  /** After a spare could not be made (a full disk), none is tried before this time: one warning, not one per append. */
  private spareRetryAtMs = 0;
  private closed = false;
  private lastIndexValue: number;
  /**
   * See WalFinalFrom. Moves forward at every rewrite of a suffix, start over (resetTo) and
   * removal of its segment; at open it starts at the first record open read (segments it
   * skipped are not known to hold no rewrite). Null while the WAL holds no entry record.
   */
  private finalFromValue: WalFinalFrom | null;
  /**
   * Where open began reading, when it skipped segments before it (wholly at or below
   * keepEntriesAfter) and no rewrite it read moved finalFrom since: the final stretch may
   * reach back into those segments (learnSkippedFinalFrom). Null when there is nothing to learn.
   */
  private skippedBefore: WalFinalFrom | null;
  private skippedScan: Promise<void> | null = null;
  /**
   * Where some records begin (the first of a batch appended since open, one per
   * walMarkEveryEntries entries at most), in index order: a reader seeks from the nearest one
   * instead of scanning a segment from its start. A rewrite drops the marks at or past it.
   */
  private readonly marks: WalFinalFrom[] = [];
  /** The thread syncAsync() runs on, started with the first call. */
  private syncer: Syncer | null = null;
  /**
   * The buffer append() encodes records into, kept from one append to the next (up to
   * appendBufferBytesKept): a new one for each batch cost a follower catching up fresh pages,
   * zeroed by the kernel, for every batch of entries it received.
   */
  private appendBuffer: Uint8Array = new Uint8Array(0);

  private constructor(
    readonly dir: string,
    private readonly options: WalOptions,
    private readonly segmentList: SegmentInfo[],
    lastIndex: number,
    finalFrom: WalFinalFrom | null,
    skippedBefore: WalFinalFrom | null,
  ) {
    this.lastIndexValue = lastIndex;
    this.finalFromValue = finalFrom;
    this.skippedBefore = skippedBefore;
  }

  /**
   * Open the WAL in `dir`, replaying every segment. A torn tail of the last segment is
   * truncated and logged; damage anywhere else throws WAL_CORRUPT naming the file and offset.
   */
  static open(dir: string, options: WalOptions): WalOpenResult {
    ensureDir(dir);
    for (const name of fs.readdirSync(dir)) {
      if (name.endsWith(".wal.creating")) fs.rmSync(join(dir, name), { force: true });
    }
    const segments = listSegments(dir);
    // Before any record is read: damage found first would be repaired around the stranger.
    checkSegmentNames(segments);
    const keepAfter = options.keepEntriesAfter ?? 0;
    const replay = new ReplayLog(keepAfter);
    let truncatedBytes = 0;
    let finalFrom: WalFinalFrom | null = null;
    let prevIndex = -1;
    let skippedAny = false;
    /** The first value finalFrom takes: where reading began. */
    let firstRead: WalFinalFrom | null = null;
    for (let i = 0; i < segments.length; i++) {
      const segment = segments[i];
      assert(segment !== undefined, "segment index in range");
      const isLast = i === segments.length - 1;
      const next = segments[i + 1];
      if (next !== undefined && next.firstIndex - 1 <= keepAfter) {
        // Every entry of this segment is at or before what the store holds: not read at all
        // (a WAL kept back to an old image may be as large as the store). Its range still
        // counts for the replay's rules; verify-checksums reads and checks it.
        if (next.firstIndex > segment.firstIndex) {
          replay.addRange(segment.firstIndex, next.firstIndex - 1);
        }
        segment.maxIndex = next.firstIndex - 1;
        skippedAny = true;
        continue;
      }
      // What the store already holds is replayed for its indexes only: no copy of its data.
      const scan = readSegment(segment.path, { viewsThrough: keepAfter });
      if (isLast && scan.entries.length === 0 && scan.damage !== null && scan.damage.offset === 0 && !scan.damage.validRecordAfter) {
        // A segment whose creation a crash cut short holds nothing: drop it, the next append
        // starts a new one. (Segments are created under a temp name and renamed, so only
        // files from before that, or a damaged header, can look like this.)
        options.logger.warn("recovery: removed an unfinished WAL segment that held no entries", { file: segment.path });
        fs.rmSync(segment.path);
        fsyncDir(dir);
        segments.pop();
        break;
      }
      if (scan.damage !== null) {
        if (!isLast || scan.damage.validRecordAfter) throw corruption(segment, scan);
        truncatedBytes = cutTornTail(segment.path, scan.damage.offset);
        options.logger.warn("recovery: truncated a torn write at the end of the WAL", {
          file: segment.path, offset: scan.damage.offset, bytes: truncatedBytes, reason: scan.damage.reason,
        });
      }
      segment.sizeBytes = scan.dataEndBytes;
      if (scan.entries.length === 0 && segment.firstIndex !== prevIndex + 1) {
        // A segment that starts the log over (resetTo) and holds nothing yet.
        finalFrom = { seq: segment.seq, offset: 0, index: segment.firstIndex };
        firstRead ??= finalFrom;
        prevIndex = segment.firstIndex - 1;
      }
      for (let k = 0; k < scan.entries.length; k++) {
        const entry = scan.entries[k]!;
        if (entry.index !== prevIndex + 1) {
          // The first record read, a rewrite of a suffix, or a start over: what came before may be superseded.
          finalFrom = { seq: segment.seq, offset: scan.offsets[k]!, index: entry.index };
          firstRead ??= finalFrom;
        }
        prevIndex = entry.index;
        replay.add(entry, segment.firstIndex, (what) => new SvcError("WAL_CORRUPT", `WAL segment ${segment.path} ${what}`, {
          hint: walWayOut,
          details: { file: segment.path },
        }), k === 0);
        segment.maxIndex = Math.max(segment.maxIndex, entry.index);
      }
    }
    // A WAL that holds no entry yet but a segment (made after a snapshot: a restored backup,
    // init-cluster) continues after it, as resetTo() left it.
    const lastIndex = replay.lastIndex > 0 ? replay.lastIndex : Math.max(0, (segments.at(-1)?.firstIndex ?? 1) - 1);
    const skippedBefore = skippedAny && finalFrom !== null && finalFrom === firstRead ? finalFrom : null;
    const wal = new Wal(dir, options, segments, lastIndex, finalFrom, skippedBefore);
    return { wal, entries: replay.kept, truncatedBytes, lastRecordTerm: replay.lastTerm };
  }

  get lastIndex(): number {
    return this.lastIndexValue;
  }

  segments(): readonly SegmentInfo[] {
    return this.segmentList;
  }

  /** Where the records no later record rewrites begin (see WalFinalFrom); null when none. */
  finalFrom(): WalFinalFrom | null {
    return this.finalFromValue;
  }

  /**
   * Learn, once, whether the final stretch reaches back into the segments open skipped: their
   * records are read in the background, a window per turn (see findFinalFrom). Until it is
   * done, finalFrom stays where open began reading, which is safe (it only says less is held).
   */
  learnSkippedFinalFrom(): Promise<void> {
    const firstRead = this.skippedBefore;
    if (firstRead === null) return Promise.resolve();
    this.skippedScan ??= (async () => {
      const skipped = this.segmentList.filter((s) => s.seq < firstRead.seq);
      let found: WalFinalFrom | null = null;
      try {
        found = await findFinalFrom(skipped, firstRead.index);
      } catch (e) {
        this.options.logger.warn("could not read the WAL segments skipped at start-up; entries in them are not sent to members behind", { error: errorMessage(e) });
      }
      this.skippedBefore = null;
      // A rewrite, a start over or a removal since open moved finalFrom: what was learned is moot.
      if (found === null || this.finalFromValue !== firstRead || this.closed) return;
      const oldest = this.segmentList[0];
      assert(oldest !== undefined, "a WAL with a final stretch has a segment");
      // Segments removed while reading: the records after them are all final (as in removeSegmentsCoveredBy).
      this.finalFromValue = found.seq >= oldest.seq ? found : { seq: oldest.seq, offset: 0, index: oldest.firstIndex };
    })();
    return this.skippedScan;
  }

  /**
   * Write entries after (or replacing a suffix of) the log. Not durable until sync().
   * Entries must be contiguous and start at most one past the last index.
   */
  append(entries: readonly Entry[]): void {
    const first = entries[0];
    if (first === undefined) return;
    assert(first.index <= this.lastIndexValue + 1 || this.lastIndexValue === 0, "WAL append leaves no gap");
    for (let i = 1; i < entries.length; i++) assert(entries[i]!.index === first.index + i, "WAL append entries are contiguous");
    this.rollIfFull(first.index);
    const segment = this.currentSegment();
    const rewrites = this.finalFromValue === null || first.index !== this.lastIndexValue + 1;
    const fd = this.openFd();
    // Encoded and written a kept buffer's worth at a time: a follower catching up appends
    // megabytes at once, and a buffer made for them cost fresh pages, zeroed, every time.
    let total = 0;
    try {
      for (let from = 0; from < entries.length;) {
        const written = this.writeRecordsAt(fd, entries, from, segment.sizeBytes + total);
        total += written.bytes;
        from = written.to;
      }
    } catch (e) {
      if (!isDiskFullError(e)) throw e;
      let attempted = 0;
      for (const entry of entries) attempted += recordHeaderBytes + entryHeaderBytes + entry.data.length;
      this.undoPartialWrite(fd, segment, attempted);
      throw new DiskFullError(
        `no space left to append ${attempted} bytes to the WAL segment ${segment.path} (${describeFree(this.dir)})`,
        segment.path, freeBytes(this.dir), { cause: e },
      );
    }
    if (rewrites) this.finalFromValue = { seq: segment.seq, offset: segment.sizeBytes, index: first.index };
    this.mark(first.index, segment.seq, segment.sizeBytes);
    segment.sizeBytes += total;
    this.unsyncedBytes += total;
    const last = entries[entries.length - 1];
    assert(last !== undefined, "non-empty append");
    this.lastIndexValue = last.index;
    segment.maxIndex = Math.max(segment.maxIndex, last.index);
    if (segment.sizeBytes * 2 > this.options.segmentSizeBytes) this.prepareSpare();
  }

  /**
   * Writes the records of entries[from…] at `at`, as many as fit the kept append buffer (at
   * least one); returns the index of the first entry left and the bytes written.
   */
  private writeRecordsAt(fd: number, entries: readonly Entry[], from: number, at: number): { to: number; bytes: number } {
    let to = from;
    let bytes = 0;
    while (to < entries.length) {
      const recordBytes = recordHeaderBytes + entryHeaderBytes + entries[to]!.data.length;
      if (to > from && bytes + recordBytes > appendBufferBytesKept) break;
      bytes += recordBytes;
      to++;
    }
    const buf = this.appendBufferOf(bytes);
    const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
    let offset = 0;
    for (let i = from; i < to; i++) offset = writeEntryRecord(buf, view, offset, RecordType.entry, entries[i]!);
    assert(offset === bytes, "WAL batch fills its buffer exactly");
    writeFullyAt(fd, buf, at);
    return { to, bytes };
  }

  /** `bytes` of buffer for append() to fill entirely (records leave no byte unwritten). */
  private appendBufferOf(bytes: number): Uint8Array {
    if (bytes > appendBufferBytesKept) return new Uint8Array(bytes);
    if (this.appendBuffer.byteLength < bytes) this.appendBuffer = new Uint8Array(Math.min(appendBufferBytesKept, Math.max(bytes, 2 * this.appendBuffer.byteLength)));
    return this.appendBuffer.subarray(0, bytes);
  }

  /** Note where the record of `index` begins, unless a mark within walMarkEveryEntries before it exists. */
  private mark(index: number, seq: number, offset: number): void {
    while (this.marks.length > 0 && this.marks[this.marks.length - 1]!.index >= index) this.marks.pop();
    const last = this.marks.at(-1);
    if (last === undefined || index - last.index >= walMarkEveryEntries) this.marks.push({ seq, offset, index });
  }

  /**
   * The mark nearest before `index` (at or below it): a record boundary of an entry at or
   * below `index`, from which the records run on in index order unless a later rewrite moved
   * finalFrom past it (the reader checks). Null when there is none.
   */
  markAtOrBefore(index: number): WalFinalFrom | null {
    let lo = 0;
    let hi = this.marks.length - 1;
    let found: WalFinalFrom | null = null;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const m = this.marks[mid]!;
      if (m.index <= index) {
        found = m;
        lo = mid + 1;
      } else {
        hi = mid - 1;
      }
    }
    return found;
  }

  /**
   * Take back the bytes of an append that failed part-way: zero what may have been written
   * past the last whole record and give back what grew the file beyond its preallocated
   * size. The next append writes at the same offset again. Should this fail too, the WAL's
   * tail is unknown and the node must stop (the error is not a disk-full one).
   */
  private undoPartialWrite(fd: number, segment: SegmentInfo, attemptedBytes: number): void {
    const fileBytes = fs.fstatSync(fd).size;
    const keepBytes = Math.max(segment.sizeBytes, Math.min(fileBytes, this.options.segmentSizeBytes));
    if (fileBytes > keepBytes) fs.ftruncateSync(fd, keepBytes);
    const zeroEnd = Math.min(keepBytes, segment.sizeBytes + attemptedBytes);
    if (zeroEnd > segment.sizeBytes) zeroRange(fd, segment.sizeBytes, zeroEnd);
  }

  /**
   * Write the next segment's zeros ahead of time on the I/O thread pool, so that rolling to
   * it costs the writing thread a header and a rename, not tens of megabytes of zeros. The
   * spare is named *.wal.creating: a crash leaves it to be removed on open.
   */
  private prepareSpare(): void {
    if (this.sparePending || this.spareReady !== null || this.closed || Date.now() < this.spareRetryAtMs) return;
    this.sparePending = true;
    const path = join(this.dir, `spare-${process.pid}-${Date.now()}.wal.creating`);
    const sizeBytes = this.options.segmentSizeBytes;
    void (async () => {
      if ((freeBytes(this.dir) ?? Number.MAX_SAFE_INTEGER) < 2 * sizeBytes) {
        // Too little room to make a spare and keep space for the log: the roll makes its own.
        throw new Error(`only ${describeFree(this.dir)}, less than two segments`);
      }
      // A page per write, flushed a megabyte at a time, on a thread of its own (zero-fill-worker.ts).
      const fill = zeroFillOffThread(path, sizeBytes);
      this.spareInProgress = { path, cancel: fill.cancel };
      await fill.done;
      return path;
    })().then(
      (ready) => {
        this.sparePending = false;
        this.spareInProgress = null;
        if (this.closed) fs.rmSync(ready, { force: true });
        else this.spareReady = ready;
      },
      (e: unknown) => {
        // No spare: the next roll writes its zeros itself, as without one.
        this.sparePending = false;
        this.spareInProgress = null;
        this.spareRetryAtMs = Date.now() + spareRetryDelayMs;
        fs.rmSync(path, { force: true });
        if (this.closed) return;
        this.options.logger.warn("could not prepare the next WAL segment ahead of time", { error: e instanceof Error ? e.message : String(e) });
      },
    );
  }

  /**
   * Make every appended record durable (one fdatasync for all of them).
   *
   * A failed fsync (EIO, and ENOSPC too, which NFS and thin-provisioned disks give here) is
   * never retried: Linux may already have dropped the dirty pages it could not write and
   * marked them clean, so a second fsync can succeed without the data ever reaching the disk
   * (PostgreSQL's "fsyncgate", 2018). The error reaches the node, which stops without
   * acknowledging anything the sync covered and replays the WAL from the disk on restart.
   */
  sync(): void {
    if (this.unsyncedBytes === 0 || this.fd === null) return;
    fs.fdatasyncSync(this.fd);
    this.unsyncedBytes = 0;
  }

  /**
   * The same as sync(), on a worker thread: the caller's thread goes on (accepting the next
   * batch of writes) while the disk flushes. No append may happen until it resolves.
   */
  async syncAsync(): Promise<void> {
    const fd = this.fd;
    if (this.unsyncedBytes === 0 || fd === null) return;
    const bytes = this.unsyncedBytes;
    this.syncer ??= new Syncer();
    await this.syncer.fdatasync(fd);
    this.unsyncedBytes -= bytes;
  }

  /**
   * Start over after a snapshot replaced the whole log: new entries begin at
   * `nextIndex`; every older segment becomes removable (see removeSegmentsCoveredBy).
   */
  resetTo(nextIndex: number): void {
    const segment = this.startSegment(nextIndex);
    this.marks.length = 0;
    this.lastIndexValue = nextIndex - 1;
    this.finalFromValue = { seq: segment.seq, offset: 0, index: nextIndex };
  }

  /**
   * Remove the segments whose entries are all at or below `index` (covered by a snapshot),
   * oldest first, never the segment being written, and only while `mayRemove(segment)`
   * agrees (WAL archiving keeps a segment until it is archived). Returns what was removed.
   * `syncDir: false` leaves the fsync of the directory to the caller (see fsyncPathAsync).
   */
  removeSegmentsCoveredBy(index: number, mayRemove: (s: SegmentInfo) => boolean = () => true, options: { syncDir?: boolean } = {}): SegmentInfo[] {
    const removed: SegmentInfo[] = [];
    while (this.segmentList.length > 1) {
      const oldest = this.segmentList[0];
      assert(oldest !== undefined, "non-empty segment list");
      if (oldest.maxIndex > index || !mayRemove(oldest)) break;
      fs.rmSync(oldest.path, { force: true });
      this.segmentList.shift();
      removed.push(oldest);
      while (this.marks.length > 0 && this.marks[0]!.seq <= oldest.seq) this.marks.shift();
      const next = this.segmentList[0];
      if (next !== undefined && this.finalFromValue !== null && this.finalFromValue.seq <= oldest.seq) {
        // The records after the removed one's are all final: they come after finalFrom.
        this.finalFromValue = { seq: next.seq, offset: 0, index: next.firstIndex };
      }
    }
    if (removed.length > 0 && options.syncDir !== false) fsyncDir(this.dir);
    return removed;
  }

  close(): void {
    this.closed = true;
    if (this.spareReady !== null) {
      fs.rmSync(this.spareReady, { force: true });
      this.spareReady = null;
    }
    // A spare still being written is stopped and removed now: left to finish, its thread went on
    // writing into the directory after close (into a repair's quarantine, for one).
    this.abandonSpare();
    this.syncer?.close();
    this.syncer = null;
    if (this.fd === null) return;
    this.sync();
    fs.closeSync(this.fd);
    this.fd = null;
  }

  /** Stop the spare being written, if one is, and remove it (its rejection handler then notes no spare for a while). */
  private abandonSpare(): void {
    if (this.spareInProgress === null) return;
    this.spareInProgress.cancel();
    fs.rmSync(this.spareInProgress.path, { force: true });
    this.spareInProgress = null;
  }

  private currentSegment(): SegmentInfo {
    const segment = this.segmentList[this.segmentList.length - 1];
    assert(segment !== undefined, "a segment exists before writing");
    return segment;
  }

  private rollIfFull(nextIndex: number): void {
    const current = this.segmentList[this.segmentList.length - 1];
    if (current === undefined || current.sizeBytes >= this.options.segmentSizeBytes) this.startSegment(nextIndex);
    else if (current.maxIndex === 0 && current.firstIndex !== nextIndex) this.startSegment(nextIndex);
  }

  private startSegment(firstIndex: number): SegmentInfo {
    // The finished segment is synced before the next exists, so only the last segment
    // can ever have a torn tail. (Usually the last sync covered it all: an fdatasync with
    // nothing to write still flushes the disk's cache, so it is skipped.)
    if (this.fd !== null) {
      if (this.unsyncedBytes > 0) fs.fdatasyncSync(this.fd);
      fs.closeSync(this.fd);
      this.fd = null;
      this.unsyncedBytes = 0;
    }
    const last = this.segmentList[this.segmentList.length - 1];
    const seq = last === undefined ? 1 : last.seq + 1;
    const name = segmentName(seq, firstIndex);
    const path = join(this.dir, name);
    // Built under a temp name (ignored by listSegments) and renamed once whole, so a crash
    // never leaves a segment without its header.
    const header = segmentHeaderPayload(seq, firstIndex);
    const buf = new Uint8Array(recordHeaderBytes + header.length);
    encodeRecordInto(buf, 0, RecordType.header, header);
    const spare = this.spareReady;
    this.spareReady = null;
    let fd: number;
    let tmpPath: string;
    const spareFd = spare === null ? null : openOrNull(spare);
    if (spare !== null && spareFd !== null) {
      // The zeros were written ahead of time, off this thread: only the header is left.
      tmpPath = spare;
      fd = spareFd;
    } else {
      if (spare !== null) fs.rmSync(spare, { force: true });
      tmpPath = `${path}.creating`;
      fd = fs.openSync(tmpPath, "w", 0o640);
    }
    try {
      if (tmpPath === spare) writeFullyAt(fd, buf, 0);
      else {
        writeFully(fd, buf);
        reserveZeros(fd, buf.length, this.options.segmentSizeBytes);
      }
      fs.fdatasyncSync(fd);
      fs.renameSync(tmpPath, path);
    } catch (e) {
      // Never leave a partial segment behind: it would hold the space that ran out.
      fs.closeSync(fd);
      fs.rmSync(tmpPath, { force: true });
      if (!isDiskFullError(e)) throw e;
      // The log comes before a spare: one being written ahead holds space this roll needs.
      this.abandonSpare();
      const sizeMb = this.options.segmentSizeBytes / (1024 * 1024);
      throw new DiskFullError(
        `no space for a new WAL segment of ${sizeMb} MiB (wal.segment_size_mb = ${sizeMb}) in ${this.dir}: ${describeFree(this.dir)}`,
        this.dir, freeBytes(this.dir), { cause: e },
      );
    }
    fsyncDir(this.dir);
    this.fd = fd;
    const segment: SegmentInfo = { seq, firstIndex, path, name, maxIndex: 0, sizeBytes: buf.length };
    this.segmentList.push(segment);
    return segment;
  }

  private openFd(): number {
    if (this.fd === null) {
      const segment = this.currentSegment();
      this.fd = fs.openSync(segment.path, "r+");
    }
    return this.fd;
  }
}


const walWayOut =
  "stop the node and run `svc admin wal-repair --skip-corrupted --dry-run`, then without --dry-run: it keeps every intact entry, says which indexes are lost " +
  "(a cluster member fetches them again from the leader; a single-node cluster loses them) and leaves a WAL the node starts from. " +
  "On a member of a multi-node cluster, removing raft/ and store/ also rebuilds it from the leader; never on a single-node cluster, where that erases all its data";

/**
 * A file named as a segment that is another one (an operator's copy of a segment beside it, a
 * renamed file) would be read as part of the log: a copy with a later number as a rewrite of
 * everything after its first entry, after which the segments it "replaced" are removed; and a
 * repair would cut the log back to it. Neither the node nor wal-repair goes on with one: each
 * segment's header (its first record alone) is read and compared with its name first. A header
 * that does not read is left to the damage checks that follow.
 */
export function checkSegmentNames(segments: readonly SegmentInfo[]): void {
  for (const segment of segments) {
    const mismatch = segmentNameMismatch(segment, readSegmentHeader(segment.path));
    if (mismatch === null) continue;
    throw new SvcError("RAFT_STATE_INVALID", `${segment.path} is not a segment of this WAL: ${mismatch}`, {
      hint: `move ${segment.name} out of ${dirname(segment.path)} (keep it until the node runs again) and start the node; the WAL's own segments are named <seq>-<first index>.wal as their headers say`,
      details: { file: segment.path },
    });
  }
}

function corruption(segment: SegmentInfo, scan: SegmentScan): SvcError {
  const damage = scan.damage;
  assert(damage !== null, "corruption has damage");
  return new SvcError(
    "WAL_CORRUPT",
    `WAL is corrupt: ${segment.path} at byte offset ${damage.offset}: ${damage.reason}` +
      (damage.afterIndex > 0 ? ` (after entry ${damage.afterIndex})` : ""),
    { hint: walWayOut, details: { file: segment.path, offset: damage.offset, afterIndex: damage.afterIndex } },
  );
}

const spareRetryDelayMs = 60_000;

function describeFree(dir: string): string {
  const free = freeBytes(dir);
  return free === null ? "free space unknown" : `${free} bytes free`;
}

function openOrNull(path: string): number | null {
  try {
    return fs.openSync(path, "r+");
  } catch {
    return null;
  }
}

/** Zero [fromBytes, toBytes), bytes the file holds, by writing zeros over them (see _zero-fill.ts). */
function zeroRange(fd: number, fromBytes: number, toBytes: number): void {
  writeZeroPages(fd, fromBytes, toBytes);
}

/**
 * Make a file of zeros at `path` on a short-lived worker thread: `done` rejects as the write
 * did; `cancel` stops the thread and rejects it.
 */
function zeroFillOffThread(path: string, sizeBytes: number): { done: Promise<void>; cancel: () => void } {
  let cancel = (): void => undefined;
  const done = new Promise<void>((resolve, reject) => {
    const worker = new Worker(workerSpecifier(import.meta.url, "storage/zero-fill-worker.ts"));
    worker.unref();
    let settled = false;
    const finish = (error: Error | null): void => {
      if (settled) return;
      settled = true;
      worker.terminate();
      if (error === null) resolve();
      else reject(error);
    };
    worker.onmessage = (event: MessageEvent<ZeroFillReply>) => {
      const e = event.data.error;
      finish(e === null ? null : Object.assign(new Error(e.message), { code: e.code ?? undefined }));
    };
    worker.onerror = (event) => finish(new Error(`the WAL's zero-fill thread failed: ${event.message}`));
    cancel = () => finish(new Error("the WAL was closed"));
    worker.postMessage({ path, sizeBytes } satisfies ZeroFillRequest);
  });
  return { done, cancel };
}

/** Zero a torn tail from `offset` to the last non-zero byte; returns how many bytes were cut. */
function cutTornTail(path: string, offset: number): number {
  const fd = fs.openSync(path, "r+");
  try {
    const end = nonZeroEndOfFile(fd, fs.fstatSync(fd).size);
    zeroRange(fd, offset, Math.max(offset, end));
    fs.fsyncSync(fd);
    return Math.max(0, end - offset);
  } finally {
    fs.closeSync(fd);
  }
}

function writeFullyAt(fd: number, data: Uint8Array, position: number): void {
  let written = 0;
  while (written < data.length) {
    written += fs.writeSync(fd, data, written, data.length - written, position + written);
  }
}
