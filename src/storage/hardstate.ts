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
      hint: "run `svc admin wal-repair --skip-corrupted`: it rebuilds the hard state from the WAL and the snapshots and keeps all data " +
        "(a cluster member then waits to be caught up by the leader before it votes again). " +
        "Do not remove raft/: on a single-node cluster that loses what only its WAL holds",
      details: { path },
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
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw damaged("not a hard state object");
  const s = v as Partial<Record<"format" | "term" | "vote" | "commit" | "clusterId", unknown>>;
  if (s.format !== formatVersion) throw damaged(`unsupported format ${String(s.format)}`);
  if (!isIndex(s.term) || !isIndex(s.commit) || typeof s.clusterId !== "string") {
    throw damaged("missing fields, or a term or commit that is not a whole number from 0 to 2^53");
  }
  // A vote that cannot be read is damage, not "no vote": forgetting a vote could cast a second one in its term.
  if (s.vote !== null && (typeof s.vote !== "string" || s.vote === "")) throw damaged("the vote is neither a node id nor null");
  return { term: s.term, vote: s.vote, commit: s.commit, clusterId: s.clusterId };
}

function isIndex(v: unknown): v is number {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
}

/**
 * Replace a damaged hard state with one rebuilt from what the log and the snapshots show:
 * the highest term they hold, no vote, the snapshot's index as commit. The damaged file is
 * kept beside it. Safe because the node is also marked as having lost its log (LOST_LOG): a
 * cluster member does not vote until a leader has caught it up, so the vote it may have cast
 * in a term it no longer knows cannot be cast twice; a lone node only ever votes for itself.
 */
export function rebuildHardState(path: string, facts: StoredHardState): string {
  const aside = `${path}.damaged-${new Date().toISOString().replace(/[:.]/g, "-")}`;
  if (fs.existsSync(path)) fs.renameSync(path, aside);
  writeHardState(path, facts);
  return aside;
}

export function writeHardState(path: string, state: StoredHardState): void {
  const payload = new TextEncoder().encode(JSON.stringify({ format: formatVersion, ...state }));
  writeFileAtomic(path, encodeRecord(hardStateRecordType, payload));
}
