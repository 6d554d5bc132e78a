// What a trace line says of a Raft message (RUST_LOG=tensor_chain::raft=trace): its type, the
// peer, the sender's term, and the indexes an operator follows consensus by. Built only when
// trace is on: callers test the level first.

import type { Message } from "../raft/index.ts";
import { assertNever } from "../util/assert.ts";

/** Fields of `m` for a trace line; `peer` names the other side (`to` when sent, `from` when received). */
export function messageTraceFields(m: Message, peer: "to" | "from"): Record<string, unknown> {
  const head = { type: m.type, [peer]: peer === "to" ? m.to : m.from, term: m.term };
  switch (m.type) {
    case "pre_vote":
      return { ...head, lastIndex: m.lastIndex, lastTerm: m.lastTerm };
    case "vote":
      return { ...head, lastIndex: m.lastIndex, lastTerm: m.lastTerm, ...(m.transfer ? { transfer: true } : {}) };
    case "pre_vote_response":
    case "vote_response":
      return { ...head, granted: !m.reject };
    case "append": {
      const first = m.entries[0]?.index;
      const range = first === undefined ? {} : { first, last: m.entries.at(-1)?.index };
      return { ...head, prevIndex: m.prevIndex, prevTerm: m.prevTerm, entries: m.entries.length, ...range, commit: m.commit };
    }
    case "append_response":
      return m.reject ? { ...head, index: m.index, rejected: true, hintIndex: m.hintIndex, hintTerm: m.hintTerm } : { ...head, index: m.index };
    case "heartbeat":
      return { ...head, commit: m.commit, readSeq: m.readSeq };
    case "heartbeat_response":
      return { ...head, readSeq: m.readSeq, ...(m.diskFull === true ? { diskFull: true } : {}) };
    case "snapshot":
      return { ...head, index: m.snapshot.index, snapshotTerm: m.snapshot.term };
    case "timeout_now":
      return head;
    case "read_index":
      return { ...head, requestId: m.requestId };
    case "read_index_response":
      return { ...head, requestId: m.requestId, index: m.index };
    case "not_member":
      return { ...head, configIndex: m.configIndex };
    default:
      return assertNever(m);
  }
}
