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
          ? `no leader for ${(leaderlessMs / 1000).toFixed(1)} s: ${noClusterStateText(node)}`
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

/**
 * A node that holds no cluster state: a new member, or a member whose raft/ was emptied (SPEC
 * §4.5's point-in-time restore, §4.6's full state rebuild) while the node that leads is slow or
 * down. With other members named in its file it waits for a leader among them to send it a
 * snapshot; add-node would refuse a member, and a bootstrap would make a second cluster, so
 * bootstrap = true is said only to a node whose file names no other member, and only after the
 * wait for a leader that such a node (often a member added with add-node) most likely owes.
 */
function noClusterStateText(node: SvcNode): string {
  const nodeId = node.config.nodeId;
  const addNode = `\`svc admin add-node --id ${nodeId} --peer … --client … --admin …\` (its [listen] addresses)`;
  const others = node.config.cluster.members.filter((m) => m.id !== nodeId);
  if (others.length === 0) {
    return "this node holds no cluster state, and its [cluster] members name no other node: " +
      "if it was a member of a cluster (added with add-node, or its raft/ emptied for a restore or a rebuild), it waits for that cluster's leader to send it a snapshot: " +
      `check from a member with \`svc admin cluster-status\`; a node not yet added is added there with ${addNode}; ` +
      "only to start a new cluster with this node, and only if no cluster it belongs to is running, set bootstrap = true in its [cluster] and restart it";
  }
  const names = others.map((m) => m.id).join(", ");
  const scheme = node.config.tls == null ? "http" : "https";
  return `this node holds no cluster state yet (a new member, or one whose raft/ was emptied) and waits for a leader among its [cluster] members (${names}) ` +
    `to send it a snapshot: check that they are up and reach it (\`svc admin cluster-status --node ${scheme}://${others[0]?.admin.raw}\` on one of them); ` +
    `a node not yet added is added from a member with ${addNode}`;
}
