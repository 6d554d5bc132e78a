// The compiled binary is also the node's SQL process (store/sql-process.ts): the node starts
// it with SVC_SQL_PROCESS set in its environment, and then no command runs.

import { runSqlProcess, sqlProcessEnvKey } from "../store/index.ts";

/** Run as a SQL process when the environment asks for one; returns whether it did. */
export function runSqlProcessIfAsked(): boolean {
  if (process.env[sqlProcessEnvKey] !== "1") return false;
  runSqlProcess();
  return true;
}
