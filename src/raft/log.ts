// The core's in-memory view of the Raft log: the latest snapshot point plus every entry after
// it. It also tracks which entries the node has made durable (persistedIndex) and which it has
// not yet been handed in a Ready (unstableFrom), so that a Ready can carry exactly the new
// suffix even when entries are truncated while an earlier Ready is still being persisted.

import { assert } from "../util/index.ts";
import type { Entry, SnapshotMeta } from "./types.ts";

/** Per-entry overhead counted against byte limits besides its data (ids, terms, framing). */
export const entryOverheadBytes = 32;

export function entrySizeBytes(e: Entry): number {
  return e.data.length + entryOverheadBytes;
}

export class RaftLog {
  /** The latest snapshot the log starts after; null when the log starts at index 1. */
  private snapshotMeta: SnapshotMeta | null;
  /** Invariant: entries[i].index === snapshotIndex() + 1 + i, terms non-decreasing. */
  private entries: Entry[];
  /** Highest index known committed. Invariant: snapshotIndex() <= commit <= lastIndex(). */
  commit: number;
  /** Entries up to here are durable at the node and equal to ours. */
  persistedIndex: number;
  /** First index not yet handed to the node in a Ready. Invariant: persistedIndex < unstableFrom. */
  unstableFrom: number;
  /** A snapshot received from the leader that the node has not been handed yet. */
  pendingSnapshot: SnapshotMeta | null = null;

  constructor(snapshot: SnapshotMeta | null, entries: readonly Entry[], commit: number) {
    this.snapshotMeta = snapshot;
    this.entries = [...entries];
    const first = this.firstIndex();
    for (let i = 0; i < this.entries.length; i++) {
      const e = this.entries[i]!;
      assert(e.index === first + i, "stored entries are contiguous after the snapshot");
      if (i > 0) assert(e.term >= this.entries[i - 1]!.term, "stored entry terms never decrease");
    }
    if (this.entries.length > 0 && snapshot !== null) {
      assert(this.entries[0]!.term >= snapshot.term, "stored entries follow the snapshot's term");
    }
    this.persistedIndex = this.lastIndex();
    this.unstableFrom = this.lastIndex() + 1;
    assert(commit >= this.snapshotIndex() && commit <= this.lastIndex(), "commit lies within the log");
    this.commit = commit;
  }

  snapshot(): SnapshotMeta | null {
    return this.snapshotMeta;
  }

  snapshotIndex(): number {
    return this.snapshotMeta?.index ?? 0;
  }

  firstIndex(): number {
    return this.snapshotIndex() + 1;
  }

  lastIndex(): number {
    return this.snapshotIndex() + this.entries.length;
  }

  lastTerm(): number {
    return this.term(this.lastIndex()) ?? 0;
  }

  /** The term of the entry at index, or undefined when it is compacted or beyond the log. */
  term(index: number): number | undefined {
    if (index === 0) return 0;
    const snapIndex = this.snapshotIndex();
    if (index === snapIndex) return this.snapshotMeta?.term ?? 0;
    if (index < snapIndex || index > this.lastIndex()) return undefined;
    return this.entries[index - snapIndex - 1]?.term;
  }

  entry(index: number): Entry | undefined {
    if (index <= this.snapshotIndex()) return undefined;
    return this.entries[index - this.snapshotIndex() - 1];
  }

  matchTerm(index: number, term: number): boolean {
    return this.term(index) === term;
  }

  /** §5.4.1: a candidate's log is at least as up to date as ours. */
  isUpToDate(lastIndex: number, lastTerm: number): boolean {
    const ourTerm = this.lastTerm();
    return lastTerm > ourTerm || (lastTerm === ourTerm && lastIndex >= this.lastIndex());
  }

  /**
   * Entries in [lo, hi] (inclusive), stopping early at maxCount or once maxBytes is reached
   * (always at least one entry if any). Undefined when lo is compacted.
   */
  slice(lo: number, hi: number, maxCount: number, maxBytes: number): Entry[] | undefined {
    if (lo <= this.snapshotIndex()) return undefined;
    const out: Entry[] = [];
    let bytes = 0;
    for (let i = lo; i <= Math.min(hi, this.lastIndex()) && out.length < maxCount; i++) {
      const e = this.entry(i);
      assert(e !== undefined, "entry inside the log exists");
      const size = entrySizeBytes(e);
      if (out.length > 0 && bytes + size > maxBytes) break;
      bytes += size;
      out.push(e);
    }
    return out;
  }

  /** Leader append: entries continue the log directly. */
  append(entries: readonly Entry[]): void {
    for (const e of entries) {
      assert(e.index === this.lastIndex() + 1, "appended entries continue the log");
      assert(e.term >= this.lastTerm(), "appended entry terms never decrease");
      this.entries.push(e);
    }
  }

  /**
   * The index of the first of entries whose term differs from ours (or that we lack), or 0
   * when we already hold all of them. entries must be contiguous.
   */
  findConflict(entries: readonly Entry[]): number {
    for (const e of entries) {
      if (!this.matchTerm(e.index, e.term)) return e.index;
    }
    return 0;
  }

  /**
   * Starting at index and walking down, the first entry whose term is <= term, as
   * {index, term}. Used both by a follower to build a reject hint and by the leader to
   * skip a whole conflicting term. A compacted index yields term 0.
   */
  findConflictByTerm(index: number, term: number): { index: number; term: number } {
    let i = Math.min(index, this.lastIndex());
    for (;;) {
      const t = this.term(i);
      if (t === undefined) return { index: i, term: 0 };
      if (t <= term) return { index: i, term: t };
      i--;
    }
  }

  /**
   * Follower append: replace our suffix from entries[0].index with entries. The caller has
   * checked that the first entry directly follows a matching entry and that nothing at or
   * below commit is replaced.
   */
  truncateAndAppend(entries: readonly Entry[]): void {
    const first = entries[0];
    if (first === undefined) return;
    assert(first.index > this.commit, "committed entries are never replaced");
    assert(first.index > this.snapshotIndex(), "entries after the snapshot");
    assert(first.index <= this.lastIndex() + 1, "no gap before the appended entries");
    this.entries.length = first.index - this.firstIndex();
    this.persistedIndex = Math.min(this.persistedIndex, first.index - 1);
    this.unstableFrom = Math.min(this.unstableFrom, first.index);
    this.append(entries);
  }

  commitTo(index: number): boolean {
    if (index <= this.commit) return false;
    assert(index <= this.lastIndex(), "commit never passes the last index");
    this.commit = index;
    return true;
  }

  /** Entries not yet handed to the node; marks them handed. */
  takeUnstable(): Entry[] {
    const out = this.unstableFrom > this.lastIndex() ? [] : this.entries.slice(this.unstableFrom - this.firstIndex());
    this.unstableFrom = this.lastIndex() + 1;
    return out;
  }

  hasUnstable(): boolean {
    return this.unstableFrom <= this.lastIndex();
  }

  /**
   * The node made handed entries durable: its stored suffix from handed[0].index is now
   * exactly handed. Only the prefix that still matches our log counts as persisted: entries
   * replaced since the hand-out come again in a later Ready.
   */
  persisted(handed: readonly Entry[]): void {
    const first = handed[0];
    if (first === undefined) return;
    if (this.persistedIndex < first.index - 1) return; // a gap: a truncation below them came since
    let upTo = this.persistedIndex;
    for (const e of handed) {
      if (!this.matchTerm(e.index, e.term)) break;
      upTo = e.index;
    }
    this.persistedIndex = Math.max(this.persistedIndex, upTo);
  }

  /** Follower installs a leader's snapshot: the whole log is replaced by it. */
  restore(meta: SnapshotMeta): void {
    assert(meta.index > this.commit, "a restored snapshot moves past our commit");
    this.snapshotMeta = meta;
    this.entries = [];
    this.commit = meta.index;
    this.persistedIndex = Math.min(this.persistedIndex, meta.index);
    this.unstableFrom = meta.index + 1;
    this.pendingSnapshot = meta;
  }

  /** The node installed the handed snapshot. */
  snapshotPersisted(meta: SnapshotMeta): void {
    if (this.snapshotMeta === meta) this.persistedIndex = Math.max(this.persistedIndex, meta.index);
  }

  /** The node took a local snapshot at meta.index: drop entries up to it. */
  compact(meta: SnapshotMeta): void {
    if (meta.index <= this.snapshotIndex()) return;
    assert(meta.index <= this.commit, "only committed entries are compacted");
    assert(meta.index <= this.persistedIndex, "only persisted entries are compacted");
    assert(this.term(meta.index) === meta.term, "the compaction point's term matches the log");
    this.entries = this.entries.slice(meta.index - this.snapshotIndex());
    this.snapshotMeta = meta;
  }
}
