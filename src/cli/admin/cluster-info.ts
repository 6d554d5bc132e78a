// cluster-info: the answering node's cluster metadata as JSON (backups keep it as
// metadata.json), with total_entries as stats counts it and the applied index stats gave with
// it: what a restore's verification compares stats with (SPEC §4.5). A node removed from the
// cluster says so on stderr as well: its JSON is still printed (it is what the node holds), but
// no member's.

import { defineCommand } from "citty";
import { notCounted, type TotalEntries } from "../../backup/index.ts";
import { errorMessage } from "../../util/index.ts";
import { callNode, nodeArgs, nodeUrl, printJson } from "../_client.ts";

export const clusterInfoCommand = defineCommand({
  meta: { name: "cluster-info", description: "Cluster metadata and total_entries as JSON (store it as metadata.json with a backup)" },
  args: { ...nodeArgs },
  async run({ args }) {
    const url = nodeUrl(args);
    const info = (await callNode(url, "GET", "/admin/cluster-info")) as { removed?: boolean; problem?: string };
    // A count that fails (a store too large to count within admin_query_timeout_ms) leaves the
    // rest of the metadata standing.
    let counted: TotalEntries = notCounted;
    let why: string | null = null;
    try {
      counted = totalEntriesOf(await callNode(url, "GET", "/admin/stats"));
    } catch (e) {
      why = errorMessage(e);
    }
    // JSON either way: this output is what backups keep as metadata.json.
    printJson({ ...info, ...counted });
    if (why !== null) process.stderr.write(`svc: total_entries not counted: ${why}\n`);
    if (info.removed === true) process.stderr.write(`svc: ${info.problem ?? "this node was removed from the cluster"}\n`);
  },
});

/**
 * The rows `stats` counted and the applied index it gave with them (under writes, the rows may
 * be a few entries off that index; with writes paused, as for a full backup, they are its rows).
 */
export function totalEntriesOf(stats: unknown): TotalEntries {
  const s = stats as { total_entries?: number; applied_index?: number };
  return { total_entries: s.total_entries ?? null, total_entries_applied_index: s.applied_index ?? null };
}
