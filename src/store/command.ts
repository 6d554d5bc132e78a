// What a normal Raft entry carries for the store: a batch of SQL statements, or a
// change of the replicated write-pause flag. Encoded as JSON (64-bit integers exact, see
// json64.ts); validated when decoded.

import { isWideDouble, parseJson64, stringifyJson64 } from "../util/json64.ts";

/** A parameter: integers a double cannot hold exactly are BigInt. */
export type SqlValue = string | number | bigint | boolean | null;

export interface Statement {
  sql: string;
  params: SqlValue[];
}

export type Command =
  /**
   * `checkedIndex`: the batch ran to completion, within the write check's budget, as the entry
   * at that index on the state before it (WriteChecker); it applies only at that index.
   * `requestId`: the client's id for the write (request-ids.ts): an entry whose id the store
   * still remembers applies nothing and answers the first one's result.
   */
  | { op: "execute"; statements: Statement[]; checkedIndex?: number; requestId?: string }
  /**
   * `untilMs`: a lease. The pause ends by itself once the leader's clock passes it (a backup
   * killed -9 cannot leave the cluster paused); renewed by proposing it again. Absent: until
   * resume_writes.
   */
  | { op: "pause_writes"; untilMs?: number }
  | { op: "resume_writes" }
  /** The second entry of a new cluster: its id, so every node's store records it. */
  | { op: "init_cluster"; clusterId: string }
  /** A member's addresses, replicated so every node can reach a node added at run time. */
  | { op: "set_member"; member: MemberAddress }
  /**
   * The cluster's WAL archive holds every entry up to `index` (the leader archived it): no
   * member removes a WAL segment holding a later entry, and the next leader archives on from
   * there (node/wal-archiver.ts).
   */
  | { op: "archived_through"; index: number };

export interface MemberAddress {
  id: string;
  peer: string;
  client: string;
  admin: string;
}

/** Longest request id a client may give (characters); ids are kept in the replicated state. */
export const requestIdLengthMax = 128;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Commands this process encoded, by their bytes: when the leader applies its own entry, the
 * bytes are the very array it proposed, and decoding them again would only give back the
 * command it had. Entries read from the WAL or a peer arrive in other arrays and are decoded.
 * A command is handed out once (it is applied once): the log keeps the bytes until the next
 * snapshot, and the command would double what they hold in memory.
 */
const encodedHere = new WeakMap<Uint8Array, Command>();

/** Marks an encoded command whose integer literals beyond 2^53 are exact (see json64.ts). */
const exactIntegersMark = "exactIntegers";

export function encodeCommand(command: Command): Uint8Array {
  let negativeZero = false;
  let wide = false;
  if (command.op === "execute") {
    for (const s of command.statements) {
      for (const p of s.params) {
        if (typeof p === "bigint" || isWideDouble(p)) wide = true;
        else if (Object.is(p, -0)) negativeZero = true;
      }
    }
  }
  // A command with such values says so: only then are its integer literals read as 64-bit
  // integers. Entries without the mark (every entry of earlier versions) read as plain JSON.
  const bytes = encoder.encode(wide ? stringifyJson64({ ...command, [exactIntegersMark]: true }) : JSON.stringify(command));
  // -0 is the one value JSON does not carry as it is (it comes back as 0): such a command is
  // applied as every other node reads it.
  if (!negativeZero) encodedHere.set(bytes, command);
  return bytes;
}

/** Decode an entry's command; null when the bytes are not a command this version knows. */
export function decodeCommand(data: Uint8Array): Command | null {
  const known = encodedHere.get(data);
  if (known !== undefined) {
    encodedHere.delete(data);
    return known;
  }
  let v: unknown;
  try {
    const text = decoder.decode(data);
    v = JSON.parse(text);
    if (typeof v === "object" && v !== null && (v as Record<string, unknown>)[exactIntegersMark] === true) v = parseJson64(text);
  } catch {
    return null;
  }
  if (typeof v !== "object" || v === null) return null;
  const op = (v as { op?: unknown }).op;
  if (op === "resume_writes") return { op };
  if (op === "pause_writes") {
    const untilMs = (v as { untilMs?: unknown }).untilMs;
    if (untilMs === undefined) return { op };
    return typeof untilMs === "number" && Number.isSafeInteger(untilMs) && untilMs > 0 ? { op, untilMs } : null;
  }
  if (op === "init_cluster") {
    const clusterId = (v as { clusterId?: unknown }).clusterId;
    return typeof clusterId === "string" ? { op, clusterId } : null;
  }
  if (op === "archived_through") {
    const index = (v as { index?: unknown }).index;
    return typeof index === "number" && Number.isSafeInteger(index) && index >= 0 ? { op, index } : null;
  }
  if (op === "set_member") {
    const m = (v as { member?: Partial<MemberAddress> }).member;
    if (typeof m?.id !== "string" || typeof m.peer !== "string" || typeof m.client !== "string" || typeof m.admin !== "string") return null;
    return { op, member: { id: m.id, peer: m.peer, client: m.client, admin: m.admin } };
  }
  if (op !== "execute") return null;
  const statements = (v as { statements?: unknown }).statements;
  if (!Array.isArray(statements)) return null;
  for (const s of statements) {
    if (typeof s !== "object" || s === null || typeof s.sql !== "string" || !Array.isArray(s.params)) return null;
  }
  const command: Extract<Command, { op: "execute" }> = { op, statements: statements as Statement[] };
  const checkedIndex = (v as { checkedIndex?: unknown }).checkedIndex;
  if (checkedIndex !== undefined) {
    if (typeof checkedIndex !== "number" || !Number.isSafeInteger(checkedIndex) || checkedIndex < 1) return null;
    command.checkedIndex = checkedIndex;
  }
  const requestId = (v as { requestId?: unknown }).requestId;
  if (requestId !== undefined) {
    if (!isRequestId(requestId)) return null;
    command.requestId = requestId;
  }
  return command;
}

/** A request id svc keeps: a non-empty string of at most requestIdLengthMax characters. */
export function isRequestId(v: unknown): v is string {
  return typeof v === "string" && v.length > 0 && v.length <= requestIdLengthMax;
}

/**
 * A pause_writes lease, as the admin API takes it: one second to one day. A pause put back
 * with what is left of its lease gets no less than the least one (never ended before its end).
 */
export const pauseLeaseMsMin = 1000;
export const pauseLeaseMsMax = 86_400_000;
