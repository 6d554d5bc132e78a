// The node's side of gossip: the UDP service on the peer port's number (production only; the
// simulator has none), what the node tells it (Raft's members with their peer addresses, and
// its own facts, read at every gossip tick), and the tensor_chain_gossip_* metrics.
// Gossip decides who is alive; Raft's membership still decides who votes.

import { readFileSync } from "node:fs";
import type { Config } from "../config/index.ts";
import { createGossip, dropReasons, memberStates, type GossipKey, type GossipService, type GossipSnapshot, type MemberFacts } from "../gossip/index.ts";
import type { MetricsRegistry } from "../metrics/index.ts";
import { SvcError, errorMessage } from "../util/errors.ts";
import { listenFailure } from "../util/listen-failure.ts";
import type { Logger } from "../util/logger.ts";
import type { NodeContext } from "./context.ts";
import { lostLogQuorumSeen } from "./lost-log-quorum.ts";

export type { GossipSnapshot };

/**
 * Bind the gossip socket on the peer address (UDP, the port Raft uses over TCP), sealing
 * packets with `keyFor`'s key (default: derived from the cluster id). Tests may
 * name a file listing member ids (SVC_TEST_GOSSIP_BLOCK_FILE) whose packets are dropped on
 * arrival: a gossip cut that leaves Raft's TCP alone.
 */
export async function openGossip(config: Config, logger: Logger, keyFor?: (clusterId: string) => GossipKey): Promise<GossipService | null> {
  const blockFile = process.env["SVC_TEST_GOSSIP_BLOCK_FILE"];
  const log = logger.child("gossip");
  const gossip = createGossip({
    self: config.nodeId,
    listen: { host: config.listen.peer.host, port: config.listen.peer.port },
    logger: log,
    ...(keyFor === undefined ? {} : { keyFor }),
    ...(blockFile === undefined || blockFile === "" ? {} : { blocked: blockedFrom(blockFile) }),
  });
  try {
    await gossip.start();
    return gossip;
  } catch (e) {
    // Refused like a TCP port in use: without gossip the others would call this node dead, and
    // whatever holds the port would receive what they send it.
    gossip.close();
    const f = listenFailure(e, { host: config.listen.peer.host, port: config.listen.peer.port, setting: "listen.peer", udp: true });
    throw new SvcError(f.code ?? "TRANSPORT_LISTEN_FAILED", `cannot listen for gossip on UDP ${config.listen.peer.raw} (the peer port's number): ${f.reason}`, { hint: f.hint, cause: e });
  }
}

/** Feed gossip from the node and expose its counters as metrics. */
export function wireGossip(ctx: NodeContext, gossip: GossipService, registry: MetricsRegistry, version: string): void {
  gossip.setSource({
    members: () => {
      const m = ctx.core.status().membership;
      const ids = m.voters.length + m.learners.length > 0 ? [...m.voters, ...m.learners] : ctx.config.cluster.members.map((x) => x.id);
      const book = ctx.memberAddresses();
      return ids.flatMap((id) => {
        const a = book.get(id);
        return a === undefined ? [] : [{ id, peer: a.peer }];
      });
    },
    facts: () => ownFacts(ctx, version),
    stranger: (id, peer) => ctx.learnStrangerAddress(id, peer),
  });
  registerGossipMetrics(registry, gossip);
  ctx.lostLogQuorum = () => {
    // A member that lost its log may have lost the membership with it: the configuration's members stand in.
    const { membership: m, term } = ctx.core.status();
    const voters = m.voters.length > 0 ? m.voters : ctx.config.cluster.members.map((x) => x.id);
    return lostLogQuorumSeen(voters, { id: ctx.config.nodeId, lostLog: ctx.lostLog, term }, gossip.snapshot().members);
  };
}

function ownFacts(ctx: NodeContext, version: string): MemberFacts {
  const raft = ctx.core.status();
  const own = ctx.memberAddresses().get(ctx.config.nodeId);
  const raftLinks: Record<string, boolean> = {};
  for (const [id, l] of Object.entries(ctx.io.network.linkStatus())) raftLinks[id] = l.connected && l.inboundConnected;
  return {
    role: ctx.reportedRole(),
    term: raft.term,
    leader: ctx.reportedLeaderId(),
    commitIndex: raft.commit,
    appliedIndex: ctx.store.meta.appliedIndex,
    version,
    recovery: ctx.recovery,
    diskFull: ctx.diskFull !== null,
    lostLog: ctx.lostLog,
    addresses: {
      peer: own?.peer ?? ctx.config.listen.peer.raw,
      client: own?.client ?? ctx.config.listen.client.raw,
      admin: own?.admin ?? ctx.config.listen.admin.raw,
    },
    raftLinks,
    archive: archiveFacts(ctx),
  };
}

function archiveFacts(ctx: NodeContext): MemberFacts["archive"] {
  const a = ctx.walArchiver?.snapshot();
  if (a === undefined || !a.enabled) return null;
  return { archivedThrough: a.archivedThrough, lastArchivedSegment: a.lastArchivedSegment, failing: a.lastError !== null, segmentsWaiting: a.segmentsWaiting };
}

function registerGossipMetrics(r: MetricsRegistry, gossip: GossipService): void {
  const members = r.gauge("tensor_chain_gossip_members", "Members (this one included) in each gossip state as this node sees them", ["state"]);
  const counters = [
    ["probes", "tensor_chain_gossip_probes_total", "Direct probes (pings) this node started"],
    ["probesFailed", "tensor_chain_gossip_probes_failed_total", "Probes that got no ack, direct or indirect, within a protocol period"],
    ["indirectProbes", "tensor_chain_gossip_indirect_probes_total", "Indirect probe requests (ping_req) this node sent"],
    ["suspicions", "tensor_chain_gossip_suspicions_total", "Times this node came to suspect a member"],
    ["deaths", "tensor_chain_gossip_deaths_total", "Times this node came to count a member dead"],
    ["refutations", "tensor_chain_gossip_refutations_total", "Claims that this node was suspect or dead that it refuted"],
    ["packetsSent", "tensor_chain_gossip_packets_sent_total", "Gossip packets this node sent"],
    ["packetsReceived", "tensor_chain_gossip_packets_received_total", "Authenticated gossip packets this node received from members"],
  ] as const;
  const series = counters.map(([field, name, help]) => ({ field, counter: r.counter(name, help) }));
  const dropped = r.counter("tensor_chain_gossip_packets_dropped_total", "Gossip packets dropped, by reason (another cluster, bad MAC, sealed without or with a shared key when the other was expected, not decrypted by any key, malformed, too large, not a member, no cluster id yet, not sent)", ["reason"]);
  for (const reason of dropReasons) dropped.labels(reason);
  for (const state of memberStates) members.labels(state);
  r.onScrape(() => {
    const s = gossip.snapshot();
    for (const state of memberStates) members.labels(state).set(s.members.filter((m) => m.state === state).length);
    // The core's counters restart with a new core (a cluster id adopted): count only growth.
    for (const { field, counter } of series) counter.inc(Math.max(0, s.counters[field] - counter.get()));
    for (const reason of dropReasons) {
      const c = dropped.labels(reason);
      c.inc(Math.max(0, s.dropped[reason] - c.get()));
    }
  });
}

/** The member ids listed in `path` (one per line), re-read at most once a second. */
function blockedFrom(path: string): () => ReadonlySet<string> {
  let readMs = 0;
  let ids: ReadonlySet<string> = new Set();
  return () => {
    const now = Date.now();
    if (now - readMs < 1_000) return ids;
    readMs = now;
    try {
      ids = new Set(readFileSync(path, "utf8").split(/\s+/).filter((x) => x !== ""));
    } catch {
      ids = new Set();
    }
    return ids;
  };
}
