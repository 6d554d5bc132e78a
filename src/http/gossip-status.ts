// GET /admin/gossip: what this node knows through gossip — every member's state as seen here,
// what each member last reported about itself (role, term, indexes, version, recovery,
// addresses, Raft links) and its own view of the others — plus this node's Raft links. One
// node's answer is enough for cluster-status: other members' admin ports are not needed.

import type { SvcNode } from "../node/index.ts";

export function gossipStatusJson(node: SvcNode): Record<string, unknown> {
  const s = node.status();
  const g = node.gossip();
  const links: Record<string, boolean> = {};
  for (const [id, l] of Object.entries(node.peerStatus())) links[id] = l.connected && l.inboundConnected;
  const removed = node.removedProblem;
  return {
    node_id: s.nodeId,
    cluster_id: s.clusterId,
    // Removed, this node's gossip is no member's view of the cluster: cluster-status says so first.
    removed: removed !== null,
    ...(removed === null ? {} : { problem: removed }),
    leader: s.leaderId,
    voters: s.membership.voters,
    learners: s.membership.learners,
    raft_links: links,
    // Where this node's configuration file disagrees with the cluster: cluster-status says what to change.
    config_drift: node.configDrift().map((d) => ({ id: d.id, in_file: d.inFile, replicated: d.replicated })),
    // Members whose handshakes name another cluster: cluster-status names them so, not as stopped.
    of_another_cluster: node.membersOfAnotherCluster(),
    gossip: g === null ? null : {
      protocol_period_ms: g.timings.protocolPeriodMs,
      suspicion_timeout_ms: g.timings.suspicionTimeoutMs,
      members: g.members.map((m) => ({
        id: m.id,
        state: m.state,
        incarnation: m.incarnation,
        ever_alive: m.everAlive,
        state_for_ms: m.id === s.nodeId ? null : g.nowMs - m.sinceMs,
        last_heard_ms_ago: m.lastHeardMs === null ? null : g.nowMs - m.lastHeardMs,
        facts_age_ms: m.recordAtMs === null ? null : g.nowMs - m.recordAtMs,
        facts: m.record === null ? null : {
          role: m.record.facts.role,
          term: m.record.facts.term,
          leader: m.record.facts.leader,
          commit_index: m.record.facts.commitIndex,
          applied_index: m.record.facts.appliedIndex,
          version: m.record.facts.version,
          recovery: m.record.facts.recovery,
          disk_full: m.record.facts.diskFull === true,
          // The member lost log entries it held and does not vote until a leader gives them back.
          lost_log: m.record.facts.lostLog === true,
          peer: m.record.facts.addresses.peer,
          client: m.record.facts.addresses.client,
          admin: m.record.facts.addresses.admin,
          raft_links: m.record.facts.raftLinks,
          archive: m.record.facts.archive === null ? null : {
            archived_through: m.record.facts.archive.archivedThrough,
            last_archived_segment: m.record.facts.archive.lastArchivedSegment,
            failing: m.record.facts.archive.failing,
            segments_waiting: m.record.facts.archive.segmentsWaiting,
          },
        },
        view: m.record?.view ?? null,
      })),
      counters: g.counters,
      packets_dropped: g.dropped,
      // Senders whose packets name this cluster but fail authentication (a [gossip] key_file
      // that differs): the member they come from looks dead here, and this says why.
      refused_senders: g.refused.map((r) => ({ address: r.address, member: r.member, reason: r.reason, cause: r.cause, packets: r.count, last_ms_ago: g.nowMs - r.lastMs })),
    },
  };
}
