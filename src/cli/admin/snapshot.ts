import { defineCommand } from "citty";
import { callNode, nodeArgs, nodeUrl, printJson, printKeyValues } from "../_client.ts";

export const snapshotCommand = defineCommand({
  meta: { name: "snapshot", description: "Take a snapshot on the leader now and wait for it (POST /admin/snapshot?wait=true)" },
  args: {
    ...nodeArgs,
    local: { type: "boolean", description: "Take it on the node asked (a follower compacts its own WAL) instead of the leader" },
  },
  async run({ args }) {
    const path = `/admin/snapshot?wait=true${args.local === true ? "&local=true" : ""}`;
    const result = (await callNode(nodeUrl(args), "POST", path, undefined, 3_600_000)) as Record<string, unknown>;
    if (args.json) return printJson(result);
    printKeyValues(result);
  },
});
