// Membership changes on a running cluster of real processes: a node added at run time joins
// as a learner and is promoted once caught up; leadership moves on request; a removed node
// no longer counts, and the cluster goes on taking writes.

import { describe, expect } from "bun:test";
import {
  addressText, execute, getJson, procTest, query, runBinary, singleNodeConfig, startCluster, useProcessCleanup, waitFor, waitForLeader,
} from "../lib/proc.ts";

useProcessCleanup();

const fastRaft = { raft: { heartbeatIntervalMs: 50, electionTimeoutMs: 500 } };

interface ClusterInfo {
  leader: string | null;
  members: { id: string; role: string; connected: boolean | null }[];
}

describe("membership", () => {
  procTest("a node added at run time catches up, becomes a voter, can lead, and a removed node stops counting", async (env) => {
    const nodes = await startCluster(env, 3, fastRaft);
    const leader = await waitForLeader(nodes);
    await execute(leader.clientUrl, ["CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"]);
    for (let i = 0; i < 50; i++) await execute(nodes[i % 3]?.clientUrl ?? "", [{ sql: "INSERT INTO t (v) VALUES (?)", params: [`v${i}`] }]);

    // node4 knows the others; they learn its addresses from the add-node entry.
    const own = await singleNodeConfig(env.dir, fastRaft, "node4");
    const ownMember = own.cluster?.members?.[0];
    if (ownMember === undefined) throw new Error("no member entry for node4");
    const node4 = env.node({
      ...own,
      cluster: { bootstrap: false, members: [...(nodes[0]?.config.cluster?.members ?? []), ownMember] },
    });
    node4.spawn();

    const add = await runBinary([
      "admin", "add-node", "--node", leader.adminUrl, "--id", "node4",
      "--peer", addressText(ownMember.peer, "peer"), "--client", addressText(ownMember.client, "client"), "--admin", addressText(ownMember.admin, "admin"),
    ], { deadlineMs: 120_000 });
    expect(add.stderr).toBe("");
    expect(add.exitCode).toBe(0);
    expect(add.stdout).toContain("voter");
    await node4.waitHealthy();

    const info = await getJson<ClusterInfo>(`${leader.adminUrl}/admin/cluster-info`);
    expect(info.members.find((m) => m.id === "node4")?.role).toBe("voter");
    await waitFor("node4 holds every row", async () => {
      const rows = await query(node4.clientUrl, "SELECT count(*) FROM t");
      return rows[0]?.[0] === 50;
    });

    const transfer = await runBinary(["admin", "transfer-leader", "--node", leader.adminUrl, "--to", "node4"], { deadlineMs: 30_000 });
    expect(transfer.exitCode).toBe(0);
    const all = [...nodes, node4];
    expect((await waitForLeader(all)).nodeId).toBe("node4");

    const victim = nodes.find((n) => n.nodeId !== leader.nodeId);
    if (victim === undefined) throw new Error("no follower to remove");
    const remove = await runBinary(["admin", "remove-node", "--node", node4.adminUrl, "--id", victim.nodeId], { deadlineMs: 30_000 });
    expect(remove.exitCode).toBe(0);
    const after = await getJson<ClusterInfo>(`${node4.adminUrl}/admin/cluster-info`);
    expect(after.members.map((m) => m.id).sort()).toEqual(all.map((n) => n.nodeId).filter((id) => id !== victim.nodeId).sort());

    // The removed node says so on /health (not "no leader").
    const said = await waitFor("the removed node's /health to say it was removed", async () => {
      const r = await fetch(`${victim.adminUrl}/health`);
      const body = (await r.json()) as { problem?: string };
      return r.status === 503 && body.problem?.includes("removed from the cluster") === true ? body : false;
    });
    expect(said.problem).toContain("add-node");
    // With the removed node stopped, three voters remain and a majority of them takes writes.
    await victim.kill9();
    const more = await execute(node4.clientUrl, [{ sql: "INSERT INTO t (v) VALUES (?)", params: ["after-remove"] }]);
    expect(more.results[0]?.rows_affected).toBe(1);
  }, 120_000);

  procTest("a learner whose voters are gone reports itself unavailable on /health once it has heard no leader for two election timeouts", async (env) => {
    const nodes = await startCluster(env, 3, fastRaft);
    const leader = await waitForLeader(nodes);
    const own = await singleNodeConfig(env.dir, fastRaft, "node4");
    const ownMember = own.cluster?.members?.[0];
    if (ownMember === undefined) throw new Error("no member entry for node4");
    const node4 = env.node({ ...own, cluster: { bootstrap: false, members: [...(nodes[0]?.config.cluster?.members ?? []), ownMember] } });
    node4.spawn();
    const add = await runBinary([
      "admin", "add-node", "--node", leader.adminUrl, "--id", "node4", "--learner",
      "--peer", addressText(ownMember.peer, "peer"), "--client", addressText(ownMember.client, "client"), "--admin", addressText(ownMember.admin, "admin"),
    ], { deadlineMs: 120_000 });
    expect(add.exitCode).toBe(0);
    await node4.waitHealthy();
    expect((await getJson<ClusterInfo>(`${leader.adminUrl}/admin/cluster-info`)).members.find((m) => m.id === "node4")?.role).toBe("learner");
    // A learner never campaigns: it keeps naming the leader it last heard.
    for (const n of nodes) await n.kill9();
    const answer = await waitFor("the learner's /health to say there is no leader", async () => {
      const r = await fetch(`${node4.adminUrl}/health`);
      const body = (await r.json()) as { status: string; problem?: string };
      return r.status === 503 ? body : false;
    }, { deadlineMs: 30_000, intervalMs: 100 });
    expect(answer.status).toBe("unavailable");
    expect(answer.problem).toContain("no leader for");
  }, 120_000);

  procTest("a node whose configuration leaves out a member of the cluster says so, naming it and the fix", async (env) => {
    const nodes = await startCluster(env, 3, fastRaft);
    await waitForLeader(nodes);
    const node2 = nodes[1];
    if (node2 === undefined) throw new Error("three nodes");
    expect(await node2.stop()).toBe(0);
    const members = (node2.config.cluster?.members ?? []).filter((m) => m.id !== "node3");
    const restarted = env.node({ ...node2.config, cluster: { ...node2.config.cluster, members } });
    restarted.spawn();
    await waitFor("node2 to name node3 as a member it does not know", () => restarted.log().includes("node3 is a member of the cluster, but not in this node's [cluster] members"));
    expect(restarted.log()).toContain("add them to members");
  }, 60_000);

  procTest("a change that is not valid is refused with a reason", async (env) => {
    const nodes = await startCluster(env, 3, fastRaft);
    const leader = await waitForLeader(nodes);
    const r = await runBinary(["admin", "remove-node", "--node", leader.adminUrl, "--id", "nobody"]);
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain("nobody");
    const t = await runBinary(["admin", "transfer-leader", "--node", leader.adminUrl, "--to", "ghost"]);
    expect(t.exitCode).toBe(1);
    expect(t.stderr).toContain("ghost");
  }, 60_000);
});
