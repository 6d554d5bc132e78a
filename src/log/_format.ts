// One log record as one line: text for a terminal or journald, JSON for a log pipeline.

import type { LogLevel } from "../util/index.ts";

export type LogFormat = "text" | "json";

export type Fields = Readonly<Record<string, unknown>>;

const RESERVED = new Set(["ts", "level", "target", "msg"]);

/** `2026-11-22T11:00:00.000Z INFO  tensor_chain::wal message key=value` */
export function formatText(date: Date, level: LogLevel, target: string, message: string, fields: Fields | undefined): string {
  let line = `${date.toISOString()} ${level.toUpperCase().padEnd(5)} ${target} ${message}`;
  if (fields !== undefined) {
    for (const [key, value] of Object.entries(fields)) {
      if (value === undefined) continue;
      line += ` ${key}=${textValue(value)}`;
    }
  }
  return line;
}

/** `{"ts":...,"level":"info","target":...,"msg":...,...fields}`; a field named like a fixed key is prefixed `field_`. */
export function formatJson(date: Date, level: LogLevel, target: string, message: string, fields: Fields | undefined): string {
  const record: Record<string, unknown> = { ts: date.toISOString(), level, target, msg: message };
  if (fields !== undefined) {
    for (const [key, value] of Object.entries(fields)) {
      if (value === undefined) continue;
      record[RESERVED.has(key) ? `field_${key}` : key] = jsonValue(value);
    }
  }
  try {
    return JSON.stringify(record);
  } catch {
    // A cyclic field value: keep the record, lose only the fields.
    return JSON.stringify({ ts: record["ts"], level, target, msg: message, fields_error: "fields could not be serialized" });
  }
}

function textValue(value: unknown): string {
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint") return String(value);
  if (typeof value === "string") return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
  if (value === null) return "null";
  if (value instanceof Error) return JSON.stringify(errorText(value));
  const json = safeJson(value);
  return json ?? JSON.stringify(String(value));
}

function jsonValue(value: unknown): unknown {
  if (typeof value === "bigint") return value.toString();
  if (value instanceof Error) return errorText(value);
  if (typeof value === "object" && value !== null) return safeJson(value) === undefined ? String(value) : value;
  return value;
}

function errorText(error: Error): string {
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" ? `${code}: ${error.message}` : error.message;
}

function safeJson(value: unknown): string | undefined {
  try {
    return JSON.stringify(value, (_key, inner: unknown) => (typeof inner === "bigint" ? inner.toString() : inner));
  } catch {
    return undefined;
  }
}
