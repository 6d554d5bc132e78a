// The search for a linearization of one key's operations: Wing & Gong's algorithm with Lowe's
// memoization, as porcupine does it. Calls and returns form one list ordered by time; the search
// walks it, tentatively linearizing any call whose operation the model accepts, and backtracks
// when it reaches the return of an operation it has not linearized yet. A (set of linearized
// operations, state) pair already explored is never explored again, and operations that cannot
// change the register are linearized as soon as they are legal, without branching.

import { outcomeUnknown, step, stateKey, type Operation, type RegisterState } from "./linearizability-model.ts";

export type SearchResult =
  | { readonly kind: "ok" }
  | {
      readonly kind: "fail";
      /** The legal order found with the most known-outcome operations, as indexes into the operations. */
      readonly longest: readonly number[];
      readonly stateAfterLongest: RegisterState;
      /** An operation that had to take effect next (its return came) but could not. */
      readonly blocking: number | null;
    }
  | { readonly kind: "timeout" };

interface Entry {
  readonly op: number;
  readonly isCall: boolean;
  /** For a call, its return; null for a return. */
  readonly match: Entry | null;
  prev: Entry | null;
  next: Entry | null;
}

function buildList(ops: readonly Operation[]): Entry {
  const events: { op: number; isCall: boolean; timeMs: number }[] = [];
  ops.forEach((op, i) => {
    events.push({ op: i, isCall: true, timeMs: op.callMs });
    events.push({ op: i, isCall: false, timeMs: op.returnMs });
  });
  // At equal times calls come first: operations that merely touch are treated as concurrent,
  // which can hide an anomaly but never invents one.
  events.sort((a, b) => a.timeMs - b.timeMs || (a.isCall === b.isCall ? a.op - b.op : a.isCall ? -1 : 1));
  const head: Entry = { op: -1, isCall: false, match: null, prev: null, next: null };
  const returns = new Map<number, Entry>();
  for (const e of events) {
    if (!e.isCall) returns.set(e.op, { op: e.op, isCall: false, match: null, prev: null, next: null });
  }
  let last = head;
  for (const e of events) {
    const entry: Entry = e.isCall ? { op: e.op, isCall: true, match: returns.get(e.op) ?? null, prev: null, next: null } : returns.get(e.op)!;
    entry.prev = last;
    last.next = entry;
    last = entry;
  }
  return head;
}

/** Unlinks a call and its return. A call always precedes its return, so call.next is set. */
function lift(call: Entry): void {
  call.prev!.next = call.next;
  call.next!.prev = call.prev;
  const ret = call.match!;
  ret.prev!.next = ret.next;
  if (ret.next !== null) ret.next.prev = ret.prev;
}

function unlift(call: Entry): void {
  const ret = call.match!;
  ret.prev!.next = ret;
  if (ret.next !== null) ret.next.prev = ret;
  call.prev!.next = call;
  call.next!.prev = call;
}

/**
 * The set of linearized operations, with a compact exact key for the memo. Known-outcome
 * operations are ranked by call time; all ranks below the watermark are linearized, and only the
 * few linearized ranks above it (operations overlapping the frontier) are listed. Unknown-outcome
 * operations, which may stay unlinearized forever, are kept in a bitset of their own.
 */
class LinearizedSet {
  /** Rank among known operations by call time, or -1 - (rank among unknown ones). */
  readonly #rank: Int32Array;
  readonly #known: Uint8Array;
  readonly #unknown: Uint32Array;
  /** Invariant: every known rank below it is linearized, and rank #watermark is not. */
  #watermark = 0;
  #knownCount = 0;

  constructor(ops: readonly Operation[]) {
    this.#rank = new Int32Array(ops.length);
    const byCall = ops.map((op, i) => i).sort((a, b) => ops[a]!.callMs - ops[b]!.callMs || a - b);
    let known = 0;
    let unknown = 0;
    for (const i of byCall) this.#rank[i] = outcomeUnknown(ops[i]!) ? -1 - unknown++ : known++;
    this.#known = new Uint8Array(known + 1);
    this.#unknown = new Uint32Array(Math.ceil(unknown / 32));
  }

  get knownCount(): number {
    return this.#knownCount;
  }

  add(op: number): void {
    const rank = this.#rank[op]!;
    if (rank < 0) {
      this.#unknown[(-1 - rank) >>> 5]! |= 1 << ((-1 - rank) & 31);
      return;
    }
    this.#known[rank] = 1;
    this.#knownCount++;
    while (this.#known[this.#watermark] === 1) this.#watermark++;
  }

  remove(op: number): void {
    const rank = this.#rank[op]!;
    if (rank < 0) {
      this.#unknown[(-1 - rank) >>> 5]! &= ~(1 << ((-1 - rank) & 31));
      return;
    }
    this.#known[rank] = 0;
    this.#knownCount--;
    if (rank < this.#watermark) this.#watermark = rank;
  }

  key(state: RegisterState): string {
    let key = `${stateKey(state)}#${this.#watermark}`;
    let above = this.#knownCount - this.#watermark;
    for (let r = this.#watermark + 1; above > 0; r++) {
      if (this.#known[r] === 1) {
        key += `,${r}`;
        above--;
      }
    }
    if (this.#unknown.length > 0) key += `|${this.#unknown.join(",")}`;
    return key;
  }
}

/**
 * A known read, or a known compare-and-set that failed, never changes the register. When one is
 * legal it is linearized at once and never tried later instead: moving it earlier, to a point
 * where it is legal, keeps every other operation legal and every real-time order satisfied
 * (whatever had to precede it already does). This prunes most of the search on read-heavy
 * histories.
 */
function readOnlyAndLegal(state: RegisterState, op: Operation): boolean {
  if (outcomeUnknown(op)) return false;
  if (op.kind === "read") return op.output === state;
  if (op.kind === "cas") return op.output === false && op.input.expected !== state;
  return false;
}

interface Candidate {
  readonly call: Entry;
  readonly next: RegisterState;
}

/**
 * The moves from a configuration: pending calls (those before the first return in the list)
 * that are legal now. A read-only legal one is the only move (see readOnlyAndLegal). Otherwise
 * the moves that store the value the most urgent waiting read or compare-and-set needs go first:
 * only the order of the search changes, which on a linearizable history usually finds the answer
 * without backtracking.
 */
function movesFrom(head: Entry, state: RegisterState, ops: readonly Operation[]): { forced: boolean; moves: Candidate[] } {
  const moves: Candidate[] = [];
  let wanted: RegisterState | undefined;
  let wantedByMs = Infinity;
  for (let e: Entry | null = head.next; e !== null && e.isCall; e = e.next) {
    const op = ops[e.op]!;
    if (readOnlyAndLegal(state, op)) return { forced: true, moves: [{ call: e, next: state }] };
    const next = step(state, op);
    if (next !== undefined) moves.push({ call: e, next });
    if (!outcomeUnknown(op) && op.returnMs < wantedByMs) {
      if (op.kind === "read") {
        wanted = op.output;
        wantedByMs = op.returnMs;
      } else if (op.kind === "cas" && op.output === true && next === undefined) {
        wanted = op.input.expected;
        wantedByMs = op.returnMs;
      }
    }
  }
  if (wanted !== undefined && moves.length > 1) {
    const first = moves.filter((m) => m.next === wanted);
    if (first.length > 0) return { forced: false, moves: [...first, ...moves.filter((m) => m.next !== wanted)] };
  }
  return { forced: false, moves };
}

function firstReturn(head: Entry): Entry | null {
  let e = head.next;
  while (e !== null && e.isCall) e = e.next;
  return e;
}

interface Frame {
  readonly stateBefore: RegisterState;
  readonly moves: readonly Candidate[];
  /** Index of the next move to try. */
  nextMove: number;
  /** The move taken from this configuration; null while none is. */
  taken: Entry | null;
}

export function searchLinearization(ops: readonly Operation[], deadlineMs: number): SearchResult {
  const head = buildList(ops);
  const linearized = new LinearizedSet(ops);
  const explored = new Set<string>();
  const stack: Frame[] = [];
  let state: RegisterState = null;
  let longestKnown = 0;
  let longest: number[] = [];
  let stateAfterLongest: RegisterState = null;
  let blocking: number | null = null;
  let steps = 0;

  /** Takes the next untried move of frame that leads somewhere new; false when none is left. */
  const advance = (frame: Frame): boolean => {
    while (frame.nextMove < frame.moves.length) {
      const { call, next } = frame.moves[frame.nextMove++]!;
      linearized.add(call.op);
      const key = linearized.key(next);
      if (explored.has(key)) {
        linearized.remove(call.op);
        continue;
      }
      explored.add(key);
      frame.taken = call;
      state = next;
      lift(call);
      if (linearized.knownCount > longestKnown) {
        // Measured in known operations: unknown ones can always be added, which says nothing.
        longestKnown = linearized.knownCount;
        longest = stack.map((f) => f.taken!.op);
        stateAfterLongest = state;
        blocking = null;
      }
      return true;
    }
    return false;
  };

  for (;;) {
    if (++steps % 1024 === 0 && Date.now() > deadlineMs) return { kind: "timeout" };
    if (head.next === null) return { kind: "ok" };
    const { moves } = movesFrom(head, state, ops);
    const frame: Frame = { stateBefore: state, moves, nextMove: 0, taken: null };
    stack.push(frame);
    if (advance(frame)) continue;
    // A dead end: the first pending return cannot be reached with its operation linearized.
    if (linearized.knownCount === longestKnown && blocking === null) blocking = firstReturn(head)?.op ?? null;
    // Undo moves until a configuration with an untried move; a forced move has a single move,
    // so a failure after it fails its configuration too.
    for (;;) {
      stack.pop();
      const top = stack[stack.length - 1];
      if (top === undefined) return { kind: "fail", longest, stateAfterLongest, blocking };
      const taken = top.taken!;
      state = top.stateBefore;
      linearized.remove(taken.op);
      unlift(taken);
      top.taken = null;
      if (advance(top)) break;
    }
  }
}
