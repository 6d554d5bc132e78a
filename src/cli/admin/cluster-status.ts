// cluster-status: ask every member for its own view (health, leader, term, indexes, links to
// the others) and put the views side by side. Members that cannot be reached, or that
// disagree about the leader or term, are how a partition shows.

import { defineCommand } from "citty";
import { callNode, nodeArgs, nodeUrl, printJson } from "../_client.ts";
import { CliExit, ExitCode } from "../_exit.ts";

interface MemberInfo {
  id: string;
  role: string;
  admin: string | null;
  connected: boolean | null;
}

interface NodeView {
  id: string;
  reachable: boolean;
  error?: string;
  role?: string;
  recovery?: string;
  leader?: string | null;
  term?: number;
  commit_index?: number;
  applied_index?: number;
  links?: Record<string, boolean | null>;
}

export const clusterStatusCommand = defineCommand({
  meta: { name: "cluster-status", description: "Every member's view of the cluster side by side, with partitions called out" },
  args: { ...nodeArgs },
  async run({ args }) {
    const info = (await callNode(nodeUrl(args), "GET", "/admin/cluster-info")) as { members: MemberInfo[]; cluster_id: string };
    const views: NodeView[] = await Promise.all(info.members.map(async (m): Promise<NodeView> => {
      if (m.admin === null) return { id: m.id, reachable: false, error: "no admin address known" };
      try {
        const v = (await callNode(`http://${m.admin}`, "GET", "/admin/cluster-info", undefined, 3000)) as {
          role: string; recovery: string; leader: string | null; term: number; commit_index: number; applied_index: number; members: MemberInfo[];
        };
        return {
          id: m.id, reachable: true, role: v.role, recovery: v.recovery, leader: v.leader, term: v.term,
          commit_index: v.commit_index, applied_index: v.applied_index,
          links: Object.fromEntries(v.members.map((x) => [x.id, x.connected])),
        };
      } catch (e) {
        return { id: m.id, reachable: false, error: e instanceof Error ? e.message.split("\n")[0] : String(e) };
      }
    }));
    const problems = findProblems(views);
    if (args.json) {
      printJson({ cluster_id: info.cluster_id, nodes: views, problems, healthy: problems.length === 0 });
    } else {
      process.stdout.write(`cluster ${info.cluster_id}\n`);
      process.stdout.write(`${"node".padEnd(12)}${"reach".padEnd(7)}${"role".padEnd(11)}${"state".padEnd(26)}${"leader".padEnd(12)}${"term".padEnd(7)}${"commit".padEnd(10)}${"applied".padEnd(10)}links\n`);
      for (const v of views) {
        const links = v.links === undefined ? "" : Object.entries(v.links).filter(([, c]) => c !== null).map(([id, c]) => `${id}:${c ? "up" : "DOWN"}`).join(" ");
        process.stdout.write(v.reachable
          ? `${v.id.padEnd(12)}${"yes".padEnd(7)}${(v.role ?? "").padEnd(11)}${(v.recovery ?? "").padEnd(26)}${String(v.leader ?? "-").padEnd(12)}${String(v.term).padEnd(7)}${String(v.commit_index).padEnd(10)}${String(v.applied_index).padEnd(10)}${links}\n`
          : `${v.id.padEnd(12)}${"NO".padEnd(7)}${v.error ?? ""}\n`);
      }
      process.stdout.write(problems.length === 0 ? "healthy: one leader, every member reachable and linked\n" : problems.map((p) => `PROBLEM: ${p}\n`).join(""));
    }
    if (problems.length > 0) throw new CliExit(ExitCode.failure, "");
  },
});

function findProblems(views: NodeView[]): string[] {
  const problems: string[] = [];
  const reachable = views.filter((v) => v.reachable);
  for (const v of views) if (!v.reachable) problems.push(`${v.id} is unreachable from here (${v.error ?? "no answer"})`);
  const leaders = new Set(reachable.map((v) => v.leader ?? "none"));
  if (leaders.size > 1) problems.push(`members disagree about the leader (${[...leaders].join(", ")}): a partition or an election in progress`);
  if (reachable.some((v) => v.leader === null)) problems.push(`no leader known by ${reachable.filter((v) => v.leader === null).map((v) => v.id).join(", ")}`);
  for (const v of reachable) {
    for (const [peer, up] of Object.entries(v.links ?? {})) if (up === false) problems.push(`${v.id} has no working link to ${peer}`);
    if (v.recovery !== "healthy") problems.push(`${v.id} is ${v.recovery}`);
  }
  return problems;
}
