export { SvcNode, type Consistency, type ExecuteOutcome, type SnapshotOutcome } from "./node.ts";
export { recoveryStates, recoveryStateCode, type RecoveryState } from "./recovery-state.ts";
export { verifyDataDir, verifyWal, type VerifyFinding } from "./verify.ts";
export { prepareDataDir } from "./load.ts";
