// raft/hardstate: the node's term, vote and commit index, plus the identity of the
// cluster it belongs to. Replaced atomically (temp, fsync, rename, fsync dir) and framed
// with a CRC, so it is either the old state or the new one, never a mix.

import * as fs from "node:fs";
import type { HardState } from "../util/log-data.ts";
import { SvcError } from "../util/errors.ts";
import { decodeRecordAt, encodeRecord } from "./_record.ts";
import { writeFileAtomic } from "../io/durable-file.ts";

const hardStateRecordType = 0x20;
const formatVersion = 1;

export interface StoredHardState extends HardState {
  /** The cluster this node's data belongs to; "" before the node has joined one. */
  readonly clusterId: string;
}

export const initialHardState: StoredHardState = Object.freeze({ term: 0, vote: null, commit: 0, clusterId: "" });

export function readHardState(path: string): StoredHardState | null {
  if (!fs.existsSync(path)) return null;
  const buf = new Uint8Array(fs.readFileSync(path));
  const decoded = decodeRecordAt(buf, 0);
  const damaged = (why: string): SvcError =>
    new SvcError("HARDSTATE_CORRUPT", `${path} is damaged: ${why}`, {
      hint: "stop the node, remove the contents of raft/ and store/ under the data directory and start it to rebuild from the leader",
    });
  if (decoded.kind !== "record" || decoded.type !== hardStateRecordType || decoded.end !== buf.length) {
    throw damaged(decoded.kind === "bad" ? decoded.reason : "not a hard state record");
  }
  let v: unknown;
  try {
    v = JSON.parse(new TextDecoder().decode(decoded.payload));
  } catch {
    throw damaged("unreadable contents");
  }
  const s = v as Partial<{ format: number; term: number; vote: string | null; commit: number; clusterId: string }>;
  if (s.format !== formatVersion) throw damaged(`unsupported format ${String(s.format)}`);
  if (typeof s.term !== "number" || typeof s.commit !== "number" || typeof s.clusterId !== "string") {
    throw damaged("missing fields");
  }
  return { term: s.term, vote: typeof s.vote === "string" ? s.vote : null, commit: s.commit, clusterId: s.clusterId };
}

export function writeHardState(path: string, state: StoredHardState): void {
  const payload = new TextEncoder().encode(JSON.stringify({ format: formatVersion, ...state }));
  writeFileAtomic(path, encodeRecord(hardStateRecordType, payload));
}
