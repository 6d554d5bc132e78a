import { defineCommand } from "citty";
import { callNode, nodeArgs, nodeUrl, printJson, printKeyValues, terminalSafe } from "../_client.ts";
import { walArchiveLine, type WalArchiveJson } from "./_wal-archive-line.ts";

export const statsCommand = defineCommand({
  meta: { name: "stats", description: "Statistics of a node: total_entries, log, WAL and snapshot figures" },
  args: { ...nodeArgs },
  async run({ args }) {
    const stats = (await callNode(nodeUrl(args), "GET", "/admin/stats")) as Record<string, unknown>;
    if (args.json) return printJson(stats);
    const { tables, wal_archive: walArchive, ...rest } = stats;
    printKeyValues({ ...rest, wal_archive: walArchiveLine(walArchive as WalArchiveJson | null | undefined) });
    for (const t of (tables as { name: string; rows: number | null; error?: string }[]) ?? []) {
      process.stdout.write(`table ${terminalSafe(t.name)}: ${t.rows === null ? `not counted (${terminalSafe(t.error ?? "")})` : `${t.rows} rows`}\n`);
    }
  },
});
