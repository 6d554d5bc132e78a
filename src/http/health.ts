// GET /health on both ports: 200 while the node serves, 503 with the recovery state
// (or the problem: no leader) otherwise, so a load balancer and an operator read the same answer. A node whose disk is
// full still serves reads, so it stays 200, with "status": "degraded" and "disk": "full"
// (its writes get 507 DISK_FULL): a load balancer keeps sending it reads, a monitor sees it.

import type { SvcNode } from "../node/index.ts";
import { SvcError } from "../util/errors.ts";
import { errorResponse, json } from "./errors.ts";

/**
 * Any request while the node starts (before its state is loaded): /health says so in its own
 * shape; every other request gets an error a client can act on (a code, a hint, Retry-After).
 */
export function startingResponse(request: Request): Response {
  if (new URL(request.url).pathname === "/health") return json({ status: "unavailable", recovery: "starting" }, 503);
  return errorResponse(new SvcError("RECOVERING", "this node is starting (recovery: starting): it loads its state before it serves requests; nothing was done", {
    hint: "retry shortly, or send the request to another member",
  }));
}

export function healthResponse(node: SvcNode): Response {
  const s = node.status();
  // A node that has known no leader for two election timeouts reaches no majority of the
  // voters (they are down, or it is cut off from them): it answers no write and no
  // linearizable read, so a load balancer should send it nothing. An election is shorter.
  const leaderlessMs = node.leaderlessMs();
  const noLeader = leaderlessMs > 2 * node.config.raft.electionTimeoutMs;
  const removed = node.removedProblem ?? node.foreignMembersProblem;
  const healthy = s.recovery === "healthy" && node.fatal === null && !noLeader && removed === null;
  // Too many voters lost their log for any election to succeed: waiting changes nothing, and
  // every member, the one that kept its log too, says what the operator must do.
  const lostLogQuorum = noLeader ? node.lostLogQuorumProblem : null;
  const problem = removed !== null
    ? removed
    : lostLogQuorum !== null
      ? `no leader for ${(leaderlessMs / 1000).toFixed(1)} s: ${lostLogQuorum}`
      : noLeader && node.lostLog
        ? `no leader for ${(leaderlessMs / 1000).toFixed(1)} s: this node lost log entries and does not vote until a leader gives them back; ` +
          "check that a majority of the other voters is up and reaches it (`svc admin cluster-status`). Only if every member was restored from the same snapshot " +
          "copied by hand (no raft/RESTORED) can none of them lead: then stop them all, run `svc admin init-cluster --bootstrap` on each, and start them"
        : noLeader && node.clusterId === ""
          // No cluster has taken it in (a new member, or one whose first start waits): it has no
          // voters to reach, and waits for a leader to add it.
          ? `no leader for ${(leaderlessMs / 1000).toFixed(1)} s: this node belongs to no cluster yet and waits for a leader to take it in: ` +
            `add it from a member with \`svc admin add-node --id ${s.nodeId} --peer … --client … --admin …\` (its [listen] addresses), ` +
            "check that the members in its [cluster] members are up and reach it, or, to start a new cluster, start one node with bootstrap = true"
          : noLeader
            ? `no leader for ${(leaderlessMs / 1000).toFixed(1)} s: this node reaches no majority of the voters (check the others with \`svc admin cluster-status\`)`
            : null;
  const diskFull = node.diskFull;
  return json(
    {
      status: !healthy ? "unavailable" : diskFull !== null ? "degraded" : "ok",
      ...(problem === null ? {} : { problem }),
      disk: diskFull === null ? "ok" : "full",
      ...(diskFull === null ? {} : { disk_bytes_free: diskFull.bytesFree, disk_path: diskFull.path }),
      recovery: s.recovery,
      node_id: s.nodeId,
      role: s.role,
      leader: s.leaderId,
      term: s.term,
      commit_index: s.commitIndex,
      applied_index: s.appliedIndex,
      writes_paused: s.writesPaused,
      ...(node.fatal === null ? {} : { error: node.fatal.message }),
    },
    healthy ? 200 : 503,
  );
}
