// JSON numbers are doubles: an integer beyond ±2^53 read with JSON.parse comes back rounded,
// and SQLite's integers are 64-bit. svc keeps them exact both ways: integer literals that a
// double cannot hold (within the 64-bit range) are read as BigInt, and BigInts go out as
// their digits. Everything else is plain JSON.

const int64Min = -(2n ** 63n);
const int64Max = 2n ** 63n - 1n;
/** Every integer literal a double cannot hold exactly has at least 16 digits. */
const longDigitRun = /\d{16}/;
const integerLiteral = /^-?\d+$/;
const numberLiteral = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;

/**
 * An integer literal outside the 64-bit range, as written. A double would hold it only
 * rounded, and SQLite has no integer that large: parseJson64Strict gives this instead, so
 * that the caller refuses it by name rather than store a different value.
 */
export class WideIntegerLiteral {
  constructor(readonly source: string) {}
}

/** JSON.parse, with integers beyond ±2^53 (and within 64 bits) as BigInt. */
export function parseJson64(text: string): unknown {
  // The common body has no such number: it pays for one scan, not for a reviver call per value.
  if (!longDigitRun.test(text)) return JSON.parse(text);
  return JSON.parse(text, reviveInt64);
}

/** parseJson64, with integer literals beyond 64 bits as WideIntegerLiteral instead of a double. */
export function parseJson64Strict(text: string): unknown {
  if (longDigitRun.test(text)) return JSON.parse(text, reviveInt64Strict);
  // A number with an exponent or a fraction may write an integer a double cannot hold
  // (`1e18`, `9007199254740993.0`, in fewer than 16 digits or not): read again, from the
  // source, only when one came out as such a double (the walk costs far less than a reviver
  // called for every value, and a UUID's "7e3b" no longer sends a body down that path).
  const v: unknown = JSON.parse(text);
  return holdsWideDouble(v) ? JSON.parse(text, reviveInt64Strict) : v;
}

/** Whether a parsed value holds a double with an integral value beyond 2^53. */
function holdsWideDouble(v: unknown): boolean {
  if (typeof v === "number") return isWideDouble(v);
  if (typeof v !== "object" || v === null) return false;
  if (Array.isArray(v)) {
    for (const x of v) if (holdsWideDouble(x)) return true;
    return false;
  }
  for (const key in v) if (holdsWideDouble((v as Record<string, unknown>)[key])) return true;
  return false;
}

function reviveInt64(_key: string, value: unknown, context?: { source?: string }): unknown {
  const source = context?.source;
  const exact = source !== undefined && integerLiteral.test(source) ? exactIntegerOf(value, context) : null;
  // Beyond 64 bits SQLite itself reads the literal as a REAL: the double is that value.
  return exact === null || exact < int64Min || exact > int64Max ? value : exact;
}

function reviveInt64Strict(_key: string, value: unknown, context?: { source?: string }): unknown {
  const exact = exactIntegerOf(value, context);
  if (exact === null) return value;
  return exact < int64Min || exact > int64Max ? new WideIntegerLiteral(context?.source ?? String(exact)) : exact;
}

/**
 * The integer a literal beyond ±2^53 wrote, or null for any other value. An integer literal
 * gives its integer, whatever its size; one with a fraction or an exponent whose value is
 * integral (`9007199254740993.0`, `1e18`) gives it when it is within 64 bits, as a client's
 * `1.0` binds as 1: beyond them it stays the double, as SQLite reads such a literal. (svc's own
 * texts read only integer literals so: a double it wrote in exponent form stays a double.)
 */
function exactIntegerOf(value: unknown, context?: { source?: string }): bigint | null {
  if (typeof value !== "number" || Number.isSafeInteger(value)) return null;
  const source = context?.source;
  if (source === undefined) return null;
  if (integerLiteral.test(source)) return BigInt(source);
  const m = numberLiteral.exec(source);
  if (m === null) return null;
  const [, sign = "", whole = "", fraction = "", exponentText = "0"] = m;
  const digits = `${whole}${fraction}`.replace(/^0+(?=\d)/, "");
  const exponent = Number(exponentText) - fraction.length;
  // 10^19 is past 2^63: a value of more digits is beyond 64 bits (and 1e999999 is not expanded).
  if (!Number.isSafeInteger(exponent) || digits.length + exponent > 19) return null;
  let integer: string;
  if (exponent >= 0) integer = digits + "0".repeat(exponent);
  else if (/^0*$/.test(digits.slice(exponent))) integer = digits.slice(0, exponent) || "0";
  else return null;
  const exact = BigInt(`${sign}${integer}`);
  return exact < int64Min || exact > int64Max ? null : exact;
}

/**
 * JSON.stringify that parseJson64 reads back as it was: BigInts as their digits, and a double
 * holding an integer beyond 2^53 in exponent form (JSON.stringify would write it as an
 * integer literal, which would come back as a BigInt, and not even the same integer).
 */
export function stringifyJson64(value: unknown, space?: number): string {
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === "bigint" ? jsonInt(v) : isWideDouble(v) ? jsonWideDouble(v) : v), space);
}

/** A double holding a whole number beyond 2^53, in exponent form: it reads back as a double. */
export function jsonWideDouble(v: number): unknown {
  return rawJson(v.toExponential());
}

/** A double whose JSON text parseJson64 would not read back as a double. */
export function isWideDouble(v: unknown): v is number {
  return typeof v === "number" && Number.isInteger(v) && !Number.isSafeInteger(v);
}

function rawJson(text: string): unknown {
  return (JSON as unknown as { rawJSON(text: string): unknown }).rawJSON(text);
}

/**
 * An integer for a JSON answer: a number when a double holds it exactly, else its digits
 * as raw JSON (JSON.stringify writes them as they are).
 */
export function jsonInt(v: number | bigint): unknown {
  if (typeof v === "number") return v;
  const n = Number(v);
  return Number.isSafeInteger(n) ? n : rawJson(v.toString());
}

/** A 64-bit integer from SQLite as a number when that is exact, else as the BigInt. */
export function exactInt(v: number | bigint): number | bigint {
  if (typeof v === "number") return v;
  const n = Number(v);
  return Number.isSafeInteger(n) ? n : v;
}
