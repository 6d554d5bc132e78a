// cluster-status: one node's gossip picture of the cluster (GET /admin/gossip) — every
// member alive, suspect or dead as each other member sees it, lag behind the leader's commit,
// partitions named as groups, members alive by gossip but cut from Raft. Gossip carries each
// member's own view, so one reachable node answers even when the others' admin ports do not.
// Exits non-zero when anything is unhealthy.

import { defineCommand } from "citty";
import { callNode, nodeArgs, nodeUrl, printJson } from "../_client.ts";
import { CliExit, ExitCode } from "../_exit.ts";
import { gossipReport, renderGossipReport, type GossipStatusJson } from "./_gossip-report.ts";

export const clusterStatusCommand = defineCommand({
  meta: { name: "cluster-status", description: "Every member alive, suspect or dead as each member sees it (gossip), lag, partitions; exits non-zero when unhealthy" },
  args: { ...nodeArgs },
  async run({ args }) {
    const status = (await callNode(nodeUrl(args), "GET", "/admin/gossip")) as GossipStatusJson;
    const report = gossipReport(status);
    if (args.json) {
      printJson({
        cluster_id: report.clusterId, answered_by: report.answeredBy, leader: report.leader, members: report.members, views: report.views,
        groups: report.groups, partitioned: report.groups.length > 1, problems: report.problems, healthy: report.healthy,
      });
    } else {
      process.stdout.write(renderGossipReport(report));
    }
    if (!report.healthy) throw new CliExit(ExitCode.failure, "");
  },
});
