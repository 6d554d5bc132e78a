// The SQL process's entry point when svc runs from source (a compiled binary starts the same
// loop from main.ts when its environment names it; see sql-pool.ts).

import { runSqlProcess } from "./sql-process.ts";

runSqlProcess();
