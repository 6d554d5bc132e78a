// Replaying WAL records into the log they describe, keeping in memory only the entries after
// a given index: a store durable up to index N needs the log after N, and a WAL kept back to
// the newest image may hold gigabytes before it. The entries not kept are tracked by their
// index range only, so every rule of the replay still holds for them: a later record for
// index i replaces i and everything after it; a segment that starts the log over supersedes
// what came before; any other jump is damage. A later record for index i with i's own term is
// damage too (a stale copy of a record): the log rewrites an index only with another term, the
// first one where a new leader's log differs.

import type { Entry } from "../util/log-data.ts";
import { SvcError } from "../util/errors.ts";

export class ReplayLog {
  /** Index range of the entries replayed but not kept (all at or below keepAfter); null when none. */
  private skipped: { first: number; last: number } | null = null;
  /** The terms of the skipped range, as runs in index order (term 0: unknown, a segment not read). */
  private skippedTerms: { from: number; term: number }[] = [];
  readonly kept: Entry[] = [];

  constructor(private readonly keepAfter: number) {}

  get firstIndex(): number {
    return this.skipped?.first ?? this.kept[0]?.index ?? 0;
  }

  get lastIndex(): number {
    return this.kept.at(-1)?.index ?? this.skipped?.last ?? 0;
  }

  /** The term of the last entry replayed (0: none, or in a segment whose records were not read). */
  get lastTerm(): number {
    const last = this.lastIndex;
    return last > 0 ? this.termAt(last) : 0;
  }

  private get empty(): boolean {
    return this.skipped === null && this.kept.length === 0;
  }

  /**
   * One record, in WAL order; `segmentFirstIndex` is the first index its segment's name gives,
   * `firstInSegment` whether it is that segment's first entry record.
   */
  add(entry: Entry, segmentFirstIndex: number, damage: (message: string) => SvcError, firstInSegment = false): void {
    if (!this.empty) {
      const first = this.firstIndex;
      const last = this.lastIndex;
      if (entry.index === last + 1) {
        // the usual case: the next entry
      } else if (entry.index >= first && entry.index <= last) {
        // The first record of a segment named for its index may start the log over (resetTo) with the same entries.
        const startsOver = firstInSegment && entry.index === segmentFirstIndex;
        if (!startsOver && this.termAt(entry.index) === entry.term) {
          throw damage(`holds a second record for entry ${entry.index} of term ${entry.term}, after entries up to ${last}: the log never rewrites an entry with its own term, so this is a stale copy, not a rewrite`);
        }
        this.truncateFrom(entry.index);
      } else if (entry.index < first || entry.index === segmentFirstIndex) {
        // The log was started over at this segment (resetTo after a snapshot install, with
        // the crash coming before the older segments were removed): the older entries are
        // superseded. The node checks that a snapshot covers whatever precedes the log.
        this.skipped = null;
        this.skippedTerms = [];
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
        this.skippedTerms = [];
        this.kept.length = 0;
      }
    }
    // Every entry kept so far lies after keepAfter, and this range at or before it: the range
    // can only follow the skipped part (a kept entry before it was replaced by this segment).
    this.kept.length = 0;
    if (this.skipped === null || this.skipped.last + 1 !== first) {
      this.skipped = { first, last };
      this.skippedTerms = [];
    } else {
      this.skipped = { first: this.skipped.first, last };
    }
    this.skippedTerms.push({ from: first, term: 0 });
  }

  /** The term of the entry replayed for `index`; 0 when not known (a segment not read). */
  private termAt(index: number): number {
    const keptFirst = this.kept[0]?.index;
    if (keptFirst !== undefined && index >= keptFirst) return this.kept[index - keptFirst]?.term ?? 0;
    let term = 0;
    for (const run of this.skippedTerms) {
      if (run.from > index) break;
      term = run.term;
    }
    return term;
  }

  private truncateFrom(index: number): void {
    const keptFirst = this.kept[0]?.index;
    if (keptFirst !== undefined && index >= keptFirst) {
      this.kept.length = index - keptFirst;
      return;
    }
    this.kept.length = 0;
    if (this.skipped !== null) this.skipped = index > this.skipped.first ? { first: this.skipped.first, last: index - 1 } : null;
    this.skippedTerms = this.skipped === null ? [] : this.skippedTerms.filter((r) => r.from < index);
  }

  private append(entry: Entry): void {
    if (entry.index > this.keepAfter) {
      this.kept.push(entry);
    } else {
      this.skipped = this.skipped === null ? { first: entry.index, last: entry.index } : { first: this.skipped.first, last: entry.index };
      if (this.skippedTerms.at(-1)?.term !== entry.term) this.skippedTerms.push({ from: entry.index, term: entry.term });
    }
  }
}
