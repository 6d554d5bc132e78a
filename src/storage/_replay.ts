// Replaying WAL records into the log they describe, keeping in memory only the entries after
// a given index: a store durable up to index N needs the log after N, and a WAL kept back to
// the newest image may hold gigabytes before it. The entries not kept are tracked by their
// index range only, so every rule of the replay still holds for them: a later record for
// index i replaces i and everything after it; a segment that starts the log over supersedes
// what came before; any other jump is damage.

import type { Entry } from "../util/log-data.ts";
import { SvcError } from "../util/errors.ts";

export class ReplayLog {
  /** Index range of the entries replayed but not kept (all at or below keepAfter); null when none. */
  private skipped: { first: number; last: number } | null = null;
  readonly kept: Entry[] = [];

  constructor(private readonly keepAfter: number) {}

  get firstIndex(): number {
    return this.skipped?.first ?? this.kept[0]?.index ?? 0;
  }

  get lastIndex(): number {
    return this.kept.at(-1)?.index ?? this.skipped?.last ?? 0;
  }

  private get empty(): boolean {
    return this.skipped === null && this.kept.length === 0;
  }

  /** One record, in WAL order; `segmentFirstIndex` is the first index its segment's name gives. */
  add(entry: Entry, segmentFirstIndex: number, damage: (message: string) => SvcError): void {
    if (!this.empty) {
      const first = this.firstIndex;
      const last = this.lastIndex;
      if (entry.index === last + 1) {
        // the usual case: the next entry
      } else if (entry.index >= first && entry.index <= last) {
        this.truncateFrom(entry.index);
      } else if (entry.index < first || entry.index === segmentFirstIndex) {
        // The log was started over at this segment (resetTo after a snapshot install, with
        // the crash coming before the older segments were removed): the older entries are
        // superseded. The node checks that a snapshot covers whatever precedes the log.
        this.skipped = null;
        this.kept.length = 0;
      } else {
        throw damage(`jumps from index ${last} to ${entry.index}`);
      }
    }
    this.append(entry);
  }

  /**
   * A segment's whole range, all at or below keepAfter, taken without reading its records
   * (they are not kept anyway): the same rules as for its first record, then the rest.
   */
  addRange(first: number, last: number): void {
    if (!this.empty) {
      if (first >= this.firstIndex && first <= this.lastIndex) {
        this.truncateFrom(first);
      } else if (first !== this.lastIndex + 1) {
        // A segment that starts the log over (see add): the older entries are superseded.
        this.skipped = null;
        this.kept.length = 0;
      }
    }
    // Every entry kept so far lies after keepAfter, and this range at or before it: the range
    // can only follow the skipped part (a kept entry before it was replaced by this segment).
    this.kept.length = 0;
    this.skipped = this.skipped === null || this.skipped.last + 1 !== first ? { first, last } : { first: this.skipped.first, last };
  }

  private truncateFrom(index: number): void {
    const keptFirst = this.kept[0]?.index;
    if (keptFirst !== undefined && index >= keptFirst) {
      this.kept.length = index - keptFirst;
      return;
    }
    this.kept.length = 0;
    if (this.skipped !== null) this.skipped = index > this.skipped.first ? { first: this.skipped.first, last: index - 1 } : null;
  }

  private append(entry: Entry): void {
    if (entry.index > this.keepAfter) {
      this.kept.push(entry);
    } else if (this.skipped === null) {
      this.skipped = { first: entry.index, last: entry.index };
    } else {
      this.skipped = { first: this.skipped.first, last: entry.index };
    }
  }
}
