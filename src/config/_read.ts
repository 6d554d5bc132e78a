// Reads one TOML table against its schema: unknown keys, types, ranges and defaults. Every
// problem is recorded and reading goes on, so that one run of --validate shows them all.
// Integers arrive as bigint (smol-toml's integersAsBigInt), which is what tells 5 from 5.0.

import { parseAddress } from "./address.ts";
import { formatKeyPath, type PathSegment } from "./_path.ts";
import type { Problems } from "./_problems.ts";
import { closest } from "./_suggest.ts";
import { allKeyPaths, type FieldSpec, type TableSpec } from "./schema.ts";
import type { Address } from "./types.ts";

export type TomlTable = Readonly<Record<string, unknown>>;

export function isTable(value: unknown): value is TomlTable {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Date);
}

export function describeValue(value: unknown): string {
  if (typeof value === "string") return `string ${JSON.stringify(value)}`;
  if (typeof value === "bigint") return `integer ${value}`;
  if (typeof value === "number") return `float ${value}`;
  if (typeof value === "boolean") return `boolean ${value}`;
  if (value instanceof Date) return `datetime ${String(value)}`;
  if (Array.isArray(value)) return "an array";
  return "a table";
}

/** Reports keys of `table` that its schema does not know, with the likeliest intended key. */
export function checkUnknownKeys(table: TomlTable, spec: TableSpec, path: readonly PathSegment[], problems: Problems): void {
  for (const key of Object.keys(table)) {
    if (Object.hasOwn(spec, key)) continue;
    problems.add([...path, key], `unknown key ${JSON.stringify(key)}${suggestion(key, spec, path)}`);
  }
}

function suggestion(key: string, spec: TableSpec, path: readonly PathSegment[]): string {
  const near = closest(key, Object.keys(spec));
  if (near !== undefined) return `; did you mean ${JSON.stringify(near)}?`;
  // The key may be right but in the wrong table, e.g. archive_command at the top level.
  const here = formatKeyPath(path.map((s) => (typeof s === "number" ? "[]" : s))).replaceAll(".[]", "[]");
  for (const full of allKeyPaths()) {
    const dot = full.lastIndexOf(".");
    const parent = dot < 0 ? "" : full.slice(0, dot);
    if (full.slice(dot + 1) === key && parent !== here) {
      return parent === "" ? `; ${key} belongs at the top of the file, before any [table]` : `; ${key} belongs in [${parent}] (${full})`;
    }
  }
  return "";
}

export function readInt(table: TomlTable, key: string, spec: FieldSpec & { kind: "int" }, path: readonly PathSegment[], problems: Problems): number | undefined {
  const value = table[key];
  if (value === undefined) return spec.default;
  if (typeof value !== "bigint") {
    problems.add([...path, key], `expected an integer, got ${describeValue(value)}`);
    return undefined;
  }
  if (value < BigInt(spec.min) || value > BigInt(spec.max)) {
    const unit = spec.unit === undefined ? "" : ` ${spec.unit}`;
    problems.add([...path, key], `must be between ${spec.min} and ${spec.max}${unit}, got ${value}`);
    return undefined;
  }
  return Number(value);
}

export function readString(table: TomlTable, key: string, spec: FieldSpec & { kind: "string" }, path: readonly PathSegment[], problems: Problems): string | undefined {
  const value = table[key];
  if (value === undefined) {
    if (spec.default === undefined) problems.add([...path, key], "required key is missing");
    return spec.default;
  }
  if (typeof value !== "string") {
    problems.add([...path, key], `expected a string, got ${describeValue(value)}`);
    return undefined;
  }
  return value;
}

export function readBool(table: TomlTable, key: string, spec: FieldSpec & { kind: "bool" }, path: readonly PathSegment[], problems: Problems): boolean | undefined {
  const value = table[key];
  if (value === undefined) return spec.default;
  if (typeof value !== "boolean") {
    problems.add([...path, key], `expected a boolean (true or false), got ${describeValue(value)}`);
    return undefined;
  }
  return value;
}

export function readAddress(table: TomlTable, key: string, spec: FieldSpec & { kind: "address" }, path: readonly PathSegment[], problems: Problems): Address | undefined {
  const value = table[key] ?? spec.default;
  if (value === undefined) {
    problems.add([...path, key], `required key is missing; expected "host:port"`);
    return undefined;
  }
  if (typeof value !== "string") {
    problems.add([...path, key], `expected a "host:port" string, got ${describeValue(value)}`);
    return undefined;
  }
  const parsed = parseAddress(value);
  if (!parsed.ok) {
    problems.add([...path, key], parsed.message);
    return undefined;
  }
  return parsed.address;
}

/** A sub-table: absent means all defaults; anything but a table is a problem. */
export function readTable(parent: TomlTable, key: string, spec: TableSpec, problems: Problems): TomlTable | undefined {
  const value = parent[key];
  if (value === undefined) return {};
  if (!isTable(value)) {
    problems.add([key], `expected a table ([${key}]), got ${describeValue(value)}`);
    return undefined;
  }
  checkUnknownKeys(value, spec, [key], problems);
  return value;
}
