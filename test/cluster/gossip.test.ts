// Gossip on real processes: SWIM over UDP on the peer port. A frozen member (SIGSTOP) is
// suspected then declared dead by the others, and cluster-status names it from one node while
// the frozen node's admin port answers nothing; it comes back alive on SIGCONT; kill -9 is
// dead. A stray UDP sender (garbage, another cluster's packets) is ignored and counted. Over
// the test proxies: a member cut from Raft but not from gossip is called out, and a cut of the
// whole peer port is named as a partition. The leader's WAL archiving is among the facts gossiped.

import { afterAll, describe, expect } from "bun:test";
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { staleViewAfterMs, type GossipStatusJson } from "../../src/cli/admin/_gossip-report.ts";
import { clusterDerivedKey, encodePacket, type GossipMessage } from "../../src/gossip/index.ts";
import { clusterTest, type Cluster } from "../lib/cluster.ts";
import { addressText, execute, fetchMetrics, getJson, kvSchema, runBinary, useProcessCleanup, waitFor, type NodeProcess } from "../lib/proc.ts";

useProcessCleanup();

/** One gossip key file for every node of a test that shares it; a test may rewrite it. */
const gossipKeyFile = join(fs.mkdtempSync(join(tmpdir(), "svc-gossip-key-")), "gossip.key");
fs.writeFileSync(gossipKeyFile, `${randomBytes(32).toString("base64")}\n`, { mode: 0o600 });
afterAll(() => fs.rmSync(join(gossipKeyFile, ".."), { recursive: true, force: true }));

interface GossipJson {
  cluster_id: string;
  gossip: { members: { id: string; state: string; view: Record<string, string> | null; facts: { role: string } | null }[] } | null;
}

async function stateSeen(observer: NodeProcess, subject: string): Promise<string | null> {
  try {
    const g = await getJson<GossipJson>(`${observer.adminUrl}/admin/gossip`);
    return g.gossip?.members.find((m) => m.id === subject)?.state ?? null;
  } catch {
    return null;
  }
}

async function waitSeen(observers: readonly NodeProcess[], subject: string, state: string, deadlineMs = 30_000): Promise<void> {
  await waitFor(`${observers.map((o) => o.nodeId).join(", ")} to see ${subject} ${state}`, async () => {
    const seen = await Promise.all(observers.map((o) => stateSeen(o, subject)));
    return seen.every((s) => s === state);
  }, { deadlineMs, intervalMs: 100 });
}

async function clusterStatus(node: NodeProcess, json = false): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  return runBinary(["admin", "cluster-status", ...(json ? ["--json"] : []), "--node", node.adminUrl], { deadlineMs: 30_000 });
}

async function waitHealthyStatus(cluster: Cluster, from: NodeProcess): Promise<string> {
  return waitFor("cluster-status to report a healthy cluster", async () => {
    const r = await clusterStatus(from);
    return r.exitCode === 0 ? r.stdout : false;
  }, { deadlineMs: 30_000, intervalMs: 500 });
}

function peerPort(node: NodeProcess): number {
  const text = addressText(node.config.listen?.peer, `${node.nodeId} peer`);
  return Number(text.slice(text.lastIndexOf(":") + 1));
}

describe("gossip between real processes", () => {
  clusterTest("a frozen member is suspected then dead, named by cluster-status from one node; alive again on SIGCONT; dead after kill -9", {}, async (cluster) => {
    await cluster.start();
    const [a, b, c] = cluster.nodes;
    if (a === undefined || b === undefined || c === undefined) throw new Error("three nodes");
    await waitHealthyStatus(cluster, a);

    cluster.pause(c);
    // Suspect first (no ack, direct or indirect), then dead after the suspicion timeout.
    await waitFor(`${a.nodeId} to suspect ${c.nodeId}`, async () => (await stateSeen(a, c.nodeId)) !== "alive", { deadlineMs: 30_000, intervalMs: 50 });
    await waitSeen([a, b], c.nodeId, "dead");
    const metrics = await fetchMetrics(a.adminUrl);
    expect(metrics.get("tensor_chain_gossip_suspicions_total") ?? 0).toBeGreaterThanOrEqual(1);
    expect(metrics.get("tensor_chain_gossip_deaths_total") ?? 0).toBeGreaterThanOrEqual(1);
    expect(metrics.get('tensor_chain_gossip_members{state="dead"}')).toBe(1);
    expect(metrics.get('tensor_chain_gossip_members{state="alive"}')).toBe(2);

    // The frozen node's admin port answers nothing; either live node answers for the cluster.
    for (const from of [a, b]) {
      const r = await clusterStatus(from);
      expect(r.exitCode).not.toBe(0);
      expect(r.stdout).toContain(`${c.nodeId} is dead as seen by ${from.nodeId}`);
      expect(r.stdout).toContain(`${c.nodeId} is unreachable from {${[a.nodeId, b.nodeId].sort().join(",")}}: stopped, or cut off by a partition`);
    }
    const json = JSON.parse((await clusterStatus(a, true)).stdout) as { healthy: boolean; groups: string[][]; unreachable: string[]; partitioned: boolean; members: { id: string; state: string }[] };
    expect(json.healthy).toBe(false);
    expect(json.groups).toEqual([[a.nodeId, b.nodeId].sort(), [c.nodeId]]);
    expect(json.unreachable).toEqual([c.nodeId]);
    expect(json.partitioned).toBe(false);
    expect(json.members.find((m) => m.id === c.nodeId)?.state).toBe("dead");

    cluster.resume(c);
    await waitSeen([a, b], c.nodeId, "alive");
    await waitSeen([c], a.nodeId, "alive");
    const healthy = await waitHealthyStatus(cluster, b);
    expect(healthy).toContain("no partition");

    await cluster.kill9(c);
    await waitSeen([a, b], c.nodeId, "dead");
    const r = await clusterStatus(a);
    expect(r.exitCode).not.toBe(0);
    expect(r.stdout).toContain(`${c.nodeId} is dead as seen by ${a.nodeId}`);
    const log = a.lastRunLog();
    expect(log).toContain("gossip: member declared dead");
  }, 180_000);

  clusterTest("a quiet cluster, unchanged for longer than a view stays current unconfirmed, shows no member stale from any node", { count: 5 }, async (cluster) => {
    await cluster.start();
    const [a] = cluster.nodes;
    if (a === undefined) throw new Error("five nodes");
    await waitHealthyStatus(cluster, a);
    // From here nothing changes in any member's facts or view: each is only sent again, unchanged.
    const quietSinceMs = Date.now();
    const gossip = (await getJson<GossipStatusJson>(`${a.adminUrl}/admin/gossip`)).gossip;
    if (gossip === null) throw new Error(`${a.nodeId} runs gossip`);
    const staleAfterMs = staleViewAfterMs(gossip);
    await waitFor("the cluster to stay quiet past the staleness threshold", () => Date.now() - quietSinceMs > staleAfterMs + gossip.protocol_period_ms, {
      deadlineMs: staleAfterMs + 10_000, intervalMs: 200,
    });
    for (const node of cluster.nodes) {
      const r = await clusterStatus(node);
      expect(r.stdout).not.toContain("(last known, stale)");
      expect(r.exitCode).toBe(0);
      const members = (await getJson<GossipStatusJson>(`${node.adminUrl}/admin/gossip`)).gossip?.members ?? [];
      expect(members).toHaveLength(5);
      for (const m of members) expect({ seenBy: node.nodeId, id: m.id, current: m.facts_age_ms !== null && m.facts_age_ms <= staleAfterMs }).toEqual({ seenBy: node.nodeId, id: m.id, current: true });
    }
  }, 120_000);

  clusterTest("a stray UDP sender on the peer port, with garbage or another cluster's packets, is ignored and counted", {}, async (cluster) => {
    await cluster.start();
    const [a, b] = cluster.nodes;
    if (a === undefined || b === undefined) throw new Error("three nodes");
    await waitHealthyStatus(cluster, a);
    const before = await fetchMetrics(a.adminUrl);
    const stray = await Bun.udpSocket({ hostname: "127.0.0.1", port: 0 });
    try {
      const forged: GossipMessage = { type: "ping", seq: 1, from: b.nodeId, updates: [{ id: b.nodeId, state: "dead", incarnation: Number.MAX_SAFE_INTEGER - 1 }], facts: [] };
      for (let i = 0; i < 5; i++) {
        stray.send(new TextEncoder().encode(`garbage ${i}`), peerPort(a), "127.0.0.1");
        stray.send(encodePacket(forged, "another-cluster", clusterDerivedKey("another-cluster")), peerPort(a), "127.0.0.1");
        await Bun.sleep(20);
      }
    } finally {
      stray.close();
    }
    await waitFor("the stray packets to be counted", async () => {
      const m = await fetchMetrics(a.adminUrl);
      const grew = (reason: string) => (m.get(`tensor_chain_gossip_packets_dropped_total{reason="${reason}"}`) ?? 0) - (before.get(`tensor_chain_gossip_packets_dropped_total{reason="${reason}"}`) ?? 0);
      return grew("malformed") >= 5 && grew("other_cluster") >= 5;
    }, { deadlineMs: 10_000, intervalMs: 100 });
    // The forged claim that b is dead changed nothing.
    expect(await stateSeen(a, b.nodeId)).toBe("alive");
    expect((await clusterStatus(a)).exitCode).toBe(0);
    // The gossip metrics are valid Prometheus text.
    const text = await (await fetch(`${a.adminUrl}/metrics`)).text();
    expect(text).toContain('tensor_chain_gossip_packets_dropped_total{reason="other_cluster"}');
    if (spawnSync("promtool", ["--version"]).status === 0) {
      const check = spawnSync("promtool", ["check", "metrics"], { input: text, encoding: "utf8" });
      expect(`${check.stdout}${check.stderr}`).toBe("");
      expect(check.status).toBe(0);
    }
  }, 120_000);

  clusterTest("a member whose gossip key differs is named by cluster-status on both sides as heard but refused, with the fix, not just as dead", {
    overrides: { gossip: { keyFile: gossipKeyFile } },
  }, async (cluster) => {
    await cluster.start();
    const [a, b, c] = cluster.nodes;
    if (a === undefined || b === undefined || c === undefined) throw new Error("three nodes");
    await waitHealthyStatus(cluster, a);
    // c is restarted with a key file of its own: it seals and opens with a key the others do not hold.
    const otherKeyFile = `${gossipKeyFile}.other`;
    fs.writeFileSync(otherKeyFile, `${randomBytes(32).toString("base64")}\n`, { mode: 0o600 });
    expect(await c.stop()).toBe(0);
    c.options.config = { ...c.options.config, gossip: { ...c.options.config.gossip, keyFile: otherKeyFile } };
    c.spawn();
    await c.waitHealthy();
    await waitSeen([a, b], c.nodeId, "dead");
    const seenFromA = await waitFor(`cluster-status on ${a.nodeId} to name ${c.nodeId}'s key`, async () => {
      const r = await clusterStatus(a);
      return r.stdout.includes(`${c.nodeId} is dead as seen by ${a.nodeId}`) && r.stdout.includes("fail authentication") ? r : false;
    }, { deadlineMs: 30_000, intervalMs: 500 });
    expect(seenFromA.exitCode).toBe(1);
    expect(seenFromA.stdout).toMatch(new RegExp(`PROBLEM: ${c.nodeId} is dead as seen by ${a.nodeId} \\(for \\d+ s\\): its gossip packets reach ${a.nodeId} but fail authentication \\(it is encrypted with a key this node's \\[gossip\\] key_file does not hold\\); give every member the same \\[gossip\\] key_file`));
    // The other side names both members it cannot open, and the log says it once per sender.
    const fromC = await waitFor(`cluster-status on ${c.nodeId} to name both others' keys`, async () => {
      const r = await clusterStatus(c);
      return [a, b].every((n) => r.stdout.includes(`${n.nodeId} is dead as seen by ${c.nodeId}`)) && (r.stdout.match(/fail authentication/g) ?? []).length >= 2 ? r : false;
    }, { deadlineMs: 30_000, intervalMs: 500 });
    expect(fromC.exitCode).toBe(1);
    expect(c.log()).toContain(`(${a.nodeId}) fail authentication and are dropped`);
    // Raft does not use gossip keys: the cluster still commits through c.
    await execute(c.clientUrl, [kvSchema]);
  }, 120_000);

  clusterTest("the leader's WAL archiving reaches every member through gossip", {
    overrides: { wal: { archiveCommand: "true", archiveTimeoutMs: 1_000, segmentSizeBytes: 1024 * 1024 } },
  }, async (cluster) => {
    await cluster.start();
    const leader = await cluster.waitLeader();
    await execute(leader.clientUrl, [kvSchema]);
    for (const follower of cluster.others(leader)) {
      await waitFor(`${follower.nodeId} to hear of ${leader.nodeId}'s archived segments`, async () => {
        const g = await getJson<{ gossip: { members: { id: string; facts: { archive: { last_archived_segment: string | null; failing: boolean } | null } | null }[] } }>(`${follower.adminUrl}/admin/gossip`);
        const archive = g.gossip.members.find((m) => m.id === leader.nodeId)?.facts?.archive ?? null;
        return archive !== null && archive.last_archived_segment !== null && !archive.failing;
      }, { deadlineMs: 30_000, intervalMs: 200 });
    }
  }, 120_000);

  clusterTest("a member cut from Raft but not from gossip is called out; a cut peer port makes each side name the other unreachable, stopped or cut off by a partition", { proxied: true }, async (cluster) => {
    await cluster.start();
    const leader = await cluster.waitLeader();
    const [x, y] = cluster.others(leader);
    if (x === undefined || y === undefined) throw new Error("three nodes");
    await waitHealthyStatus(cluster, leader);

    // Raft (TCP) between the leader and x is cut; gossip (UDP) still flows.
    cluster.cutLink(leader, x);
    const cut = await waitFor("cluster-status to call out the member cut from Raft", async () => {
      const r = await clusterStatus(y);
      return r.stdout.includes(`${x.nodeId} is alive by gossip but cut from Raft`) ? r : false;
    }, { deadlineMs: 30_000, intervalMs: 500 });
    expect(cut.exitCode).not.toBe(0);
    expect(await stateSeen(leader, x.nodeId)).toBe("alive");
    cluster.heal();
    await waitHealthyStatus(cluster, leader);

    // The whole peer port between x and both others is cut: gossip too.
    const proxies = cluster.proxies;
    if (proxies === null) throw new Error("proxied cluster");
    proxies.cutPeerPort(x.nodeId, leader.nodeId, true);
    proxies.cutPeerPort(x.nodeId, y.nodeId, true);
    await waitSeen([leader, y], x.nodeId, "dead");
    await waitSeen([x], leader.nodeId, "dead");
    // Neither side hears anything of the other: each names the other unreachable, stopped or cut
    // off by a partition (the two look the same from one side).
    const fromLeader = await clusterStatus(leader);
    expect(fromLeader.exitCode).not.toBe(0);
    expect(fromLeader.stdout).toContain(`${x.nodeId} is unreachable from {${[leader.nodeId, y.nodeId].sort().join(",")}}: stopped, or cut off by a partition`);
    const fromX = await clusterStatus(x);
    expect(fromX.exitCode).not.toBe(0);
    expect(fromX.stdout).toContain(`${[leader.nodeId, y.nodeId].sort().join(", ")} are unreachable from {${x.nodeId}}: stopped, or cut off by a partition`);
    cluster.heal();
    await waitHealthyStatus(cluster, x);
  }, 180_000);
});
