// Clusters of real nodes: start N nodes of a new cluster and wait until they serve, and find
// the leader that every running node agrees on.

import type { ProcEnv } from "./proc-env.ts";
import type { DraftOverrides } from "./proc-config.ts";
import { request, waitFor } from "./proc-http.ts";
import type { NodeProcess, StartNodeOptions } from "./proc-node.ts";

/** GET /health as the node answers it (200 healthy, 503 otherwise; the same body). */
export interface HealthBody {
  status: string;
  /** Why the node does not serve, when it knows (no leader, removed, …). */
  problem?: string;
  recovery: string;
  node_id: string;
  role: string;
  leader: string | null;
  term: number;
  commit_index: number;
  applied_index: number;
}

/** GET /health of a node, or null when it does not answer. */
export async function health(node: NodeProcess): Promise<{ status: number; body: HealthBody } | null> {
  try {
    const r = await request<HealthBody>(`${node.clientUrl}/health`, { timeoutMs: 2_000 });
    return r.body === undefined ? null : { status: r.status, body: r.body };
  } catch {
    return null;
  }
}

/** Start `count` nodes of a new cluster (node1 bootstraps) and wait until each answers /health 200. */
export async function startCluster(
  env: ProcEnv,
  count: number,
  overrides: DraftOverrides = {},
  options: Omit<StartNodeOptions, "config" | "dir"> = {},
): Promise<NodeProcess[]> {
  const nodes = await env.cluster(count, overrides, options);
  for (const node of nodes) node.spawn();
  await Promise.all(nodes.map((n) => n.waitHealthy()));
  return nodes;
}

/**
 * The leader that every running node of `nodes` names, once that node also says it leads.
 * Nodes that are not running (killed by the test) are left out.
 */
export async function waitForLeader(nodes: readonly NodeProcess[], deadlineMs = 30_000): Promise<NodeProcess> {
  return waitFor("one leader that every running node agrees on", async () => {
    const running = nodes.filter((n) => n.running);
    const answers = await Promise.all(running.map(health));
    const leaderIds = new Set(answers.map((a) => a?.body.leader ?? null));
    if (leaderIds.size !== 1) return undefined;
    const [leaderId] = [...leaderIds];
    const index = running.findIndex((n) => n.nodeId === leaderId);
    if (index < 0 || answers[index]?.body.role !== "leader") return undefined;
    return running[index];
  }, { deadlineMs, intervalMs: 50 });
}
