// The recovery flow of a starting node (SPEC §3.1) as a pure transition function over an
// explicit table. The node feeds it events; every allowed edge is listed below with the
// reason it exists, and an event a state has no edge for is a bug (the caller asserts).
// A bootstrapping node (its first two entries just written) and a lone node take SPEC's
// path: replaying_wal → joining → healthy once they elected themselves and a ReadIndex round
// on their own leadership confirmed it. Shown by /health, the tensor_chain_recovery_state metric, a counter of transitions and
// the log ("recovery: a -> b").

export const recoveryStates = [
  "starting",
  "replaying_wal",
  "requesting_snapshot",
  "installing_snapshot",
  "replaying_after_snapshot",
  "joining",
  "healthy",
] as const;

export type RecoveryState = (typeof recoveryStates)[number];

export type RecoveryEvent =
  /** At start: the WAL holds entries after the newest snapshot. */
  | "wal_found"
  /** At start: a node with state of its own whose WAL holds no entry at all (a lone node whose WAL was emptied, rebased on its store). */
  | "wal_empty"
  /** At start: no state of its own (new member, cleared WAL, lost log): it must be sent it. */
  | "wal_missing"
  /** The entries known committed at start (or after an install) are applied. */
  | "replay_done"
  /** A leader sent the log itself instead of a snapshot (it had not compacted that far). */
  | "log_received"
  /** The first chunk of a snapshot from the leader arrived. */
  | "snapshot_transfer_started"
  /** A snapshot from the leader was installed into the store. */
  | "snapshot_installed"
  /** A transfer ended without an install (the log overtook it). */
  | "snapshot_transfer_abandoned"
  /** A leader confirmed, by a ReadIndex round, that this node applied all it committed. */
  | "caught_up";

interface Edge {
  readonly from: RecoveryState;
  readonly on: RecoveryEvent;
  readonly to: RecoveryState;
  readonly why: string;
}

/** Every allowed transition. SPEC §3.1's rows first, then the edges it leaves out. */
export const recoveryEdges: readonly Edge[] = [
  { from: "starting", on: "wal_found", to: "replaying_wal", why: "SPEC: WAL exists → replay WAL" },
  { from: "starting", on: "wal_missing", to: "requesting_snapshot", why: "SPEC: WAL does not exist → request snapshot" },
  { from: "replaying_wal", on: "replay_done", to: "joining", why: "SPEC: caught up with what it knew → join as follower" },
  { from: "replaying_wal", on: "snapshot_transfer_started", to: "installing_snapshot", why: "SPEC: not caught up → the leader compacted past this log and sends a snapshot" },
  { from: "requesting_snapshot", on: "snapshot_transfer_started", to: "installing_snapshot", why: "SPEC: snapshot obtained → install" },
  { from: "installing_snapshot", on: "snapshot_installed", to: "replaying_after_snapshot", why: "SPEC: snapshot installed → replay logs after it" },
  { from: "replaying_after_snapshot", on: "replay_done", to: "joining", why: "SPEC: replay finished → join as follower" },
  { from: "joining", on: "caught_up", to: "healthy", why: "SPEC: joined → healthy" },
  // Not in SPEC §3.1:
  { from: "starting", on: "wal_empty", to: "joining", why: "a lone node whose WAL was emptied starts its log after a snapshot of its store: nothing to replay" },
  { from: "requesting_snapshot", on: "log_received", to: "joining", why: "the node asked for a snapshot and the leader sent the log instead (it had not compacted)" },
  { from: "requesting_snapshot", on: "snapshot_installed", to: "replaying_after_snapshot", why: "a transfer resumed across a restart finished before a new chunk arrived" },
  { from: "joining", on: "snapshot_transfer_started", to: "installing_snapshot", why: "the leader's log no longer holds what the joining node lacks" },
  { from: "installing_snapshot", on: "snapshot_transfer_abandoned", to: "joining", why: "the transfer ended without an install: the log overtook it" },
  { from: "replaying_after_snapshot", on: "snapshot_transfer_started", to: "installing_snapshot", why: "the leader compacted further and sends a newer snapshot before replay of the last one finished" },
  { from: "replaying_wal", on: "snapshot_installed", to: "replaying_after_snapshot", why: "an image received before a restart is installed from its filed copy" },
  { from: "replaying_after_snapshot", on: "snapshot_installed", to: "replaying_after_snapshot", why: "a newer image is installed before replay of the previous one finished" },
  { from: "healthy", on: "snapshot_transfer_started", to: "healthy", why: "a serving follower that fell behind the leader's compacted log keeps serving while the image arrives" },
  { from: "healthy", on: "snapshot_installed", to: "replaying_after_snapshot", why: "a serving follower installed a snapshot: it replays and is confirmed caught up again" },
  { from: "joining", on: "snapshot_installed", to: "replaying_after_snapshot", why: "an image already filed locally was installed while joining" },
];

const table = new Map<string, RecoveryState>(recoveryEdges.map((e) => [`${e.from}/${e.on}`, e.to]));

/** The state after `event`, or null when `state` has no edge for it (a bug in the caller). */
export function nextRecoveryState(state: RecoveryState, event: RecoveryEvent): RecoveryState | null {
  return table.get(`${state}/${event}`) ?? null;
}

/** Whether `event` moves `state` somewhere (callers that may send an event in any state ask first). */
export function recoveryAccepts(state: RecoveryState, event: RecoveryEvent): boolean {
  return table.has(`${state}/${event}`);
}

/** The metric's value for a state: its position in the flow. */
export function recoveryStateCode(state: RecoveryState): number {
  return recoveryStates.indexOf(state);
}
