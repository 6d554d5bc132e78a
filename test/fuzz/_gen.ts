// The fuzz suite's shared, seeded generator. Each case has its own seed: everything a case
// feeds its target comes from createPrng(seed), so `FUZZ_SEED=<n>` replays case n exactly.
//   FUZZ_CASES=<n>       cases per target (each file has a CI default, a few seconds' worth)
//   FUZZ_FIRST_SEED=<n>  first case seed (default 1): seeds run first..first+cases-1
//   FUZZ_SEED=<n>        run that one case only
//   FUZZ_TRACE=1         print each seed before its case runs (for a case that never returns)
//   FUZZ_KEEP_GOING=1    run every case, print each failure, fail at the end (long runs)
// Inputs are structured mutations of valid ones (bit flips, truncation, duplication,
// splicing, boundary numbers, deep nesting, huge lengths, invalid UTF-8, lone surrogates)
// and, for some cases, purely random bytes.

import { createPrng, type Prng } from "../../src/util/prng.ts";

export interface FuzzPlan {
  readonly target: string;
  readonly seeds: readonly number[];
}

/** The seeds this run takes for `target`, printed first. */
export function fuzzPlan(target: string, defaultCases: number): FuzzPlan {
  const single = process.env["FUZZ_SEED"];
  if (single !== undefined && single !== "") {
    console.log(`fuzz ${target}: FUZZ_SEED=${single}`);
    return { target, seeds: [Number(single)] };
  }
  const cases = Number(process.env["FUZZ_CASES"] ?? defaultCases);
  const first = Number(process.env["FUZZ_FIRST_SEED"] ?? 1);
  console.log(`fuzz ${target}: seeds ${first}..${first + cases - 1} (FUZZ_SEED=<n> replays one; FUZZ_CASES, FUZZ_FIRST_SEED for more)`);
  return { target, seeds: Array.from({ length: cases }, (_, i) => first + i) };
}

/** A case slower than this is a hang. Loose: a shared, loaded machine must never trip it. */
export const caseTimeMsMax = 1_000;

/**
 * Run `check` once per seed with its own generator; the first failure is rethrown naming the
 * seed that replays it and a preview of the input the case recorded with `gen.note`.
 */
export async function runCases(plan: FuzzPlan, check: (gen: Gen) => void | Promise<void>, options: { caseTimeMsMax?: number } = {}): Promise<number> {
  const timeMsMax = options.caseTimeMsMax ?? caseTimeMsMax;
  const trace = process.env["FUZZ_TRACE"] === "1";
  const keepGoing = process.env["FUZZ_KEEP_GOING"] === "1";
  const failures: string[] = [];
  const fail = (message: string): void => {
    if (!keepGoing) throw new Error(message);
    failures.push(message);
    console.log(message);
  };
  for (const seed of plan.seeds) {
    if (trace) console.log(`fuzz ${plan.target}: seed ${seed}`);
    const gen = new Gen(seed);
    const startedMs = performance.now();
    try {
      await check(gen);
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      fail(`fuzz ${plan.target}: seed ${seed} failed (replay: FUZZ_SEED=${seed}): ${clip(message, 1_500)}\n  input: ${gen.preview()}\n  at: ${e instanceof Error ? (e.stack ?? "").split("\n").slice(1, 4).join(" ").trim() : ""}`);
      continue;
    }
    const tookMs = performance.now() - startedMs;
    if (tookMs > timeMsMax) {
      fail(`fuzz ${plan.target}: seed ${seed} took ${Math.round(tookMs)} ms, a hang (limit ${timeMsMax} ms; replay: FUZZ_SEED=${seed})\n  input: ${gen.preview()}`);
    }
  }
  if (failures.length > 0) throw new Error(`fuzz ${plan.target}: ${failures.length} of ${plan.seeds.length} cases failed (printed above)`);
  return plan.seeds.length;
}

/** Numbers at the edges of the ranges decoders and parsers care about, as text. */
export const boundaryNumbers: readonly string[] = [
  "0", "-0", "-1", "1", "127", "128", "255", "256", "65535", "65536", "2147483647", "2147483648", "-2147483649",
  "4294967295", "4294967296", "9007199254740991", "9007199254740992", "9007199254740993", "-9007199254740993",
  "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
  "18446744073709551616", "99999999999999999999999999999999", "1e308", "1e309", "-1e309", "1e-400", "0.1", "-0.0",
  "1.7976931348623157e308", "5e-324", "NaN", "Infinity", "-Infinity", "inf", "nan", "0x7fffffff", "0o777", "0b101", "1_000", "00", "+1",
];

/** 32-bit values that break a length field: huge, sign bit, off by one. */
const hugeLengths: readonly number[] = [0xffffffff, 0x7fffffff, 0x80000000, 0x10000000, 0x00ffffff, 0x0000ffff, 0];

/**
 * Byte sequences that are not UTF-8 (stray continuation, overlong, surrogate, beyond U+10FFFF,
 * cut short), and two that are but that decoders like to drop: a byte order mark and NUL.
 */
const awkwardUtf8: readonly (readonly number[])[] = [
  [0xef, 0xbb, 0xbf], [0xef, 0xbb, 0xbf], [0x00],
  [0x80], [0xbf], [0xff], [0xfe], [0xc0, 0x80], [0xc1, 0xbf], [0xe0, 0x80, 0x80], [0xed, 0xa0, 0x80], [0xed, 0xbf, 0xbf],
  [0xf4, 0x90, 0x80, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [0xe2, 0x82], [0xf0, 0x9f, 0x98], [0xc3],
];

/**
 * Strings that carry a lone UTF-16 surrogate, raw or as a JSON escape, and characters that
 * decoders like to drop or stop at: a byte order mark, NUL, a zero-width space.
 */
const awkwardStrings: readonly string[] = [
  "\ud800", "\udfff", "\udc00x", "a\ud83d", "\\ud800", "\\udfff", "\\ud83d", "\\udc00\\ud800", "\ufeff", "\u0000", "\u200b",
];

const utf8 = new TextEncoder();
const lossy = new TextDecoder();

export class Gen {
  readonly prng: Prng;
  private noted: string = "";

  constructor(readonly seed: number) {
    this.prng = createPrng(seed);
  }

  int(bound: number): number {
    return this.prng.nextInt(bound);
  }

  chance(p: number): boolean {
    return this.prng.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    const item = items[this.int(items.length)];
    if (item === undefined) throw new Error("pick from an empty list");
    return item;
  }

  /** An integer skewed towards small values: most cases small, some large. */
  size(max: number): number {
    const bits = this.int(Math.ceil(Math.log2(max + 1)) + 1);
    return Math.min(max, this.int(2 ** bits));
  }

  randomBytes(lengthMax: number): Uint8Array {
    const out = new Uint8Array(this.size(lengthMax));
    for (let i = 0; i < out.length; i++) out[i] = this.int(256);
    return out;
  }

  /** Record what the case is feeding its target, shown if the case fails. */
  note(input: string | Uint8Array): void {
    this.noted = typeof input === "string" ? JSON.stringify(input) : `${input.length} bytes ${Buffer.from(input.subarray(0, 256)).toString("hex")}`;
  }

  preview(): string {
    return this.noted.length > 600 ? `${this.noted.slice(0, 600)}… (${this.noted.length} chars)` : this.noted;
  }

  /** 1 to 4 byte-level mutations of `input` (never changed in place); `corpus` feeds splicing. */
  mutateBytes(input: Uint8Array, corpus: readonly Uint8Array[] = []): Uint8Array {
    let out: Uint8Array = input.slice();
    const rounds = 1 + this.size(3);
    for (let r = 0; r < rounds; r++) out = this.mutateBytesOnce(out, corpus);
    return out;
  }

  private mutateBytesOnce(b: Uint8Array, corpus: readonly Uint8Array[]): Uint8Array {
    const at = (extra = 0): number => this.int(b.length + extra);
    switch (this.int(10)) {
      case 0: { // bit flips
        if (b.length === 0) return b;
        const out = b.slice();
        for (let n = 1 + this.int(4); n > 0; n--) {
          const i = at();
          out[i] = (out[i] ?? 0) ^ (1 << this.int(8));
        }
        return out;
      }
      case 1: { // a byte set to an edge value
        if (b.length === 0) return b;
        const out = b.slice();
        out[at()] = this.pick([0, 1, 0x7f, 0x80, 0xfe, 0xff]);
        return out;
      }
      case 2: // truncation
        return b.slice(0, at(1));
      case 3: { // a span duplicated in place
        const from = at(1);
        const span = b.subarray(from, from + 1 + this.size(b.length));
        const to = at(1);
        return concat(b.subarray(0, to), span, b.subarray(to));
      }
      case 4: { // splice: the head of this, the tail of another
        const other = corpus.length === 0 ? b : this.pick(corpus);
        return concat(b.subarray(0, at(1)), other.subarray(this.int(other.length + 1)));
      }
      case 5: { // a span deleted
        const from = at(1);
        return concat(b.subarray(0, from), b.subarray(from + 1 + this.size(b.length)));
      }
      case 6: // random bytes inserted
        return this.insertAt(b, at(1), this.randomBytes(32));
      case 7: { // a huge (or zero) length written over 4 bytes, either byte order
        if (b.length < 4) return this.insertAt(b, 0, new Uint8Array(4).fill(0xff));
        const out = b.slice();
        new DataView(out.buffer).setUint32(this.int(out.length - 3), this.pick(hugeLengths), this.chance(0.5));
        return out;
      }
      case 8: // a byte sequence that is not UTF-8
        return this.insertAt(b, at(1), Uint8Array.from(this.pick(awkwardUtf8)));
      default: { // a boundary number written as text
        return this.insertAt(b, at(1), utf8.encode(this.pick(boundaryNumbers)));
      }
    }
  }

  private insertAt(b: Uint8Array, at: number, what: Uint8Array): Uint8Array {
    return concat(b.subarray(0, at), what, b.subarray(at));
  }

  /**
   * 1 to 3 text-level mutations of `input`: tokens swapped for `words`, numbers for boundary
   * numbers, deep nesting, lone surrogates, and byte mutations decoded back (lossily: text
   * inputs cannot hold invalid UTF-8; targets that read bytes use mutateBytes for that).
   */
  mutateText(input: string, corpus: readonly string[] = [], words: readonly string[] = []): string {
    let out = input;
    const rounds = 1 + this.size(2);
    for (let r = 0; r < rounds; r++) out = this.mutateTextOnce(out, corpus, words);
    return out;
  }

  private mutateTextOnce(s: string, corpus: readonly string[], words: readonly string[]): string {
    const at = (): number => this.int(s.length + 1);
    switch (this.int(8)) {
      case 0: { // a number replaced by a boundary number
        const numbers = [...s.matchAll(/-?\d[\d_.eE+-]*/g)];
        if (numbers.length === 0) return insertText(s, at(), this.pick(boundaryNumbers));
        const m = this.pick(numbers);
        return s.slice(0, m.index) + this.pick(boundaryNumbers) + s.slice((m.index ?? 0) + m[0].length);
      }
      case 1: { // a word replaced by another, or inserted
        if (words.length === 0) return insertText(s, at(), this.pick(boundaryNumbers));
        const tokens = [...s.matchAll(/[A-Za-z_][A-Za-z0-9_]*/g)];
        if (tokens.length === 0 || this.chance(0.3)) return insertText(s, at(), ` ${this.pick(words)} `);
        const m = this.pick(tokens);
        return s.slice(0, m.index) + this.pick(words) + s.slice((m.index ?? 0) + m[0].length);
      }
      case 2: { // deep nesting
        const depth = this.pick([2, 10, 100, 1_000, 10_000, 100_000]);
        const [open, close] = this.pick([["[", "]"], ["{", "}"], ["(", ")"], ["[{\"a\":", "}]"], ["(SELECT ", ")"]] as const);
        const i = at();
        return s.slice(0, i) + open.repeat(depth) + (this.chance(0.5) ? close.repeat(depth) : "") + s.slice(i);
      }
      case 3: // a lone surrogate, a byte order mark, NUL
        return insertText(s, at(), this.pick(awkwardStrings));
      case 4: { // splice with another valid input
        const other = corpus.length === 0 ? s : this.pick(corpus);
        return s.slice(0, at()) + other.slice(this.int(other.length + 1));
      }
      case 5: { // a long run of one character
        return insertText(s, at(), this.pick(["'", "\"", "\\", "`", "[", "-", "/*", "\n", "\u0000", "a", "?", "$"]).repeat(this.pick([2, 100, 10_000, 100_000])));
      }
      default: // byte mutations, decoded back
        return lossy.decode(this.mutateBytes(utf8.encode(s)));
    }
  }
}

/**
 * A JSON value with one part changed, as JSON text that still parses: a string mutated as text
 * (with `strings` to splice in and `words` to swap in), a number made a boundary number (its
 * digits kept exactly, beyond what a double holds), a value of another kind, a key dropped or
 * added, an array item repeated, a value nested deeper.
 */
export function mutateJson(gen: Gen, value: unknown, strings: readonly string[] = [], words: readonly string[] = []): string {
  const numbers = new Map<string, string>();
  const mark = (text: string): string => {
    const key = `\u0001n${numbers.size}\u0001`;
    numbers.set(key, text);
    return key;
  };
  const change = (v: unknown): unknown => {
    switch (gen.int(6)) {
      case 0:
        return typeof v === "string" ? gen.mutateText(v, strings, words) : gen.pick(strings.length > 0 ? strings : [""]);
      case 1:
        return mark(gen.pick(boundaryNumbers.filter((n) => /^-?\d+(\.\d+)?(e[-+]?\d+)?$/i.test(n))));
      case 2:
        return gen.pick([null, true, false, [], {}, "", 0, -1, 1.5, [v], { v }]);
      case 3:
        return Array.isArray(v) && v.length > 0 ? [...v, ...v.slice(0, 1 + gen.int(v.length))] : v;
      case 4:
        return gen.chance(0.5) ? [v] : { [gen.pick([...words, "x"])]: v };
      default:
        return typeof v === "string" ? v + gen.pick(["'", "\"", ";", " --", "\u0000", "\ud800", "\ufeff"]) : v;
    }
  };
  const walk = (v: unknown, depth: number): unknown => {
    const children = Array.isArray(v) ? v.length : typeof v === "object" && v !== null ? Object.keys(v).length : 0;
    if (children === 0 || gen.chance(0.25 + depth * 0.1)) return change(v);
    if (Array.isArray(v)) {
      const i = gen.int(v.length);
      return v.map((item, j) => (j === i ? walk(item, depth + 1) : item));
    }
    const entries = Object.entries(v as Record<string, unknown>);
    const i = gen.int(entries.length + 1);
    if (i === entries.length) {
      return gen.chance(0.5) ? Object.fromEntries(entries.slice(1)) : { ...(v as object), [gen.pick([...words, "extra"])]: change(null) };
    }
    return Object.fromEntries(entries.map(([k, item], j) => [k, j === i ? walk(item, depth + 1) : item]));
  };
  let text = JSON.stringify(walk(value, 0)) ?? "null";
  for (const [key, number] of numbers) text = text.replace(JSON.stringify(key), number);
  return text;
}

function clip(s: string, charsMax: number): string {
  return s.length <= charsMax ? s : `${s.slice(0, charsMax)}… (${s.length} chars)`;
}

function insertText(s: string, at: number, what: string): string {
  return s.slice(0, at) + what + s.slice(at);
}

export function concat(...parts: Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
