export { SvcNode, type Consistency, type ExecuteOutcome, type NodeParts, type SnapshotOutcome } from "./node.ts";
export { recoveryStates, recoveryStateCode, recoveryEdges, nextRecoveryState, type RecoveryState, type RecoveryEvent } from "./recovery.ts";
export { verifyDataDir, verifyWal, type VerifyFinding } from "./verify.ts";
export { prepareDataDir } from "./load.ts";
export type { NodeIo } from "./context.ts";
export type { SnapshotTransfer, SnapshotTransferHooks, SnapshotMessage } from "./snapshot-transfer.ts";
