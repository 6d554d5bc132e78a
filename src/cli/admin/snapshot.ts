import { defineCommand } from "citty";
import { callNode, nodeArgs, nodeUrl, printJson, printKeyValues } from "../_client.ts";

export const snapshotCommand = defineCommand({
  meta: { name: "snapshot", description: "Take a snapshot now and wait for it (POST /admin/snapshot?wait=true)" },
  args: { ...nodeArgs },
  async run({ args }) {
    const result = (await callNode(nodeUrl(args), "POST", "/admin/snapshot?wait=true", undefined, 3_600_000)) as Record<string, unknown>;
    if (args.json) return printJson(result);
    printKeyValues(result);
  },
});
