// cluster-status's reading of one node's GET /admin/gossip: each member's state as every other
// member sees it, lag behind the leader's commit, partitions named as groups of members that
// see each other alive, members alive by gossip but cut from Raft, and what is unhealthy.

import { lostLogQuorum, lostLogQuorumText } from "../../node/index.ts";

export type GossipState = "alive" | "suspect" | "dead";

export interface GossipMemberJson {
  id: string;
  state: GossipState;
  incarnation: number;
  ever_alive: boolean;
  state_for_ms: number | null;
  last_heard_ms_ago: number | null;
  facts_age_ms: number | null;
  facts: {
    role: string; term: number; leader: string | null; commit_index: number; applied_index: number; version: string; recovery: string;
    /** Absent from a member of an older version. */
    disk_full?: boolean;
    /** The member lost log entries it held and does not vote until a leader gives them back (absent from a member of an older version). */
    lost_log?: boolean;
    peer: string; client: string; admin: string; raft_links: Record<string, boolean>; archive: unknown;
  } | null;
  view: Record<string, GossipState> | null;
}

/** A sender whose packets name the cluster but fail authentication at the answering node. */
export interface RefusedSenderJson {
  address: string;
  member: string | null;
  reason: string;
  cause: string;
  packets: number;
  last_ms_ago: number;
}

export interface GossipStatusJson {
  node_id: string;
  cluster_id: string;
  leader: string | null;
  voters: string[];
  learners: string[];
  /** The answering node was removed from the cluster (absent from a node of an older version). */
  removed?: boolean;
  /** What the answering node says about its removal, with what to do. */
  problem?: string;
  raft_links: Record<string, boolean>;
  /** Where the answering node's configuration file disagrees with the cluster (absent from a node of an older version). */
  config_drift?: ConfigDriftJson[];
  /** Members whose handshakes name another cluster: they answer, but hold another cluster's data (absent from a node of an older version). */
  of_another_cluster?: string[];
  gossip: {
    protocol_period_ms: number;
    suspicion_timeout_ms: number;
    members: GossipMemberJson[];
    counters: Record<string, number>;
    packets_dropped: Record<string, number>;
    /** Absent from a node of an older version. */
    refused_senders?: RefusedSenderJson[];
  } | null;
}

export interface MemberAddressJson {
  id: string;
  peer: string;
  client: string;
  admin: string;
}

/** A member the answering node's [cluster] members leaves out (in_file null) or misstates. */
export interface ConfigDriftJson {
  id: string;
  in_file: MemberAddressJson | null;
  /** What the cluster replicated for it (add-node, set-member); null: none. */
  replicated: MemberAddressJson | null;
}

export interface MemberRow {
  id: string;
  /** As the answering node sees it. */
  state: GossipState;
  role: string | null;
  term: number | null;
  leader: string | null;
  commitIndex: number | null;
  appliedIndex: number | null;
  /** The leader's commit index less this member's applied index (null: unknown). */
  lag: number | null;
  recovery: string | null;
  version: string | null;
  factsAgeMs: number | null;
}

export interface GossipReport {
  answeredBy: string;
  clusterId: string;
  leader: string | null;
  members: MemberRow[];
  /** observer → subject → state; an observer not alive here, or unconfirmed past staleViewAfterMs, is marked stale. */
  views: { observer: string; stale: boolean; view: Record<string, GossipState | "-"> }[];
  /** Groups of members that see each other alive (the unreachable ones by their last views). */
  groups: string[][];
  /**
   * Members in no group with a current view: the answering node hears nothing of them, directly
   * or through others. Stopped, or on the far side of a partition: from here the two look the same.
   */
  unreachable: string[];
  /** More than one group is still heard from: a partition seen from both sides. */
  partitioned: boolean;
  /** The answering node was removed from the cluster: its picture is no member's. */
  removed: boolean;
  problems: string[];
  /** Not wrong now, but to be put right: they do not make the cluster unhealthy. */
  warnings: string[];
  healthy: boolean;
}

/** Pure: every figure cluster-status prints, from one node's answer. */
export function gossipReport(s: GossipStatusJson): GossipReport {
  const problems: string[] = [];
  const g = s.gossip;
  const removed = s.removed === true;
  // A removed node hears from no member as one of them: the partitions and suspicions its
  // gossip would show are its removal, seen from outside; that is the one problem to name.
  const removedProblem = s.problem ?? `this node (${s.node_id}) was removed from the cluster`;
  const drift = configDriftLines(s);
  if (g === null) {
    return {
      answeredBy: s.node_id, clusterId: s.cluster_id, leader: s.leader, members: [], views: [], groups: [], unreachable: [], partitioned: false, removed,
      problems: [removed ? removedProblem : `${s.node_id} runs no gossip`], warnings: removed ? [] : drift.warnings, healthy: false,
    };
  }
  const ids = g.members.map((m) => m.id).sort();
  const byId = new Map(g.members.map((m) => [m.id, m]));
  const staleAfterMs = staleViewAfterMs(g);
  const stale = (m: GossipMemberJson): boolean => m.id !== s.node_id && (m.state !== "alive" || m.facts_age_ms === null || m.facts_age_ms > staleAfterMs);

  const leader = s.leader ?? mostNamedLeader(g.members);
  const leaderCommit = leader === null ? null : (byId.get(leader)?.facts?.commit_index ?? null);
  const members: MemberRow[] = ids.map((id) => {
    const m = byId.get(id) as GossipMemberJson;
    const f = m.facts;
    return {
      // A learner says so in its facts; one of an older version reports its core's role (follower): the membership says what it is.
      id, state: m.state, role: f?.role === "follower" && s.learners.includes(id) ? "learner" : f?.role ?? null, term: f?.term ?? null, leader: f?.leader ?? null,
      commitIndex: f?.commit_index ?? null, appliedIndex: f?.applied_index ?? null,
      lag: leaderCommit === null || f === null ? null : Math.max(0, leaderCommit - f.applied_index),
      recovery: f?.recovery ?? null, version: f?.version ?? null, factsAgeMs: m.facts_age_ms,
    };
  });

  const views = ids.map((observer) => {
    const m = byId.get(observer) as GossipMemberJson;
    const view: Record<string, GossipState | "-"> = {};
    for (const subject of ids) view[subject] = subject === observer ? "alive" : (m.view?.[subject] ?? "-");
    return { observer, stale: stale(m), view };
  });

  // Two members are together when each sees the other alive (the answering node's own view
  // included); groups are the connected parts.
  const sees = (a: string, b: string): boolean => views.find((v) => v.observer === a)?.view[b] === "alive";
  const parent = new Map(ids.map((id) => [id, id]));
  const root = (x: string): string => {
    let r = x;
    while (parent.get(r) !== r) r = parent.get(r) as string;
    return r;
  };
  for (const a of ids) for (const b of ids) if (a < b && sees(a, b) && sees(b, a)) parent.set(root(a), root(b));
  const groupMap = new Map<string, string[]>();
  for (const id of ids) groupMap.set(root(id), [...(groupMap.get(root(id)) ?? []), id]);
  const groups = [...groupMap.values()].sort((x, y) => y.length - x.length || (x[0] as string).localeCompare(y[0] as string));

  // Refusals as recent as a current view: a member whose key differs is heard, and refused.
  const refused = (g.refused_senders ?? []).filter((r) => r.last_ms_ago <= staleAfterMs);
  const keyHint = "give every member the same [gossip] key_file (during a rotation, every key listed on every member), or none on any";
  // A member of the Raft configuration that gossip here has not heard of (the node just joined,
  // say): its state is unknown, which is not healthy.
  const inGossip = new Set(g.members.map((m) => m.id));
  for (const id of [...s.voters, ...s.learners]) {
    if (!inGossip.has(id)) problems.push(`${id} is a member of the cluster, but ${s.node_id}'s gossip has not heard of it yet (it just started or joined?): its state is unknown`);
  }
  const otherCluster = new Set(s.of_another_cluster ?? []);
  for (const id of otherCluster) {
    problems.push(`${id} answers as a member of another cluster: it holds another cluster's data (restored from another cluster's backup, or made anew by ` +
      `init-cluster --bootstrap), and ${s.node_id} refuses its connections; \`svc admin cluster-info\` on it names its cluster. Restore it as the other members were, ` +
      "or stop it, remove the contents of its raft/ and store/ and its <data_dir>/MEMBER, and start it: it is rebuilt from the leader");
  }
  for (const m of g.members) {
    if (m.id === s.node_id || otherCluster.has(m.id)) continue;
    if (m.state === "alive") continue;
    const seen = `${m.id} is ${m.state} as seen by ${s.node_id}${m.state_for_ms === null ? "" : ` (for ${Math.round(m.state_for_ms / 1000)} s)`}`;
    const its = refused.find((r) => r.member === m.id);
    problems.push(its === undefined ? seen : `${seen}: its gossip packets reach ${s.node_id} but fail authentication (${its.cause}); ${keyHint}`);
  }
  // A sender that is no member's peer address: a member behind another address (NAT, a second
  // interface), or a stray (the cluster id its packets need is in clear). Worth a look; nothing
  // of the cluster depends on it.
  const strays = refused.filter((r) => r.member === null).map((r) =>
    `gossip packets from ${r.address}, not a member's peer address, reach ${s.node_id} but fail authentication (${r.cause}); if it is a member, ${keyHint}`);
  for (const v of views) {
    if (v.stale) continue;
    for (const [subject, state] of Object.entries(v.view)) {
      if (state !== "alive" && v.observer !== s.node_id && byId.get(subject)?.state === "alive") problems.push(`${v.observer} sees ${subject} ${state}`);
    }
  }
  // A group counts as heard from when one of its members' views is current.
  const current = new Set(views.filter((v) => !v.stale).map((v) => v.observer));
  const heard = groups.filter((grp) => grp.some((id) => current.has(id)));
  const unreachable = groups.filter((grp) => !grp.some((id) => current.has(id))).flat().filter((id) => !otherCluster.has(id)).sort();
  const partitioned = heard.length > 1;
  if (partitioned) problems.push(`partition: ${formatGroups(groups)}`);
  else if (unreachable.length > 0) {
    problems.push(`${unreachable.join(", ")} ${unreachable.length === 1 ? "is" : "are"} unreachable from ${formatGroups(heard)}: stopped, or cut off by a partition ` +
      "(from here the two look the same; their views shown are the last known)");
  }
  // Members that lost their log hear no election (they do not tick) and may still name the
  // leader they last heard, which itself says it no longer leads: no leader is known then.
  const namedLeader = leader === null ? undefined : byId.get(leader);
  // Facts gossiped before it won its election (a follower of the term before, a candidate of its
  // own term) say nothing of whether it still leads: only those of a later term, or of the term
  // in which the members name it as a follower or pre-candidate (it stepped down), do.
  const namedInTerm = Math.max(0, ...g.members.filter((m) => m.facts !== null && m.facts.leader === leader).map((m) => m.facts?.term ?? 0));
  const nf = namedLeader?.state === "alive" ? namedLeader.facts : null;
  const namedStepsDown = nf !== null && nf !== undefined && nf.role !== "leader" &&
    (nf.term > namedInTerm || (nf.term === namedInTerm && nf.role !== "candidate"));
  // Too many voters lost their log to elect a leader: the one problem that explains the others.
  // A member that lost its log may have lost the membership too: every member gossip knows stands in.
  const lostQuorum = leader === null || namedStepsDown || namedLeader?.state !== "alive"
    ? lostLogQuorum(s.voters.length > 0 ? s.voters : ids, (id) => byId.get(id)?.state === "alive" && byId.get(id)?.facts?.lost_log === true)
    : null;
  if (lostQuorum !== null) problems.push(lostLogQuorumText(lostQuorum));
  else if (leader === null) problems.push("no leader is known");
  else if (namedStepsDown) problems.push(`no leader is known: ${leader}, named as leader by members that last heard from it, is ${namedLeader?.facts?.role} itself`);
  else {
    const lf = byId.get(leader)?.facts;
    for (const m of g.members) {
      if (m.id === leader || m.state !== "alive" || m.facts === null) continue;
      const why: string[] = [];
      if (m.facts.leader !== leader) why.push(m.facts.leader === null ? "it knows no leader" : `it follows ${m.facts.leader}`);
      if (m.facts.raft_links[leader] === false) why.push(`it has no Raft link to ${leader}`);
      if (lf?.raft_links[m.id] === false) why.push(`${leader} has no Raft link to it`);
      if (why.length > 0) problems.push(`${m.id} is alive by gossip but cut from Raft: ${why.join("; ")}`);
    }
  }
  for (const m of g.members) {
    if (m.state === "alive" && m.facts !== null && m.facts.recovery !== "healthy") {
      problems.push(m.facts.lost_log === true ? `${m.id} is ${m.facts.recovery}: it lost log entries it held and does not vote until a leader gives them back` : `${m.id} is ${m.facts.recovery}`);
    }
    if (m.state === "alive" && m.facts?.disk_full === true) {
      problems.push(`${m.id}'s disk is full: it takes no entries (writes are refused once a majority of the voters cannot persist); free space on its data directory`);
    }
  }
  const named = removed ? [removedProblem] : [...drift.problems, ...problems];
  const warnings = removed ? [] : [...drift.warnings, ...strays];
  return { answeredBy: s.node_id, clusterId: s.cluster_id, leader, members, views, groups, unreachable, partitioned, removed, problems: named, warnings, healthy: named.length === 0 };
}

/**
 * The answering node's file against the cluster. A member whose addresses it knows neither way
 * is a problem: it cannot reach it, and refuses its connections. One the file leaves out or
 * misstates, but whose addresses the cluster replicated, is reached: a warning, since the file
 * is still what a node started on an empty data directory, and init-cluster --bootstrap, know.
 */
function configDriftLines(s: GossipStatusJson): { problems: string[]; warnings: string[] } {
  const problems: string[] = [];
  const warnings: string[] = [];
  const file = `${s.node_id}'s configuration file`;
  const why = "a node started on an empty data directory, and init-cluster --bootstrap, know only the file";
  for (const d of s.config_drift ?? []) {
    if (d.replicated === null) {
      problems.push(`${d.id} is a member of the cluster, but ${file} does not list it in [cluster] members and no addresses were replicated for it: ` +
        `${s.node_id} cannot reach it and refuses its connections; add ${d.id}'s entry (as the other members' files have it) to [cluster] members there and restart ${s.node_id}`);
    } else if (d.in_file === null) {
      warnings.push(`${d.id} is a member of the cluster, but ${file} does not list it in [cluster] members (the addresses the cluster replicated are used): ` +
        `add ${memberEntryToml(d.replicated)} to members there (${why})`);
    } else {
      warnings.push(`${file} gives ${d.id} other addresses in [cluster] members than the cluster replicated (set-member; the cluster's are used): ` +
        `change ${memberEntryToml(d.in_file)} to ${memberEntryToml(d.replicated)} there (${why})`);
    }
  }
  return { problems, warnings };
}

function memberEntryToml(m: MemberAddressJson): string {
  return `{ id = ${JSON.stringify(m.id)}, peer = ${JSON.stringify(m.peer)}, client = ${JSON.stringify(m.client)}, admin = ${JSON.stringify(m.admin)} }`;
}

/**
 * How long a member's view stays current after its facts were last confirmed (facts_age_ms:
 * every packet the member sends carries them, changed or not). The answering node probes each
 * member once per round of n − 1 protocol periods, in a new order each round, so a healthy
 * member may go unheard for up to two rounds; past that (and at least a suspicion timeout),
 * nothing from it reaches this node and its view is only the last known.
 */
export function staleViewAfterMs(g: NonNullable<GossipStatusJson["gossip"]>): number {
  const roundPeriods = Math.max(0, g.members.length - 1);
  return Math.max(g.suspicion_timeout_ms, 2 * roundPeriods * g.protocol_period_ms);
}

/** "{node1,node2} | {node3}". */
export function formatGroups(groups: readonly (readonly string[])[]): string {
  return groups.map((g) => `{${g.join(",")}}`).join(" | ");
}

function mostNamedLeader(members: GossipMemberJson[]): string | null {
  const votes = new Map<string, number>();
  for (const m of members) if (m.state === "alive" && m.facts?.leader != null) votes.set(m.facts.leader, (votes.get(m.facts.leader) ?? 0) + 1);
  let best: string | null = null;
  for (const [id, n] of votes) if (best === null || n > (votes.get(best) ?? 0)) best = id;
  return best;
}

/** What `cluster-status --json` prints of a report (the support bundle holds the same). */
export function gossipReportJson(report: GossipReport): Record<string, unknown> {
  return {
    cluster_id: report.clusterId, answered_by: report.answeredBy, leader: report.leader, members: report.members, views: report.views,
    groups: report.groups, partitioned: report.partitioned, unreachable: report.unreachable, removed: report.removed, problems: report.problems, warnings: report.warnings, healthy: report.healthy,
  };
}

/** The text cluster-status prints. */
export function renderGossipReport(r: GossipReport): string {
  const col = (v: unknown, w: number): string => String(v ?? "-").padEnd(w);
  let out = `cluster ${r.clusterId}, as seen by ${r.answeredBy} (gossip)\n`;
  out += `${col("member", 12)}${col("state", 9)}${col("role", 14)}${col("term", 7)}${col("commit", 10)}${col("applied", 10)}${col("lag", 8)}${col("recovery", 26)}version\n`;
  for (const m of r.members) {
    out += `${col(m.id, 12)}${col(m.state, 9)}${col(m.role, 14)}${col(m.term, 7)}${col(m.commitIndex, 10)}${col(m.appliedIndex, 10)}${col(m.lag, 8)}${col(m.recovery, 26)}${m.version ?? "-"}\n`;
  }
  if (r.views.length > 0) {
    const ids = r.views.map((v) => v.observer);
    out += `\nviews (row: observer, column: member)\n${col("", 12)}${ids.map((id) => col(id, 10)).join("")}\n`;
    for (const v of r.views) out += `${col(v.observer, 12)}${ids.map((id) => col(v.view[id], 10)).join("")}${v.stale ? "(last known, stale)" : ""}\n`;
  }
  const groupsNote = r.partitioned ? "" : r.unreachable.length > 0 ? ` (${r.unreachable.join(", ")}: unreachable, last known views)` : " (no partition)";
  out += `\ngroups: ${formatGroups(r.groups)}${groupsNote}\n`;
  out += r.healthy ? "healthy: one leader, every member alive and following it\n" : r.problems.map((p) => `PROBLEM: ${p}\n`).join("");
  out += r.warnings.map((w) => `WARNING: ${w}\n`).join("");
  return out;
}
