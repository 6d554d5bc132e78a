import { defineCommand } from "citty";
import { callNode, nodeArgs, nodeUrl, printJson } from "../_client.ts";

export const clusterInfoCommand = defineCommand({
  meta: { name: "cluster-info", description: "Cluster metadata as JSON (store it as metadata.json with a backup)" },
  args: { ...nodeArgs },
  async run({ args }) {
    // JSON either way: this output is what backups keep as metadata.json.
    printJson(await callNode(nodeUrl(args), "GET", "/admin/cluster-info"));
  },
});
