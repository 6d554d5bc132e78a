// cluster-info: the answering node's cluster metadata as JSON (backups keep it as
// metadata.json). A node removed from the cluster says so on stderr as well: its JSON is still
// printed (it is what the node holds), but no member's.

import { defineCommand } from "citty";
import { callNode, nodeArgs, nodeUrl, printJson } from "../_client.ts";

export const clusterInfoCommand = defineCommand({
  meta: { name: "cluster-info", description: "Cluster metadata as JSON (store it as metadata.json with a backup)" },
  args: { ...nodeArgs },
  async run({ args }) {
    const info = (await callNode(nodeUrl(args), "GET", "/admin/cluster-info")) as { removed?: boolean; problem?: string };
    // JSON either way: this output is what backups keep as metadata.json.
    printJson(info);
    if (info.removed === true) process.stderr.write(`svc: ${info.problem ?? "this node was removed from the cluster"}\n`);
  },
});
