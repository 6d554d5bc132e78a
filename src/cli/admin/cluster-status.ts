// cluster-status: one node's gossip picture of the cluster (GET /admin/gossip) — every
// member alive, suspect or dead as each other member sees it, lag behind the leader's commit,
// partitions named as groups, members alive by gossip but cut from Raft. Gossip carries each
// member's own view, so one reachable node answers even when the others' admin ports do not.
// Exits non-zero when anything is unhealthy.

import { defineCommand } from "citty";
import { callNode, nodeArgs, nodeUrl, printJson } from "../_client.ts";
import { CliExit, ExitCode } from "../_exit.ts";
import { gossipReport, gossipReportJson, renderGossipReport, type GossipStatusJson } from "./_gossip-report.ts";
import { walArchiveLine, type WalArchiveJson } from "./_wal-archive-line.ts";

export const clusterStatusCommand = defineCommand({
  meta: { name: "cluster-status", description: "Every member alive, suspect or dead as each member sees it (gossip), lag, partitions; exits non-zero when unhealthy" },
  args: { ...nodeArgs },
  async run({ args }) {
    const base = nodeUrl(args);
    const status = (await callNode(base, "GET", "/admin/gossip")) as GossipStatusJson;
    const gossip = gossipReport(status);
    // Only the leader archives WAL; ask it (its admin address comes through gossip), else this node.
    const wal = await walArchive(base, gossip.leader === null ? null : (status.gossip?.members.find((m) => m.id === gossip.leader)?.facts?.admin ?? null));
    // Archiving that fails is a problem: segments pile up unarchived, and point-in-time restore
    // cannot reach past what was archived.
    const failing = wal?.leading === true ? (wal.json?.last_error ?? null) : null;
    const report = failing === null ? gossip : {
      ...gossip,
      problems: [...gossip.problems, `WAL archiving on ${wal?.from} is failing since ${wal?.json?.failing_since ?? wal?.json?.last_failure_at}: ${failing}`],
      healthy: false,
    };
    if (args.json) {
      printJson({ ...gossipReportJson(report), wal_archive: wal?.json ?? null });
    } else {
      process.stdout.write(renderGossipReport(report));
      if (wal !== null) process.stdout.write(`wal archive (${wal.from}): ${walArchiveLine(wal.json)}\n`);
    }
    if (!report.healthy) throw new CliExit(ExitCode.failure, "");
  },
});

async function walArchive(base: string, leaderAdmin: string | null): Promise<{ from: string; leading: boolean; json: WalArchiveJson | null } | null> {
  for (const url of leaderAdmin === null ? [base] : [`http://${leaderAdmin}`, base]) {
    try {
      const info = (await callNode(url, "GET", "/admin/cluster-info", undefined, 2_000)) as { node_id: string; role?: string; wal_archive?: WalArchiveJson | null };
      // Only the leader archives: another node's last error may be from when it led.
      return { from: info.node_id, leading: info.role === "leader", json: info.wal_archive ?? null };
    } catch {
      // The leader's admin port may be unreachable from here; this node's answer will do.
    }
  }
  return null;
}
