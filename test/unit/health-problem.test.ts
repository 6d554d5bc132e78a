// What /health says when a node has heard no leader: the problem names the likely cause, and
// a node that belongs to no cluster yet is not told to look for voters it does not have.

import { expect, test } from "bun:test";
import { adminApp } from "../../src/http/index.ts";
import type { SvcNode } from "../../src/node/index.ts";

/** A node that has heard no leader for 10 s, with the given cluster id and no other trouble. */
function leaderless(clusterId: string): SvcNode {
  return {
    config: { nodeId: "node4", raft: { electionTimeoutMs: 1000 } },
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

test("a node that belongs to no cluster yet says it waits to be added, and how, not that it reaches no majority", async () => {
  const problem = await problemOf(leaderless(""));
  expect(problem).toContain("no cluster yet");
  expect(problem).toContain("svc admin add-node --id node4");
  expect(problem).toContain("bootstrap = true");
  expect(problem).not.toContain("majority");
});

test("a member of a cluster that hears no leader still says it reaches no majority of the voters", async () => {
  expect(await problemOf(leaderless("5fdb1f61-d623-4f32-8ff6-c003dce096b8"))).toContain("reaches no majority of the voters");
});
