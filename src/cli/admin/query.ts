import { defineCommand } from "citty";
import { callNode, nodeArgs, nodeUrl, printJson, printTable } from "../_client.ts";
import { usageError } from "../_exit.ts";

export const queryCommand = defineCommand({
  meta: { name: "query", description: "Run a read-only SQL query, e.g. svc admin query \"SELECT count(*) FROM t\"" },
  args: {
    sql: { type: "positional", description: "The SQL statement", required: true },
    consistency: { type: "enum", options: ["linearizable", "leader", "stale"], default: "linearizable", description: "Read consistency" },
    ...nodeArgs,
  },
  async run({ args }) {
    if (args.sql.trim() === "") throw usageError("query needs an SQL statement");
    const result = (await callNode(nodeUrl(args), "POST", "/admin/query", { sql: args.sql, consistency: args.consistency })) as {
      columns: string[];
      rows: unknown[][];
    };
    if (args.json) return printJson(result);
    printTable(result.columns, result.rows);
  },
});
