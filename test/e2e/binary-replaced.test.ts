// A package upgrade replaces the binary while the node runs: the node goes on starting its SQL
// processes from the binary it runs (by its inode), not from the path, which names a new version
// or nothing at all.

import * as fs from "node:fs";
import { join } from "node:path";
import { expect } from "bun:test";
import { ensureBinary, execute, postJson, procTest, query, useCompiledBinary, useProcessCleanup } from "../lib/proc.ts";

useProcessCleanup();
useCompiledBinary();

const endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";

procTest("with its binary removed from disk, a node still starts the SQL processes its reads need", async (env) => {
  const copy = join(env.dir, "svc-copy");
  fs.copyFileSync(ensureBinary(), copy);
  fs.chmodSync(copy, 0o755);
  const node = await env.startSingleNode({ limits: { queryTimeoutMs: 500 } }, { binary: copy });
  await execute(node.clientUrl, ["CREATE TABLE t (v INTEGER)", "INSERT INTO t VALUES (41)"]);
  expect(await query(node.clientUrl, "SELECT v FROM t")).toEqual([[41]]);
  fs.rmSync(copy);
  // A read stopped at its time limit takes its SQL process with it: the next read needs a new one.
  const stopped = await postJson<{ error: { code: string } }>(`${node.clientUrl}/v1/query`, { sql: endless });
  expect(stopped.body?.error.code).toBe("QUERY_TIMEOUT");
  for (let i = 0; i < 4; i++) expect(await query(node.clientUrl, "SELECT v + 1 FROM t")).toEqual([[42]]);
});
