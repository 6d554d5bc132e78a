import { defineCommand } from "citty";
import { callNode, nodeArgs, nodeUrl, printJson, printKeyValues } from "../_client.ts";

export const statsCommand = defineCommand({
  meta: { name: "stats", description: "Statistics of a node: total_entries, log, WAL and snapshot figures" },
  args: { ...nodeArgs },
  async run({ args }) {
    const stats = (await callNode(nodeUrl(args), "GET", "/admin/stats")) as Record<string, unknown>;
    if (args.json) return printJson(stats);
    const { tables, ...rest } = stats;
    printKeyValues(rest);
    for (const t of (tables as { name: string; rows: number }[]) ?? []) process.stdout.write(`table ${t.name}: ${t.rows} rows\n`);
  },
});
