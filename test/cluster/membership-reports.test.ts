// What a node says about its own place in the cluster, on real processes: a learner says it is
// one wherever it reports its role; a removed node says it was removed in cluster-status and
// cluster-info, not only on /health; a node whose configuration file leaves out a member the
// cluster has (added with add-node) says what to add to it.

import { describe, expect } from "bun:test";
import type { MemberDraft } from "../../src/config/index.ts";
import type { ProcEnv } from "../lib/proc-env.ts";
import type { NodeProcess } from "../lib/proc-node.ts";
import { addressText, getJson, procTest, runBinary, singleNodeConfig, startCluster, useProcessCleanup, waitFor, waitForLeader } from "../lib/proc.ts";

useProcessCleanup();

const fastRaft = { raft: { heartbeatIntervalMs: 50, electionTimeoutMs: 500 } };

/** node4, configured with every member, added to the running cluster as a learner. */
async function addLearner(env: ProcEnv, nodes: readonly NodeProcess[], leader: NodeProcess): Promise<{ node4: NodeProcess; entry: MemberDraft }> {
  const own = await singleNodeConfig(env.dir, fastRaft, "node4");
  const ownMember = own.cluster?.members?.[0];
  if (ownMember === undefined) throw new Error("no member entry for node4");
  const node4 = env.node({ ...own, cluster: { bootstrap: false, members: [...(nodes[0]?.config.cluster?.members ?? []), ownMember] } });
  node4.spawn();
  const add = await runBinary([
    "admin", "add-node", "--node", leader.adminUrl, "--id", "node4", "--learner",
    "--peer", addressText(ownMember.peer, "peer"), "--client", addressText(ownMember.client, "client"), "--admin", addressText(ownMember.admin, "admin"),
  ], { deadlineMs: 120_000 });
  expect({ exit: add.exitCode, stderr: add.stderr }).toEqual({ exit: 0, stderr: "" });
  await node4.waitHealthy();
  return { node4, entry: ownMember };
}

describe("what a node says about its membership", () => {
  procTest("a learner says it is a learner: /health on both ports, cluster-info, stats and cluster-status", async (env) => {
    const nodes = await startCluster(env, 3, fastRaft);
    const leader = await waitForLeader(nodes);
    const { node4 } = await addLearner(env, nodes, leader);

    for (const url of [node4.clientUrl, node4.adminUrl]) {
      expect({ url, role: (await getJson<{ role: string }>(`${url}/health`)).role }).toEqual({ url, role: "learner" });
    }
    const info = await runBinary(["admin", "cluster-info", "--node", node4.adminUrl]);
    expect(info.exitCode).toBe(0);
    expect((JSON.parse(info.stdout) as { role: string }).role).toBe("learner");
    expect((await (await fetch(`${node4.adminUrl}/metrics`)).text()).match(/^tensor_chain_role .*$/m)?.[0]).toBe("tensor_chain_role 4");
    const stats = await runBinary(["admin", "stats", "--node", node4.adminUrl]);
    expect(stats.exitCode).toBe(0);
    expect(stats.stdout).toMatch(/^role: +learner$/m);
    // Every member's row, asked of the learner itself and of the leader.
    for (const asked of [node4, leader]) {
      const status = await waitFor(`cluster-status on ${asked.nodeId} to show node4's facts`, async () => {
        const r = await runBinary(["admin", "cluster-status", "--json", "--node", asked.adminUrl]);
        const json = JSON.parse(r.stdout) as { members: { id: string; role: string | null }[] };
        return json.members.find((m) => m.id === "node4")?.role != null ? json : false;
      });
      expect(status.members.find((m) => m.id === "node4")?.role).toBe("learner");
    }
    // The voters still say what they are.
    expect((await getJson<{ role: string }>(`${leader.clientUrl}/health`)).role).toBe("leader");
    const follower = nodes.find((n) => n !== leader)!;
    expect((await getJson<{ role: string }>(`${follower.clientUrl}/health`)).role).toBe("follower");
  }, 120_000);

  procTest("a removed node says so in cluster-status (exit 1) and cluster-info, with what to do", async (env) => {
    const nodes = await startCluster(env, 3, fastRaft);
    const leader = await waitForLeader(nodes);
    const victim = nodes.find((n) => n !== leader)!;
    const remove = await runBinary(["admin", "remove-node", "--node", leader.adminUrl, "--id", victim.nodeId], { deadlineMs: 30_000 });
    expect(remove.exitCode).toBe(0);
    await waitFor("the removed node's /health to say it was removed", async () => {
      const r = await fetch(`${victim.adminUrl}/health`);
      return r.status === 503 && ((await r.json()) as { problem?: string }).problem?.includes("removed from the cluster") === true;
    });
    // Its role says so too, on /health and in tensor_chain_role (5), not "follower".
    expect(((await (await fetch(`${victim.adminUrl}/health`)).json()) as { role: string }).role).toBe("removed");
    expect((await (await fetch(`${victim.adminUrl}/metrics`)).text()).match(/^tensor_chain_role .*$/m)?.[0]).toBe("tensor_chain_role 5");

    const status = await runBinary(["admin", "cluster-status", "--node", victim.adminUrl]);
    expect(status.exitCode).toBe(1);
    // And its log, where an operator looks first, says it once.
    await waitFor(`${victim.nodeId}'s log to say it was removed`, () => victim.log().includes(`this node (${victim.nodeId}) was removed from the cluster: it serves no reads or writes`), { deadlineMs: 10_000 });
    expect(status.stdout).toContain(`PROBLEM: this node (${victim.nodeId}) was removed from the cluster: stop it`);
    expect(status.stdout).toContain("svc admin add-node");
    const statusJson = JSON.parse((await runBinary(["admin", "cluster-status", "--json", "--node", victim.adminUrl])).stdout) as { removed: boolean; healthy: boolean };
    expect(statusJson).toMatchObject({ removed: true, healthy: false });

    // cluster-info still prints what the node holds (exit 0, as metadata), and says it is no member's.
    const info = await runBinary(["admin", "cluster-info", "--node", victim.adminUrl]);
    expect(info.exitCode).toBe(0);
    expect(info.stderr).toContain(`this node (${victim.nodeId}) was removed from the cluster: stop it`);
    const infoJson = JSON.parse(info.stdout) as { removed: boolean; problem?: string };
    expect(infoJson.removed).toBe(true);
    expect(infoJson.problem).toContain("svc admin add-node");
    // A member says nothing of the kind.
    const fine = JSON.parse((await runBinary(["admin", "cluster-info", "--node", leader.adminUrl])).stdout) as { removed: boolean; problem?: string };
    expect(fine).toMatchObject({ removed: false });
    expect(fine.problem).toBeUndefined();
    await victim.kill9();
  }, 90_000);

  procTest("a member added with add-node that a node's configuration file leaves out is named there, with the entry to add", async (env) => {
    const nodes = await startCluster(env, 3, fastRaft);
    const leader = await waitForLeader(nodes);
    const { node4, entry } = await addLearner(env, nodes, leader);
    const peer = addressText(entry.peer, "peer");

    // The three first members' files do not list node4: each says so in its log, once.
    for (const n of nodes) {
      await waitFor(`${n.nodeId} to warn that its file leaves out node4`, () =>
        n.log().includes("node4 is a member of the cluster, but not in this node's [cluster] members"));
    }
    // cluster-status on one of them: a warning naming node4 and the entry to add; nothing is
    // wrong with the cluster itself (its replicated addresses reach node4), so it exits 0.
    const status = await waitFor("cluster-status to be healthy but for the warning", async () => {
      const r = await runBinary(["admin", "cluster-status", "--node", leader.adminUrl]);
      return r.exitCode === 0 ? r : false;
    });
    expect(status.stdout).toContain(`WARNING: node4 is a member of the cluster, but ${leader.nodeId}'s configuration file does not list it in [cluster] members`);
    expect(status.stdout).toContain(`{ id = "node4", peer = "${peer}"`);
    const json = JSON.parse((await runBinary(["admin", "cluster-status", "--json", "--node", leader.adminUrl])).stdout) as { warnings: string[] };
    expect(json.warnings.some((w) => w.includes("node4"))).toBe(true);
    // node4's own file lists everyone: nothing to say there.
    const own = JSON.parse((await runBinary(["admin", "cluster-status", "--json", "--node", node4.adminUrl])).stdout) as { warnings: string[] };
    expect(own.warnings).toEqual([]);
  }, 120_000);
});

describe("add-node while leadership moves", () => {
  procTest("an add-node waiting for its learner to catch up fails at once, saying so, when leadership moves: the node stays a learner to promote", async (env) => {
    const nodes = await startCluster(env, 3, fastRaft);
    const leader = await waitForLeader(nodes);
    // node4 is not started: the learner cannot catch up, so add-node waits.
    const own = await singleNodeConfig(env.dir, fastRaft, "node4");
    const m = own.cluster!.members![0]!;
    const adding = runBinary(["admin", "add-node", "--node", leader.adminUrl, "--id", "node4",
      "--peer", addressText(m.peer, "peer"), "--client", addressText(m.client, "client"), "--admin", addressText(m.admin, "admin")], { deadlineMs: 150_000 });
    await waitFor("node4 to be a learner", async () => (await getJson<{ members: { id: string; role: string }[] }>(`${leader.adminUrl}/admin/cluster-info`)).members.some((x) => x.id === "node4" && x.role === "learner"), { deadlineMs: 30_000 });
    const to = nodes.find((n) => n !== leader)!;
    expect((await runBinary(["admin", "transfer-leader", "--node", leader.adminUrl, "--to", to.nodeId], { deadlineMs: 60_000 })).exitCode).toBe(0);
    const r = await adding;
    expect(r.exitCode).toBe(1);
    // The new leader is named when this node knows it already (an election may still be on).
    expect(r.stderr).toMatch(new RegExp(`node4 was added as a learner, but leadership moved to (${to.nodeId}|another member) while it caught up: it stays a learner`));
    expect(r.stderr).toContain("svc admin promote --id node4");
  }, 120_000);
});

describe("cluster-status when the leader's admin port does not answer", () => {
  procTest("it says that the leader's WAL archiving was not checked, and whose answer it gives, rather than seem to vouch for it", async (env) => {
    // A long election timeout: the frozen leader is still the one the others name while cluster-status asks.
    const nodes = await startCluster(env, 3, { raft: { heartbeatIntervalMs: 100, electionTimeoutMs: 5_000 } });
    const leader = await waitForLeader(nodes, 60_000);
    const follower = nodes.find((n) => n !== leader)!;
    await waitFor("cluster-status healthy from the follower", async () => (await runBinary(["admin", "cluster-status", "--node", follower.adminUrl])).exitCode === 0, { deadlineMs: 30_000, intervalMs: 200 });
    if (leader.pid === null) throw new Error("no leader process");
    process.kill(leader.pid, "SIGSTOP");
    try {
      const r = await runBinary(["admin", "cluster-status", "--node", follower.adminUrl], { deadlineMs: 30_000 });
      expect(r.stdout).toContain("WARNING: the leader's admin port did not answer from here");
      expect(r.stdout).toContain(`its WAL archiving was not checked; this answer is ${follower.nodeId}'s`);
    } finally {
      process.kill(leader.pid, "SIGCONT");
    }
  }, 120_000);
});
