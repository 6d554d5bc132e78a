// The raft module's error codes. The core never throws for what a peer or a caller does:
// refusals come back as results with a code (api.ts), undecodable peer messages as a decode
// error (codec.ts). It throws only when the state it is started from is impossible.

import type { MembershipChangeResult, ProposeResult, ReadIndexResult, TransferResult } from "./api.ts";
import type { DecodeErrorCode } from "./codec.ts";

/** Codes of the results the core hands back when it refuses a proposal, read or transfer. */
export type RaftRefusalCode = Extract<ProposeResult | MembershipChangeResult | ReadIndexResult | TransferResult, { ok: false }>["code"];

export type RaftErrorCode =
  /** Thrown on start: the persisted hard state and log contradict each other. */
  | "RAFT_STATE_INVALID"
  | RaftRefusalCode
  | DecodeErrorCode;
