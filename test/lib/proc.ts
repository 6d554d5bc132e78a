// The harness for tests that drive the compiled svc binary as real processes: build it once,
// pick free loopback ports, write configs, start/kill/stop nodes, talk JSON to them, run
// write load with a durability ledger, and clean up every process even when a test fails.

export { buildDeadlineMs, ensureBinary, runBinary, useCompiledBinary, REPO_DIR, type RunOptions, type RunResult } from "./proc-binary.ts";
export { clusterConfigs, singleNodeConfig, addressText, type DraftOverrides, type NodeAddresses } from "./proc-config.ts";
export { ProcEnv, makeTempDir, procTest } from "./proc-env.ts";
export {
  GiveUp, execute, executeRaw, fetchMetrics, getJson, metric, parseMetrics, postJson, query, queryRaw, request, waitFor, withinDeadline,
  type ErrorBody, type ExecuteBody, type HttpAnswer, type QueryBody, type SqlValue, type StatementInput,
} from "./proc-http.ts";
export { Ledger, WriteLoad, kvSchema, kvTable, valueFor, type WriteLoadOptions, type WriteOutcome } from "./proc-load.ts";
export { NodeProcess, startNode, type StartNodeOptions } from "./proc-node.ts";
export { freePort, freePorts } from "./proc-ports.ts";
export { killAllStarted, useProcessCleanup } from "./proc-registry.ts";
export { health, startCluster, waitForLeader } from "./proc-cluster.ts";
