// cluster-status's reading of one node's gossip: partitions as groups of members that see each
// other alive, members alive by gossip but cut from Raft, lag behind the leader's commit.

import { describe, expect, test } from "bun:test";
import { gossipReport, renderGossipReport, staleViewAfterMs, type GossipMemberJson, type GossipState, type GossipStatusJson } from "../../src/cli/admin/_gossip-report.ts";

function member(id: string, state: GossipState, view: Record<string, GossipState>, facts: Partial<NonNullable<GossipMemberJson["facts"]>> = {}): GossipMemberJson {
  return {
    id, state, incarnation: 1, ever_alive: true, state_for_ms: 0, last_heard_ms_ago: 0, facts_age_ms: state === "alive" ? 100 : 60_000, view,
    facts: {
      role: "follower", term: 2, leader: "node1", commit_index: 10, applied_index: 10, version: "1", recovery: "healthy",
      peer: "", client: "", admin: "", raft_links: {}, archive: null, ...facts,
    },
  };
}

function status(members: GossipMemberJson[], leader: string | null = "node1"): GossipStatusJson {
  return {
    node_id: "node1", cluster_id: "c", leader, voters: members.map((m) => m.id), learners: [], raft_links: {},
    gossip: { protocol_period_ms: 1000, suspicion_timeout_ms: 5000, members, counters: {}, packets_dropped: {} },
  };
}

describe("cluster-status from gossip", () => {
  test("every member alive and following the leader is healthy, one group", () => {
    const r = gossipReport(status([
      member("node1", "alive", { node2: "alive", node3: "alive" }, { role: "leader" }),
      member("node2", "alive", { node1: "alive", node3: "alive" }),
      member("node3", "alive", { node1: "alive", node2: "alive" }, { applied_index: 7 }),
    ]));
    expect(r.problems).toEqual([]);
    expect(r.healthy).toBe(true);
    expect(r.groups).toEqual([["node1", "node2", "node3"]]);
    expect(r.members.find((m) => m.id === "node3")?.lag).toBe(3);
  });

  test("a member of the configuration that gossip has not heard of (a node that just joined) is a problem, not a healthy cluster of one", () => {
    const s = status([member("node2", "alive", {}, { leader: "node1" })]);
    const r = gossipReport({ ...s, node_id: "node2", voters: ["node1", "node2", "node3"] });
    expect(r.healthy).toBe(false);
    expect(r.problems).toEqual([
      "node1 is a member of the cluster, but node2's gossip has not heard of it yet (it just started or joined?): its state is unknown",
      "node3 is a member of the cluster, but node2's gossip has not heard of it yet (it just started or joined?): its state is unknown",
    ]);
  });

  test("a majority of the voters that lost their log is named as why no leader can be elected, though they still name the leader they last heard", () => {
    // node1 kept its log and campaigns in vain; node2 and node3 do not vote, and name node1 still.
    const r = gossipReport(status([
      member("node1", "alive", { node2: "alive", node3: "alive" }, { role: "pre_candidate", leader: null }),
      member("node2", "alive", { node1: "alive", node3: "alive" }, { recovery: "requesting_snapshot", lost_log: true, applied_index: 0 }),
      member("node3", "alive", { node1: "alive", node2: "alive" }, { recovery: "requesting_snapshot", lost_log: true, applied_index: 0 }),
    ], null));
    expect(r.healthy).toBe(false);
    expect(r.problems).toEqual([
      expect.stringMatching(/^a majority of the voters lost their log \(node2, node3 of node1, node2, node3\): no leader can be elected\. /),
      "node2 is requesting_snapshot: it lost log entries it held and does not vote until a leader gives them back",
      "node3 is requesting_snapshot: it lost log entries it held and does not vote until a leader gives them back",
    ]);
  });

  test("one member that lost its log while the others elect a leader is only recovering: no word of an election that cannot succeed", () => {
    const r = gossipReport(status([
      member("node1", "alive", { node2: "alive", node3: "alive" }, { role: "leader" }),
      member("node2", "alive", { node1: "alive", node3: "alive" }, { recovery: "requesting_snapshot", lost_log: true }),
      member("node3", "alive", { node1: "alive", node2: "alive" }),
    ]));
    expect(r.problems).toEqual(["node2 is requesting_snapshot: it lost log entries it held and does not vote until a leader gives them back"]);
  });

  test("a member that lost its log and is stopped may come back with it: only members alive by gossip count", () => {
    const r = gossipReport(status([
      member("node1", "alive", { node2: "alive", node3: "dead" }, { role: "pre_candidate", leader: null }),
      member("node2", "alive", { node1: "alive", node3: "dead" }, { recovery: "requesting_snapshot", lost_log: true }),
      member("node3", "dead", { node1: "alive", node2: "alive" }, { recovery: "requesting_snapshot", lost_log: true }),
    ], null));
    expect(r.problems.some((p) => p.includes("lost their log"))).toBe(false);
    expect(r.problems).toContain("no leader is known: node1, named as leader by members that last heard from it, is pre_candidate itself");
  });

  test("just after an election, the new leader's facts gossiped before it won do not make it a leader that stepped down", () => {
    for (const before of [{ role: "follower", term: 2, leader: "node1" }, { role: "candidate", term: 3, leader: null }]) {
      const s = status([
        member("node1", "alive", { node2: "alive", node3: "alive" }, { term: 3, leader: "node3" }),
        member("node2", "alive", { node1: "alive", node3: "alive" }, { term: 3, leader: "node3" }),
        member("node3", "alive", { node1: "alive", node2: "alive" }, before),
      ], "node3");
      const r = gossipReport({ ...s, node_id: "node2" });
      expect(r.problems.filter((p) => p.includes("no leader is known"))).toEqual([]);
    }
    // Facts of a later term, or of the same term as a follower: it no longer leads.
    const later = gossipReport({ ...status([
      member("node1", "alive", { node2: "alive", node3: "alive" }, { term: 3, leader: "node3" }),
      member("node2", "alive", { node1: "alive", node3: "alive" }, { term: 3, leader: "node3" }),
      member("node3", "alive", { node1: "alive", node2: "alive" }, { role: "follower", term: 3, leader: null }),
    ], "node3"), node_id: "node2" });
    expect(later.problems).toContain("no leader is known: node3, named as leader by members that last heard from it, is follower itself");
  });

  test("a member whose disk is full is a problem, and a learner is shown as one", () => {
    const s = status([
      member("node1", "alive", { node2: "alive", node3: "alive" }, { role: "leader" }),
      member("node2", "alive", { node1: "alive", node3: "alive" }, { disk_full: true }),
      member("node3", "alive", { node1: "alive", node2: "alive" }),
    ]);
    const r = gossipReport({ ...s, voters: ["node1", "node2"], learners: ["node3"] });
    expect(r.healthy).toBe(false);
    expect(r.problems).toEqual([expect.stringContaining("node2's disk is full")]);
    expect(r.members.find((m) => m.id === "node3")?.role).toBe("learner");
  });

  test("a member heard but refused for its gossip key is a problem with the cause and the fix; a refused sender that is no member, a warning", () => {
    const s = status([
      member("node1", "alive", { node2: "alive", node3: "dead" }, { role: "leader" }),
      member("node2", "alive", { node1: "alive", node3: "dead" }),
      member("node3", "dead", { node1: "alive", node2: "alive" }),
    ]);
    const cause = "it is encrypted with a key this node's [gossip] key_file does not hold";
    const refused = [
      { address: "127.0.0.1:7899", member: "node3", reason: "decrypt_failed", cause, packets: 40, last_ms_ago: 300 },
      { address: "10.0.0.9:7879", member: null, reason: "key_mismatch", cause: "one of the two members has a [gossip] key_file and the other has none", packets: 2, last_ms_ago: 900 },
      // Long ago (past a view's life): a key fixed since is not blamed.
      { address: "10.0.0.8:7879", member: null, reason: "decrypt_failed", cause, packets: 2, last_ms_ago: 3_600_000 },
    ];
    const r = gossipReport({ ...s, gossip: { ...s.gossip!, refused_senders: refused } });
    expect(r.healthy).toBe(false);
    expect(r.problems).toContain(`node3 is dead as seen by node1 (for 0 s): its gossip packets reach node1 but fail authentication (${cause}); ` +
      "give every member the same [gossip] key_file (during a rotation, every key listed on every member), or none on any");
    // A sender that is no member's address is a warning: a stray may forge the cluster id in clear.
    expect(r.problems.join("\n")).not.toContain("10.0.0.9");
    expect(r.warnings).toEqual([expect.stringContaining("gossip packets from 10.0.0.9:7879, not a member's peer address, reach node1 but fail authentication (one of the two members has a [gossip] key_file")]);
    expect([...r.problems, ...r.warnings].join("\n")).not.toContain("10.0.0.8");
    // An answer without the field (an older node) reads as before.
    expect(gossipReport(s).problems).toContain("node3 is dead as seen by node1 (for 0 s)");
  });

  test("a member that answers as a member of another cluster (another cluster's backup restored on it) is named so, with the way out, not as stopped or cut off", () => {
    const s = status([
      member("node1", "alive", { node2: "dead", node3: "alive" }, { role: "leader" }),
      member("node2", "dead", {}),
      member("node3", "alive", { node1: "alive", node2: "dead" }),
    ]);
    const r = gossipReport({ ...s, of_another_cluster: ["node2"] });
    expect(r.healthy).toBe(false);
    const said = r.problems.join("\n");
    expect(said).toContain("node2 answers as a member of another cluster");
    expect(said).toContain("svc admin cluster-info");
    expect(said).not.toContain("cut off by a partition");
  });

  test("a node removed from the cluster names its removal as the one problem, with what to do, not the partition its gossip shows", () => {
    const s = status([
      member("node1", "alive", { node2: "suspect", node3: "alive" }, { leader: "node3" }),
      member("node2", "suspect", { node1: "alive", node3: "alive" }, { role: "leader", leader: "node2" }),
      member("node3", "alive", { node1: "suspect", node2: "alive" }, { role: "leader", leader: "node3" }),
    ], null);
    const said = "this node (node1) was removed from the cluster: stop it (its data is no longer replicated), or add it back with `svc admin add-node` on an empty data directory";
    const r = gossipReport({ ...s, voters: ["node2", "node3"], removed: true, problem: said });
    expect(r.removed).toBe(true);
    expect(r.healthy).toBe(false);
    expect(r.problems).toEqual([said]);
    expect(renderGossipReport(r)).toContain(`PROBLEM: ${said}\n`);
    // A member says nothing of the kind.
    expect(gossipReport({ ...s, removed: false }).removed).toBe(false);
  });

  test("the answering node's file leaving out a member it cannot reach is a problem; one the cluster replicated, or misstated, a warning with the entry to write", () => {
    const s = status([
      member("node1", "alive", { node2: "alive" }, { role: "leader" }),
      member("node2", "alive", { node1: "alive" }),
    ]);
    const node4 = { id: "node4", peer: "10.0.0.4:7879", client: "10.0.0.4:7878", admin: "10.0.0.4:9090" };
    const node2 = { id: "node2", peer: "10.0.0.2:7879", client: "10.0.0.2:7878", admin: "10.0.0.2:9090" };
    const warned = gossipReport({ ...s, config_drift: [
      { id: "node4", in_file: null, replicated: node4 },
      { id: "node2", in_file: node2, replicated: { ...node2, peer: "10.0.0.22:7879" } },
    ] });
    expect(warned.healthy).toBe(true);
    expect(warned.warnings).toEqual([
      "node4 is a member of the cluster, but node1's configuration file does not list it in [cluster] members (the addresses the cluster replicated are used): " +
        'add { id = "node4", peer = "10.0.0.4:7879", client = "10.0.0.4:7878", admin = "10.0.0.4:9090" } to members there (a node started on an empty data directory, and init-cluster --bootstrap, know only the file)',
      expect.stringContaining('node1\'s configuration file gives node2 other addresses in [cluster] members than the cluster replicated (set-member; the cluster\'s are used): change { id = "node2", peer = "10.0.0.2:7879"'),
    ]);
    expect(warned.warnings[1]).toContain('to { id = "node2", peer = "10.0.0.22:7879"');
    const text = renderGossipReport(warned);
    expect(text).toContain("healthy: one leader");
    expect(text).toContain("WARNING: node4 is a member of the cluster");

    const unknown = gossipReport({ ...s, config_drift: [{ id: "node3", in_file: null, replicated: null }] });
    expect(unknown.healthy).toBe(false);
    expect(unknown.warnings).toEqual([]);
    expect(unknown.problems).toEqual([expect.stringContaining("node3 is a member of the cluster, but node1's configuration file does not list it in [cluster] members and no addresses were replicated for it: node1 cannot reach it")]);
  });

  test("a member the others see dead is its own group, unreachable: stopped or cut off, which look the same from here", () => {
    const r = gossipReport(status([
      member("node1", "alive", { node2: "alive", node3: "dead" }, { role: "leader" }),
      member("node2", "alive", { node1: "alive", node3: "dead" }),
      // Its last known view still says everyone is alive.
      member("node3", "dead", { node1: "alive", node2: "alive" }),
    ]));
    expect(r.groups).toEqual([["node1", "node2"], ["node3"]]);
    expect(r.unreachable).toEqual(["node3"]);
    expect(r.partitioned).toBe(false);
    expect(r.problems).toContain("node3 is unreachable from {node1,node2}: stopped, or cut off by a partition (from here the two look the same; their views shown are the last known)");
    expect(r.healthy).toBe(false);
    const text = renderGossipReport(r);
    expect(text).toContain("(last known, stale)");
    expect(text).toContain("(node3: unreachable, last known views)");
  });

  test("two stopped members whose last views saw each other alive are not called a partition", () => {
    const r = gossipReport(status([
      member("node1", "alive", { node2: "dead", node3: "dead" }, { role: "pre_candidate", leader: null }),
      member("node2", "dead", { node1: "alive", node3: "alive" }),
      member("node3", "dead", { node1: "alive", node2: "alive" }),
    ], null));
    expect(r.groups).toEqual([["node2", "node3"], ["node1"]]);
    expect(r.partitioned).toBe(false);
    expect(r.unreachable).toEqual(["node2", "node3"]);
    expect(r.problems.some((p) => p.startsWith("partition"))).toBe(false);
    expect(r.problems).toContain("node2, node3 are unreachable from {node1}: stopped, or cut off by a partition (from here the two look the same; their views shown are the last known)");
  });

  test("groups still heard from on both sides are a partition", () => {
    const r = gossipReport(status([
      member("node1", "alive", { node2: "alive", node3: "suspect" }, { role: "leader" }),
      member("node2", "alive", { node1: "alive", node3: "suspect" }),
      // Its facts still arrive (relayed), but it and the others no longer see each other.
      member("node3", "alive", { node1: "suspect", node2: "suspect" }, { leader: null, role: "pre_candidate" }),
    ]));
    expect(r.partitioned).toBe(true);
    expect(r.unreachable).toEqual([]);
    expect(r.problems).toContain("partition: {node1,node2} | {node3}");
  });

  test("a member alive by gossip that follows no leader or has no Raft link to it is called out", () => {
    const r = gossipReport(status([
      member("node1", "alive", { node2: "alive", node3: "alive" }, { role: "leader", raft_links: { node2: true, node3: false } }),
      member("node2", "alive", { node1: "alive", node3: "alive" }),
      member("node3", "alive", { node1: "alive", node2: "alive" }, { leader: null, role: "pre_candidate", raft_links: { node1: false } }),
    ]));
    expect(r.groups).toHaveLength(1);
    expect(r.problems).toEqual(["node3 is alive by gossip but cut from Raft: it knows no leader; it has no Raft link to node1; node1 has no Raft link to it"]);
  });

  test("a quiet member heard from within two probe rounds shows a current view, even when a round outlasts the suspicion timeout", () => {
    // Nine members: this node probes each once per round of eight periods, so it may hear
    // nothing from a healthy one for up to two rounds (16 s), three times the suspicion timeout.
    const ids = Array.from({ length: 9 }, (_, i) => `node${i + 1}`);
    const everyoneAlive = (self: string): Record<string, GossipState> => Object.fromEntries(ids.filter((id) => id !== self).map((id) => [id, "alive"]));
    const members = ids.map((id) => ({ ...member(id, "alive", everyoneAlive(id), id === "node1" ? { role: "leader" } : {}), facts_age_ms: 12_000, last_heard_ms_ago: 12_000 }));
    const s = status(members);
    expect(staleViewAfterMs(s.gossip as NonNullable<GossipStatusJson["gossip"]>)).toBe(16_000);
    const r = gossipReport(s);
    expect(r.views.filter((v) => v.stale)).toEqual([]);
    expect(r.healthy).toBe(true);
    expect(renderGossipReport(r)).not.toContain("stale");
  });

  test("an alive member this node has not heard from for longer than two probe rounds or a suspicion timeout shows its last known view, stale", () => {
    const quiet = (id: string, view: Record<string, GossipState>, ageMs: number, f: Partial<NonNullable<GossipMemberJson["facts"]>> = {}): GossipMemberJson => (
      { ...member(id, "alive", view, f), facts_age_ms: ageMs, last_heard_ms_ago: ageMs }
    );
    const r = gossipReport(status([
      quiet("node1", { node2: "alive", node3: "alive" }, 0, { role: "leader" }),
      quiet("node2", { node1: "alive", node3: "alive" }, 4_900),
      // Alive through the others (indirect probes), but nothing of its own reaches this node.
      quiet("node3", { node1: "alive", node2: "alive" }, 5_100),
    ]));
    expect(r.views.map((v) => [v.observer, v.stale])).toEqual([["node1", false], ["node2", false], ["node3", true]]);
    expect(renderGossipReport(r)).toMatch(/^node3 .*\(last known, stale\)$/m);
  });

  test("a node without gossip is reported, not taken as healthy", () => {
    expect(gossipReport({ ...status([]), gossip: null }).healthy).toBe(false);
  });
});
