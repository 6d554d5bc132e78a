// Shape checks on messages from peers, before the core acts on them. A message that fails
// is dropped and counted: a peer's bug or a corrupted frame must never trip an assertion
// that guards the core's own invariants.

import type { Message } from "./messages.ts";
import { isWellFormedMembership } from "./membership.ts";
import type { Entry } from "./types.ts";

function isIndex(n: unknown): n is number {
  return typeof n === "number" && Number.isSafeInteger(n) && n >= 0;
}

function isId(s: unknown): s is string {
  return typeof s === "string" && s.length > 0;
}

function checkEntries(entries: readonly Entry[], prevIndex: number, prevTerm: number, msgTerm: number): string | null {
  let expectIndex = prevIndex + 1;
  let lastTerm = prevTerm;
  for (const e of entries) {
    if (e.index !== expectIndex) return "entries_not_contiguous";
    if (!isIndex(e.term) || e.term < lastTerm || e.term > msgTerm) return "entry_term_out_of_order";
    if (e.kind !== "normal" && e.kind !== "config" && e.kind !== "noop") return "entry_kind_unknown";
    if (!(e.data instanceof Uint8Array) || !isIndex(e.timestampMs)) return "entry_malformed";
    lastTerm = e.term;
    expectIndex++;
  }
  return null;
}

/** null when the message is well formed, else a short reason for the drop counter. */
export function validateMessage(m: Message): string | null {
  if (typeof m !== "object" || m === null) return "malformed";
  if (!isId(m.from) || !isId(m.to) || !isIndex(m.term)) return "malformed_envelope";
  switch (m.type) {
    case "pre_vote":
    case "vote":
      return isIndex(m.lastIndex) && isIndex(m.lastTerm) ? null : "malformed_vote";
    case "pre_vote_response":
    case "vote_response":
      return typeof m.reject === "boolean" ? null : "malformed_vote_response";
    case "append":
      if (!isIndex(m.prevIndex) || !isIndex(m.prevTerm) || !isIndex(m.commit) || !Array.isArray(m.entries)) return "malformed_append";
      if (m.prevTerm > m.term) return "append_prev_term_ahead";
      return checkEntries(m.entries, m.prevIndex, m.prevTerm, m.term);
    case "append_response":
      return isIndex(m.index) && isIndex(m.hintIndex) && isIndex(m.hintTerm) && typeof m.reject === "boolean" ? null : "malformed_append_response";
    case "heartbeat":
      return isIndex(m.commit) && isIndex(m.readSeq) ? null : "malformed_heartbeat";
    case "heartbeat_response":
      return isIndex(m.readSeq) && (m.diskFull === undefined || typeof m.diskFull === "boolean") ? null : "malformed_heartbeat_response";
    case "snapshot": {
      const s = m.snapshot;
      if (typeof s !== "object" || s === null || !isIndex(s.index) || !isIndex(s.term)) return "malformed_snapshot";
      if (s.index === 0 || s.term > m.term) return "malformed_snapshot";
      return isWellFormedMembership(s.membership) ? null : "malformed_snapshot_membership";
    }
    case "timeout_now":
      return null;
    case "read_index":
      return isIndex(m.requestId) ? null : "malformed_read_index";
    case "read_index_response":
      return isIndex(m.requestId) && isIndex(m.index) ? null : "malformed_read_index_response";
    case "not_member":
      // Index 0 names no configuration entry: no refusal is made of it.
      return isIndex(m.configIndex) && m.configIndex > 0 ? null : "malformed_not_member";
    default:
      return "unknown_type";
  }
}
