// What /health says when a node has heard no leader: the problem names the likely cause, and
// a node that belongs to no cluster yet is not told to look for voters it does not have. One
// whose file names other members (a new member, or one whose raft/ was emptied for a restore or
// a rebuild) is not told to bootstrap: that would make a second cluster. One whose file names
// only itself, as a member added with add-node often has, hears the wait first and bootstrap last.

import { expect, test } from "bun:test";
import { adminApp } from "../../src/http/index.ts";
import type { Member } from "../../src/config/index.ts";
import type { SvcNode } from "../../src/node/index.ts";

function member(id: string, n: number): Member {
  const at = (port: number) => ({ host: `10.0.0.${n}`, port, raw: `10.0.0.${n}:${port}` });
  return { id, peer: at(7879), client: at(7878), admin: at(9090) };
}

/** node4 alone in its [cluster] members. */
const alone = [member("node4", 4)];
/** node4 and the members of the cluster it belongs to. */
const withOthers = [member("node1", 1), member("node2", 2), member("node3", 3), member("node4", 4)];

/** A node that has heard no leader for 10 s, with the given cluster id and members, and no other trouble. */
function leaderless(clusterId: string, members: readonly Member[] = alone): SvcNode {
  return {
    config: { nodeId: "node4", raft: { electionTimeoutMs: 1000 }, cluster: { bootstrap: false, members }, tls: null },
    clusterId,
    status: () => ({ recovery: clusterId === "" ? "requesting_snapshot" : "healthy", nodeId: "node4", role: "follower", leaderId: null, term: 0, commitIndex: 0, appliedIndex: 0, writesPaused: false }),
    leaderlessMs: () => 10_000,
    removedProblem: null,
    foreignMembersProblem: null,
    lostLogQuorumProblem: null,
    lostLog: false,
    diskFull: null,
    fatal: null,
  } as unknown as SvcNode;
}

async function problemOf(node: SvcNode): Promise<string> {
  const r = await adminApp(node).handle(new Request("http://localhost/health"));
  expect(r.status).toBe(503);
  return ((await r.json()) as { problem: string }).problem;
}

test("a node with no cluster state whose [cluster] members name no other node is told first that as a member it waits for a snapshot, and to bootstrap only for a new cluster when none it belongs to runs", async () => {
  const problem = await problemOf(leaderless(""));
  // Its file names only itself, as a member added with add-node often has: the wait for a
  // snapshot and where to check come before any bootstrap, which would make a second cluster.
  const wait = problem.indexOf("if it was a member of a cluster (added with add-node, or its raft/ emptied for a restore or a rebuild)");
  const snapshot = problem.indexOf("waits for that cluster's leader to send it a snapshot");
  const check = problem.indexOf("check from a member with `svc admin cluster-status`");
  const addNode = problem.indexOf("a node not yet added is added there with `svc admin add-node --id node4");
  const bootstrap = problem.indexOf("only to start a new cluster with this node, and only if no cluster it belongs to is running, set bootstrap = true");
  for (const at of [wait, snapshot, check, addNode, bootstrap]) expect(at).toBeGreaterThanOrEqual(0);
  expect(wait).toBeLessThan(snapshot);
  expect(snapshot).toBeLessThan(check);
  expect(check).toBeLessThan(addNode);
  expect(addNode).toBeLessThan(bootstrap);
  expect(problem.indexOf("bootstrap")).toBe(problem.lastIndexOf("bootstrap"));
  expect(problem).not.toContain("majority");
});

test("a node with no cluster state whose [cluster] members name others waits for a leader among them to send a snapshot, and is not told to bootstrap", async () => {
  const problem = await problemOf(leaderless("", withOthers));
  expect(problem).toContain("no cluster state yet");
  expect(problem).toContain("raft/ was emptied");
  expect(problem).toContain("node1, node2, node3");
  expect(problem).toContain("snapshot");
  expect(problem).toContain("svc admin cluster-status --node http://10.0.0.1:9090");
  expect(problem).toContain("svc admin add-node --id node4");
  expect(problem).not.toContain("bootstrap");
  expect(problem).not.toContain("majority");
});

test("a member of a cluster that hears no leader still says it reaches no majority of the voters", async () => {
  expect(await problemOf(leaderless("5fdb1f61-d623-4f32-8ff6-c003dce096b8"))).toContain("reaches no majority of the voters");
});
