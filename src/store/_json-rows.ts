// A read's rows as the client API writes them: blobs as base64 strings, integers exact (digits
// beyond 2^53 as they are), a real holding a whole number beyond 2^53 in exponent form, so
// that it does not read back as an integer (see json64.ts), and an infinite real as the string
// "Infinity" or "-Infinity", as PostgreSQL's to_json writes one (JSON has no such number, and
// JSON.stringify writes null; SQLite keeps no NaN). A SQL process writes a result's rows
// as this text, a row at a time: what it holds while it reads is about the answer's size, not
// the many times more that the rows as JavaScript values take.

import { isWideDouble, jsonInt, jsonWideDouble, parseJson64 } from "../util/json64.ts";

/** A value SQLite gave, as the JSON answer carries it. */
export function jsonValue(v: unknown): unknown {
  if (v instanceof Uint8Array) return Buffer.from(v).toString("base64");
  if (typeof v === "bigint") return jsonInt(v);
  if (isWideDouble(v)) return jsonWideDouble(v);
  if (v === Infinity) return "Infinity";
  if (v === -Infinity) return "-Infinity";
  return v;
}

/** One row's JSON text. */
export function rowJsonText(row: readonly unknown[]): string {
  return JSON.stringify(row.map(jsonValue));
}

/** Rows written as text (`[row, …]`) back as values for a caller in the node (counts, tests). */
export function rowsOfJsonText(text: string): unknown[][] {
  return (parseJson64(text) as unknown[][]).map((row) => row.map(jsonValue));
}
