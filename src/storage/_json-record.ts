// The small JSON files svc keeps beside its WAL (raft/checkpoint, raft/REMOVED): read as an
// object, or told apart as absent or damaged (with why) before the caller checks its fields.

import { readFileSync } from "node:fs";

export type JsonRecordRead =
  | { kind: "none" }
  | { kind: "damaged"; reason: string }
  | { kind: "object"; value: Record<string, unknown> };

/** `what` names the record in the reason given for an object of another shape. */
export function readJsonRecord(path: string, what: string): JsonRecordRead {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return { kind: "none" };
    return { kind: "damaged", reason: `unreadable: ${(e as Error).message}` };
  }
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return { kind: "damaged", reason: "not JSON" };
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) return { kind: "damaged", reason: `not ${what}` };
  return { kind: "object", value: v as Record<string, unknown> };
}
