// A node removed from the cluster while it was cut off (or stopped) never receives the entry that
// removed it. Once it reaches a member again, the member's refusal tells it: it says it was
// removed (on /health, to clients, in its log) instead of campaigning for ever, keeps saying so
// across a restart, and the members' term never moves on its account.

import { beforeAll, describe, expect } from "bun:test";
import { clusterTest, fastRaft, type Cluster, type Health } from "../lib/cluster.ts";
import * as fs from "node:fs";
import { join } from "node:path";
import { addressText, ensureBinary, execute, runBinary, singleNodeConfig, useProcessCleanup, waitFor, type NodeProcess } from "../lib/proc.ts";

useProcessCleanup();


async function removeNode(via: NodeProcess, id: string): Promise<void> {
  const r = await runBinary(["admin", "remove-node", "--node", via.adminUrl, "--id", id], { deadlineMs: 30_000 });
  expect({ exitCode: r.exitCode, stderr: r.stderr }).toEqual({ exitCode: 0, stderr: "" });
}

async function waitSaysRemoved(cluster: Cluster, node: NodeProcess, what: string): Promise<Health> {
  return waitFor(what, async () => {
    const h = await cluster.health(node);
    return h !== null && h.status === "unavailable" && (h as Health & { problem?: string }).problem?.includes(`this node (${node.nodeId}) was removed from the cluster`) === true ? h : false;
  }, { deadlineMs: 30_000, intervalMs: 100 });
}

async function terms(cluster: Cluster, nodes: readonly NodeProcess[]): Promise<Record<string, number | null>> {
  const out: Record<string, number | null> = {};
  for (const n of nodes) out[n.nodeId] = (await cluster.health(n, 5_000))?.term ?? null;
  return out;
}

/** What the removed node says to a client, and its log, once it knows. */
async function expectToldRemoved(node: NodeProcess): Promise<void> {
  const r = await fetch(`${node.clientUrl}/v1/query`, { method: "POST", body: JSON.stringify({ sql: "SELECT 1" }), signal: AbortSignal.timeout(10_000) });
  const body = (await r.json()) as { error?: { code: string } };
  expect({ status: r.status, code: body.error?.code }).toEqual({ status: 421, code: "NOT_A_MEMBER" });
  await waitFor(`${node.nodeId} to log what happened and what to do`, () => node.lastRunLog().includes("this node was removed from the cluster while it was cut off"));
  expect(node.lastRunLog()).toContain("svc admin add-node");
}

describe("a node removed while it was away", () => {
  beforeAll(() => {
    ensureBinary();
  });

  clusterTest("cut off by the network while it is removed, it learns it once the network heals, keeps saying so after a restart, and moves no member's term", { proxied: true }, async (cluster) => {
    await cluster.start();
    const leader = await cluster.waitLeader();
    await execute(leader.clientUrl, ["CREATE TABLE t (id INTEGER PRIMARY KEY)"]);
    const away = cluster.others(leader)[0]!;
    const members = cluster.others(away);

    cluster.isolate(away);
    await removeNode(leader, away.nodeId);
    // Cut off, it knows only that it hears no leader.
    await waitFor(`${away.nodeId} to report no leader while cut off`, async () => (await cluster.health(away))?.status === "unavailable", { deadlineMs: 30_000 });
    const before = await terms(cluster, members);

    cluster.heal();
    const h = await waitSaysRemoved(cluster, away, `${away.nodeId}'s /health to say it was removed once the network healed`);
    expect((h as Health & { problem?: string }).problem).toContain("add-node");
    expect(h.role).toBe("removed");
    await expectToldRemoved(away);
    expect(await terms(cluster, members)).toEqual(before);
    expect((await cluster.waitLeader(members)).nodeId).toBe(leader.nodeId);

    // Restarted, it says so at once (raft/REMOVED), without a member telling it again.
    await cluster.kill9(away);
    cluster.isolate(away);
    away.spawn();
    await waitSaysRemoved(cluster, away, `${away.nodeId}'s /health to say it was removed after a restart, cut off`);
    await expectToldRemoved(away);
    cluster.heal();
    expect(await terms(cluster, members)).toEqual(before);
  }, 120_000);

  clusterTest("the bootstrap node, removed and started again empty with bootstrap = true left on, joins the cluster when added back rather than make one of its own", {}, async (cluster) => {
    await cluster.start();
    const boot = cluster.nodes.find((n) => n.config.cluster?.bootstrap === true)!;
    let leader = await cluster.waitLeader();
    if (leader === boot) {
      const moved = await runBinary(["admin", "transfer-leader", "--node", boot.adminUrl, "--to", cluster.others(boot)[0]!.nodeId], { deadlineMs: 30_000 });
      expect(moved.exitCode).toBe(0);
      leader = await cluster.waitLeader(cluster.others(boot));
    }
    await execute(leader.clientUrl, ["CREATE TABLE t (id INTEGER PRIMARY KEY)", "INSERT INTO t VALUES (1)"]);
    await removeNode(leader, boot.nodeId);
    expect(await boot.stop()).toBe(0);
    // As the removal message says: empty its data directory, start it, add it back.
    for (const name of fs.readdirSync(boot.dataDir)) fs.rmSync(join(boot.dataDir, name), { recursive: true, force: true });
    boot.spawn();
    // The members no longer count it one, so none dials back; their refusal says they are in a cluster.
    await waitFor(`${boot.nodeId} to see that a member is in a cluster`, () => boot.lastRunLog().includes("already belongs to a cluster: this node joins it"), { deadlineMs: 30_000 });
    expect(boot.lastRunLog()).not.toContain("bootstrapped a new cluster");
    const m = boot.config.cluster!.members!.find((x) => x.id === boot.nodeId)!;
    const added = await runBinary(["admin", "add-node", "--node", leader.adminUrl, "--id", boot.nodeId,
      "--peer", addressText(m.peer, "peer"), "--client", addressText(m.client, "client"), "--admin", addressText(m.admin, "admin")], { deadlineMs: 120_000 });
    expect({ exit: added.exitCode, stderr: added.stderr }).toEqual({ exit: 0, stderr: expect.stringContaining(`adding ${boot.nodeId}`) });
    await boot.waitHealthy();
    const rows = await fetch(`${boot.clientUrl}/v1/query`, { method: "POST", body: JSON.stringify({ sql: "SELECT count(*) FROM t" }) }).then((r) => r.json()) as { rows: number[][] };
    expect(rows.rows[0]?.[0]).toBe(1);
  }, 120_000);

  clusterTest("stopped while it is removed, it learns it once started again", {}, async (cluster) => {
    await cluster.start();
    const leader = await cluster.waitLeader();
    await execute(leader.clientUrl, ["CREATE TABLE t (id INTEGER PRIMARY KEY)"]);
    const away = cluster.others(leader)[0]!;
    const members = cluster.others(away);
    expect(await away.stop()).toBe(0);
    await removeNode(leader, away.nodeId);
    const before = await terms(cluster, members);

    away.spawn();
    await waitSaysRemoved(cluster, away, `${away.nodeId}'s /health to say it was removed once started again`);
    await expectToldRemoved(away);
    // cluster-status against it says the same, as its one problem (exit 1).
    const status = await runBinary(["admin", "cluster-status", "--node", away.adminUrl], { deadlineMs: 30_000 });
    expect(status.exitCode).toBe(1);
    expect(status.stdout).toContain(`PROBLEM: this node (${away.nodeId}) was removed from the cluster: stop it`);
    expect(await terms(cluster, members)).toEqual(before);
    expect((await cluster.waitLeader(members)).nodeId).toBe(leader.nodeId);

    // Stopped, its data directory passes verify-checksums, which names the record.
    expect(await away.stop()).toBe(0);
    const verify = await runBinary(["admin", "verify-checksums", "--data-dir", away.dataDir], { deadlineMs: 60_000 });
    expect(verify.exitCode).toBe(0);
    expect(verify.stdout).toContain("REMOVED");
  }, 120_000);
});

describe("a member that missed an add-node while it was away", () => {
  clusterTest("started again while that member leads, it learns its address from gossip, accepts its connection and catches up", {}, async (cluster) => {
    await cluster.start();
    let leader = await cluster.waitLeader();
    const away = cluster.others(leader)[0]!;
    await execute(leader.clientUrl, ["CREATE TABLE t (id INTEGER PRIMARY KEY)", "INSERT INTO t VALUES (1)"]);
    // node4 is added while `away` is stopped: its address travels only in entries `away` lacks,
    // and away's configuration file does not list it.
    expect(await away.stop()).toBe(0);
    const own = await singleNodeConfig(cluster.env.dir, { raft: fastRaft }, "node4");
    const entry = own.cluster!.members![0]!;
    const node4 = cluster.env.node({ ...own, cluster: { bootstrap: false, members: [...(leader.config.cluster?.members ?? []), entry] } });
    node4.spawn();
    const added = await runBinary(["admin", "add-node", "--node", leader.adminUrl, "--id", "node4",
      "--peer", addressText(entry.peer, "peer"), "--client", addressText(entry.client, "client"), "--admin", addressText(entry.admin, "admin")], { deadlineMs: 120_000 });
    expect(added.exitCode).toBe(0);
    const moved = await runBinary(["admin", "transfer-leader", "--node", leader.adminUrl, "--to", "node4"], { deadlineMs: 60_000 });
    expect(moved.exitCode).toBe(0);
    await execute(node4.clientUrl, ["INSERT INTO t VALUES (2)"]);
    away.spawn();
    // It follows node4 and holds what node4 committed meanwhile.
    await waitFor(`${away.nodeId} to follow node4 and hold its writes`, async () => {
      const h = await cluster.health(away);
      if (h?.leader !== "node4" || h.status !== "ok") return false;
      const r = await fetch(`${away.clientUrl}/v1/query`, { method: "POST", body: JSON.stringify({ sql: "SELECT count(*) FROM t" }) }).then((x) => x.json(), () => null) as { rows?: number[][] } | null;
      return r?.rows?.[0]?.[0] === 2;
    }, { deadlineMs: 60_000, intervalMs: 200 });
    // Its address came from gossip, or (when the entries that carry it reached this node first)
    // from the replicated set-member: either way the node names where it reaches node4.
    expect(away.lastRunLog()).toMatch(/learned the peer address of node4 from gossip|node4 is a member of the cluster, but not in this node's \[cluster\] members: it is reached at the addresses the cluster replicated/);
    leader = node4;
    expect((await cluster.health(leader))?.role).toBe("leader");
  }, 180_000);
});
