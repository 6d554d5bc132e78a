// The recovery flow of a starting node (SPEC §3.1) as an explicit state, shown by /health,
// the tensor_chain_recovery_state metric and the log.

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

/** The metric's value for a state: its position in the flow. */
export function recoveryStateCode(state: RecoveryState): number {
  return recoveryStates.indexOf(state);
}
