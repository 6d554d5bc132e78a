// cluster-status: one node's gossip picture of the cluster (GET /admin/gossip) — every
// member alive, suspect or dead as each other member sees it, lag behind the leader's commit,
// partitions named as groups, members alive by gossip but cut from Raft. Gossip carries each
// member's own view, so one reachable node answers even when the others' admin ports do not.
// Exits non-zero when anything is unhealthy.

import { defineCommand } from "citty";
import { callNode, nodeArgs, nodeUrl, printJson } from "../_client.ts";
import { CliExit, ExitCode } from "../_exit.ts";
import { errorMessage } from "../../util/index.ts";
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
    const info = await leaderInfo(base, gossip.leader === null ? null : (status.gossip?.members.find((m) => m.id === gossip.leader)?.facts?.admin ?? null));
    const wal = info === null ? null : { from: info.from, json: info.walArchive };
    const problems: string[] = [];
    // Archiving that fails is a problem: segments pile up unarchived, and point-in-time restore
    // cannot reach past what was archived.
    const failing = info?.leading === true ? (info.walArchive?.last_error ?? null) : null;
    if (failing !== null) problems.push(`WAL archiving on ${info?.from} is failing since ${info?.walArchive?.failing_since ?? info?.walArchive?.last_failure_at}: ${failing}`);
    // A pause with no end (pause-writes without --lease) stays until someone resumes: every
    // client write is refused meanwhile. One with a lease (a backup's) ends by itself.
    const paused = info?.writesPaused === true ? (info.writesPausedUntil ?? null) : undefined;
    if (paused === null) problems.push("writes are paused with no end set: every client write is refused (503 WRITES_PAUSED) until `svc admin resume-writes`");
    // A removed node's archiving and pause are no longer the cluster's: its removal is what to say.
    const withProblems = problems.length === 0 || gossip.removed ? gossip : { ...gossip, problems: [...gossip.problems, ...problems], healthy: false };
    // Only the leader knows whether its WAL archiving fails: unasked, say so rather than seem to vouch for it.
    const report = info?.leaderUnreachable === undefined || gossip.removed ? withProblems
      : { ...withProblems, warnings: [...withProblems.warnings, `the leader's admin port did not answer from here (${info.leaderUnreachable}): its WAL archiving was not checked; this answer is ${info.from}'s`] };
    if (args.json) {
      printJson({ ...gossipReportJson(report), writes_paused: info?.writesPaused ?? null, writes_paused_until: paused ?? null, wal_archive: wal?.json ?? null });
    } else {
      process.stdout.write(renderGossipReport(report));
      if (typeof paused === "string") process.stdout.write(`writes paused until ${paused} (a lease: they resume by themselves, or with \`svc admin resume-writes\`)\n`);
      if (wal !== null) process.stdout.write(`wal archive (${wal.from}): ${walArchiveLine(wal.json)}\n`);
    }
    if (!report.healthy) throw new CliExit(ExitCode.failure, "");
  },
});

interface LeaderInfo {
  from: string;
  leading: boolean;
  walArchive: WalArchiveJson | null;
  writesPaused: boolean;
  /** When a paused cluster's lease ends; absent for a pause with no end. */
  writesPausedUntil?: string;
  /** Why the leader's admin port did not answer (the node asked answered instead). */
  leaderUnreachable?: string;
}

async function leaderInfo(base: string, leaderAdmin: string | null): Promise<LeaderInfo | null> {
  // The leader's admin port speaks what this node's does (TLS on every admin port, or on none).
  const scheme = new URL(base).protocol;
  let leaderUnreachable: string | undefined;
  for (const url of leaderAdmin === null ? [base] : [`${scheme}//${leaderAdmin}`, base]) {
    try {
      const info = (await callNode(url, "GET", "/admin/cluster-info", undefined, 2_000)) as {
        node_id: string; role?: string; wal_archive?: WalArchiveJson | null; writes_paused?: boolean; writes_paused_until?: string;
      };
      // Only the leader archives: another node's last error may be from when it led.
      return {
        from: info.node_id, leading: info.role === "leader", walArchive: info.wal_archive ?? null, writesPaused: info.writes_paused === true,
        ...(info.writes_paused_until === undefined ? {} : { writesPausedUntil: info.writes_paused_until }),
        ...(leaderUnreachable === undefined ? {} : { leaderUnreachable }),
      };
    } catch (e) {
      // The leader's admin port may be unreachable from here; this node's answer will do, said so.
      if (leaderAdmin !== null && leaderUnreachable === undefined) leaderUnreachable = `${leaderAdmin}: ${errorMessage(e)}`;
    }
  }
  return null;
}
