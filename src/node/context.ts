// What the parts of a node share: its configuration, the Raft core, the io it runs on (clock,
// log store, state machine and snapshots, peer network), the recovery state, and the few
// facts every part reads (cluster id, lost-log gate, fatal error). Parts change these only
// through the methods here, so each rule is stated once.

import type { Config } from "../config/index.ts";
import type { Clock, LogStore, PeerNetwork, RemovedRecord, SnapshotStore } from "../io/index.ts";
import type { GossipService } from "../gossip/index.ts";
import type { LostLogQuorum } from "./lost-log-quorum.ts";
import type { Entry, Membership, NodeId, RaftCore, Role } from "../raft/index.ts";
import { majority } from "../raft/index.ts";
import type { MemberAddress, Store } from "../store/index.ts";
import { assert } from "../util/assert.ts";
import { SvcError, errorMessage } from "../util/errors.ts";
import { silentLogger, type Logger } from "../util/logger.ts";
import type { StoredHardState } from "../storage/index.ts";
import type { MetricsRegistry } from "../metrics/index.ts";
import type { NodeMetrics } from "./metrics.ts";
import type { SnapshotTransfer, SnapshotTransferHooks, TransferMetrics } from "./snapshot-transfer.ts";
import type { DataPaths } from "../storage/index.ts";
import { nextRecoveryState, recoveryAccepts, type RecoveryEvent, type RecoveryState } from "./recovery.ts";
import type { ThreadPriority } from "./catch-up-priority.ts";
import { ApplyWaiters } from "./waiters.ts";
import { configDrift, memberEntryToml, type ConfigDrift } from "./config-drift.ts";
import type { WalArchiveIo, WalArchivePart } from "./wal-archive-types.ts";

/** The io a node runs on: production (start.ts) or the simulator's twins. */
export interface NodeIo {
  readonly clock: Clock;
  readonly log: LogStore<Entry>;
  readonly snapshots: SnapshotStore<Membership, Store>;
  readonly network: PeerNetwork;
  /** Ask the runtime to collect garbage (`full`: synchronously, everything). */
  readonly collectGarbage: (full: boolean) => void;
  /**
   * The free space of the file system holding the data directory (production: statfs);
   * absent where there is no disk (the simulator), which then only learns of a full disk
   * from a write that fails for want of space.
   */
  readonly diskSpace?: { readonly path: string; readonly freeBytes: () => number | null };
  /**
   * The main thread's CPU priority, lowered while this node catches up far behind its leader
   * (catch-up-priority.ts); absent in the simulator, whose nodes share one process.
   */
  readonly threadPriority?: ThreadPriority;
  /** Where archive_command runs (production, when wal.archive_command is set); absent: no archiving. */
  readonly walArchive?: WalArchiveIo;
}

/**
 * Free space under which the node counts its disk as full and refuses new writes: a new WAL
 * segment (written in full when made) plus room for the writes already admitted to reach
 * the store. Refusing before the disk is really full keeps the node able to lead, answer
 * linearizable reads and apply what it committed.
 */
export function diskReserveBytes(segmentSizeBytes: number): number {
  return segmentSizeBytes + 4 * 1024 * 1024;
}

/** Why the node counts its disk as full: the free space fell under the reserve, or a write failed. */
export interface DiskFullState {
  readonly path: string;
  readonly bytesFree: number | null;
  readonly cause: "below_reserve" | "write_failed";
}

/** Everything a node is built from (production: start.ts; the simulator: its twins). */
export interface NodeParts {
  readonly config: Config;
  readonly logger: Logger;
  readonly io: NodeIo;
  readonly core: RaftCore;
  /** The core's logger (tensor_chain::raft): the node traces the messages it sends and receives there. Absent: none. */
  readonly raftLogger?: Logger;
  readonly store: Store;
  readonly hardState: StoredHardState;
  readonly clusterId: string;
  readonly lostLog: boolean;
  /** What raft/REMOVED held at start (already handed to the core as RaftState.removal); absent: nothing. */
  readonly removedMark?: RemovedRecord | null;
  /**
   * Whether a peer, by the cluster id of its handshake, belongs to another cluster than the one
   * <data_dir>/MEMBER says this node was rebuilt from (node/start.ts). Absent: never.
   */
  readonly ofAnotherCluster?: (peerId: string) => boolean;
  /** Peers whose handshakes lately said they are of another cluster than this node's (the transport's); absent: none known. */
  readonly peersOfAnotherCluster?: () => string[];
  /** The cluster <data_dir>/MEMBER names (this node was a member of it); absent or null: none. */
  readonly memberOf?: string | null;
  /** The index raft/checkpoint vouches the store durable to (0: none). */
  readonly checkpointIndex: number;
  /** Override of when an image is due (the WAL kept since the newest image, in bytes, at least); tests use a small one. */
  readonly imageLogBytesMin?: number;
  readonly makeTransfer: (hooks: SnapshotTransferHooks, metrics: TransferMetrics) => SnapshotTransfer;
  /** Releases what the node holds outside its io (the data directory's lock). */
  readonly release: () => void;
  /** What verify-checksums checks on a running node; absent for an in-memory node. */
  readonly verifyTarget?: { readonly paths: DataPaths };
  /** Gossip membership over UDP (production); absent in the simulator. */
  readonly gossip?: GossipService;
  /** Adds the io's own series to the node's metrics (production: the peer transport's). */
  readonly registerMetrics?: (registry: MetricsRegistry) => void;
}

/** How often, at most, a write's admission asks the file system for its free space. */
const admissionSpaceCheckMs = 20;

/** The role a node reports about itself (NodeContext.reportedRole). */
export type ReportedRole = Role | "learner" | "removed";

/** tensor_chain_role's value for each role a node reports. */
export const roleCodes: readonly ReportedRole[] = ["follower", "pre_candidate", "candidate", "leader", "learner", "removed"];

/** What to do about a node removed from the cluster, wherever that is said. */
const removedWayOut = "stop it (its data is no longer replicated); to add it back, empty its data directory, start it, and run `svc admin add-node` on a member";

/** Nodes whose peer address gossip told (learnStrangerAddress), at most. */
const strangersMax = 16;
/** host:port as a member gives it: a host name or IPv4 address, or an IPv6 one in brackets. */
const peerAddressShape = /^(\[[0-9A-Fa-f:.%\w-]{2,64}\]|[A-Za-z0-9._-]{1,253}):(\d{1,5})$/;

export class NodeContext {
  recovery: RecoveryState = "starting";
  /** The state machine; replaced when a snapshot is installed. */
  store: Store;
  persistedHardState: StoredHardState;
  clusterId: string;
  /**
   * Set when the node lost log entries it held (a cleared WAL): it cannot know how far its
   * log went, so it neither votes nor campaigns (either could elect a leader without writes
   * it had acknowledged) until a leader elected by the others has confirmed, by a ReadIndex
   * round, that this node applied everything committed.
   */
  lostLog = false;
  /** See NodeParts.ofAnotherCluster. */
  ofAnotherCluster: (peerId: string) => boolean = () => false;
  /** See NodeParts.peersOfAnotherCluster. */
  peersOfAnotherCluster: () => string[] = () => [];
  /** See NodeParts.memberOf. */
  memberOf: string | null = null;
  /** The highest commit index a leader has told this node. */
  leaderCommitSeen = 0;
  /** Index of the newest snapshot this node holds (0: none). */
  snapshotIndex: number;
  fatalError: SvcError | null = null;
  /**
   * Set while the disk under the data directory is full. The node refuses new writes
   * (DISK_FULL), goes on serving reads, does not campaign while it has peers that may lead,
   * and clears this by itself once space is freed (loop.ts checks every second).
   */
  diskFull: DiskFullState | null = null;
  /**
   * Set while another process tries a write on the store (write-gate.ts): the store then
   * commits every batch, so that its open transaction never holds the write lock the check needs.
   */
  storeCommitsEager = false;
  /** When this node last knew a leader (monotonic ms; the start counts): see leaderlessMs(). */
  leaderSeenAtMs: number;
  /** When a message from the leader this node follows last arrived (monotonic ms; the start counts). */
  leaderHeardAtMs: number;
  stopped = false;
  readonly waiters = new ApplyWaiters();
  /** Called once when the node hits an unrecoverable error (serve.ts exits the process). */
  onFatal: ((e: SvcError) => void) | null = null;
  /** Failing pending reads too is the read barrier's job; it registers here. */
  readonly failHooks: ((e: SvcError) => void)[] = [];
  /**
   * The voters that lost their log, when they leave too few to elect a leader (see
   * lost-log-quorum.ts); null otherwise, or when this node cannot tell (no gossip).
   */
  lostLogQuorum: () => LostLogQuorum | null = () => null;
  /** Archives the WAL while this node leads (set by the loop when the io can archive). */
  walArchiver: WalArchivePart | null = null;
  /** What raft/REMOVED holds (see syncRemoval). */
  removedMark: RemovedRecord | null = null;
  /** raft/REMOVED could not be written lately (said once until it can). */
  private removalWriteFailing = false;
  /** Whether this run said, at error level, that a member told it it was removed. */
  private removalTold = false;

  constructor(
    readonly config: Config,
    readonly logger: Logger,
    readonly io: NodeIo,
    readonly core: RaftCore,
    readonly metrics: NodeMetrics,
    store: Store,
    hardState: StoredHardState,
    clusterId: string,
    /** Where messages to and from peers are traced (tensor_chain::raft, as the core's own lines). */
    readonly raftLogger: Logger = silentLogger,
  ) {
    this.store = store;
    this.persistedHardState = hardState;
    this.clusterId = clusterId;
    // A node that belongs to no cluster yet does not campaign (RaftCore.holdCampaigns).
    core.holdCampaigns(clusterId === "");
    this.snapshotIndex = io.snapshots.latest()?.index ?? 0;
    this.leaderSeenAtMs = io.clock.monotonicMs();
    this.leaderHeardAtMs = this.leaderSeenAtMs;
  }

  get clock(): Clock {
    return this.io.clock;
  }

  /**
   * How long this node has been without a leader it hears from: one it knows of and has heard
   * from lately counts, a leader counts for itself (it steps down when it loses its majority).
   * A node that does not campaign (a learner, a member that lost its log or whose disk is full)
   * keeps naming a leader it no longer hears: then the time since it last heard from it.
   */
  leaderlessMs(): number {
    const now = this.clock.monotonicMs();
    const status = this.core.status();
    if (status.leaderId === null) return now - this.leaderSeenAtMs;
    this.leaderSeenAtMs = now;
    if (status.role === "leader") return 0;
    return now - this.leaderHeardAtMs;
  }

  /**
   * No leader heard from for two election timeouts, longer than an election takes: none is
   * about to be, from where this node stands (/health says so).
   */
  leaderGone(): boolean {
    return this.leaderlessMs() > 2 * this.config.raft.electionTimeoutMs;
  }

  /**
   * The leader this node reports (/health, cluster-info, stats, gossip): the core's, but none
   * while it has not heard from it for two election timeouts, longer than an election takes.
   * A member that does not campaign (one that lost its log, a learner, one whose disk is full)
   * keeps naming the leader it last heard from, which may have stopped leading long since:
   * operators would read that as a leader there is. A leader names itself (leaderlessMs is 0),
   * and a follower hears its leader every heartbeat interval. The node's own decisions (where a
   * write or a read is forwarded, votes) read the core's leader.
   */
  reportedLeaderId(): NodeId | null {
    return this.leaderGone() ? null : this.core.status().leaderId;
  }

  /**
   * How far the WAL may be trimmed behind an image at `index`: that far, but while archiving
   * is on never past what the cluster has archived (a later leader may need the entries).
   */
  walRemovableThrough(index: number): number {
    return this.io.walArchive === undefined ? index : Math.min(index, this.store.meta.archivedThrough);
  }

  /**
   * The role this node reports about itself (/health, cluster-info, stats, gossip): the core's,
   * except that a learner's core runs as a follower (it takes entries, never campaigns) and
   * the membership says what it is; and a removed node says so, whatever its core runs as.
   * Decisions read the core's role, never this.
   */
  reportedRole(): ReportedRole {
    if (this.removed) return "removed";
    const status = this.core.status();
    return status.role === "follower" && status.membership.learners.includes(this.config.nodeId) ? "learner" : status.role;
  }

  /** Move the recovery flow; an event with no edge from the current state is a bug. */
  transition(event: RecoveryEvent): void {
    const next = nextRecoveryState(this.recovery, event);
    assert(next !== null, `recovery: no transition from ${this.recovery} on ${event}`);
    if (next === this.recovery) return;
    this.logger.info(`recovery: ${this.recovery} -> ${next}`, { event });
    this.metrics.recoveryTransitions.labels(this.recovery, next).inc();
    this.recovery = next;
  }

  /** The same, for an event that only matters in some states (ignored in the others). */
  transitionIfAllowed(event: RecoveryEvent): void {
    if (recoveryAccepts(this.recovery, event)) this.transition(event);
  }

  /** Throws, changing nothing, when the hard state cannot be saved (a full disk). */
  adoptClusterId(clusterId: string): void {
    const next = { ...this.persistedHardState, clusterId };
    this.io.log.saveHardState(next);
    this.clusterId = clusterId;
    this.io.network.setClusterId(clusterId);
    this.persistedHardState = next;
    this.core.holdCampaigns(false);
    if (this.store.meta.clusterId === "") this.store.setClusterId(clusterId);
    this.logger.info("joined cluster", { clusterId });
  }

  /** Every member's addresses: the configuration file's, then those replicated at run time. */
  memberAddresses(): Map<string, MemberAddress> {
    const book = new Map<string, MemberAddress>();
    for (const m of this.config.cluster.members) book.set(m.id, { id: m.id, peer: m.peer.raw, client: m.client.raw, admin: m.admin.raw });
    for (const m of this.store.memberAddresses()) book.set(m.id, m);
    return book;
  }

  /**
   * Peer addresses of nodes neither the configuration file nor the replicated state names, as
   * they gave them in authenticated gossip: a member added while this node was cut off. Without
   * it, that member leading would be refused at the handshake and never answered, and this node
   * could not catch up (the entries that carry the address come from it). Peers only, dialled
   * on demand (see refreshPeers); never Raft members, which only the log makes. Bounded.
   */
  private readonly strangers = new Map<string, string>();

  learnStrangerAddress(id: string, peer: string): void {
    if (this.strangers.get(id) === peer || this.memberAddresses().has(id)) return;
    if (!this.strangers.has(id) && this.strangers.size >= strangersMax) return;
    const m = peerAddressShape.exec(peer);
    const port = Number(m?.[2] ?? 0);
    if (m === null || port < 1 || port > 65_535) return;
    this.strangers.set(id, peer);
    this.logger.info(`learned the peer address of ${id} from gossip (no member of this node's configuration or log yet: added while this node was cut off?); its connections are accepted and answered`, { peer: id, address: peer });
    this.refreshPeers();
  }

  /**
   * Every address known is a peer, heard and answered; only members are dialled ahead of need.
   * The others (a removed member the configuration file still lists, or a member added by a
   * change this node has not seen yet) are dialled only while something is to be sent to them:
   * a removed member is not dialled for ever, and a new leader this node does not know as a
   * member yet still gets its answers.
   */
  refreshPeers(): void {
    const peers: Record<string, string> = {};
    for (const [id, peer] of this.strangers) if (id !== this.config.nodeId) peers[id] = peer;
    for (const [id, m] of this.memberAddresses()) {
      if (id === this.config.nodeId) continue;
      peers[id] = m.peer;
      this.strangers.delete(id);
    }
    const membership = this.core.currentMembership();
    const members = new Set([...membership.voters, ...membership.learners]);
    // With no membership yet (a node waiting to join), every member the configuration names is dialled.
    const onDemand = new Set(membership.voters.length === 0 ? [] : Object.keys(peers).filter((id) => !members.has(id)));
    this.io.network.setPeers(peers, { onDemand });
    this.tellConfigDrift();
    this.tellRemoved();
  }

  /** The disagreements between the configuration file and the cluster when they were last said ("": none). */
  private configDriftTold = "";

  /** Where this node's [cluster] members disagrees with the cluster's membership and replicated addresses. */
  configDrift(): ConfigDrift[] {
    return configDrift(this.config.nodeId, this.config.cluster.members, this.core.status().membership, this.store.memberAddresses());
  }

  /**
   * Say, once per change, where the configuration file disagrees with the cluster, with the
   * fix. A member whose address this node does not know at all (left out of cluster.members,
   * and not added at run time) can be neither dialled nor accepted: otherwise the node only
   * looks cut off from it. One the file leaves out or misstates but the cluster replicated
   * works while the node runs; the file is still wrong for a start on an empty data directory
   * and for init-cluster --bootstrap.
   */
  private tellConfigDrift(): void {
    const drift = this.configDrift();
    const key = JSON.stringify(drift);
    if (key === this.configDriftTold) return;
    this.configDriftTold = key;
    const unknown = drift.filter((d) => d.inFile === null && d.replicated === null).map((d) => d.id);
    const foreign = this.foreignMembers;
    if (foreign !== null) {
      this.logger.error(foreignMembersText(this.config.nodeId, foreign), { members: foreign, hint: foreignMembersWayOut });
    } else if (unknown.length > 0) {
      this.logger.warn(`${unknown.join(", ")} ${unknown.length === 1 ? "is a member" : "are members"} of the cluster, but not in this node's [cluster] members: ` +
        "this node cannot reach them and refuses their connections", {
        members: unknown,
        hint: "add them to members in this node's configuration file (the same list on every node), then restart it",
      });
    }
    for (const d of drift) {
      if (d.replicated === null) continue;
      const entry = memberEntryToml(d.replicated);
      if (d.inFile === null) {
        this.logger.warn(`${d.id} is a member of the cluster, but not in this node's [cluster] members: it is reached at the addresses the cluster replicated (add-node, set-member)`, {
          member: d.id,
          hint: `add ${entry} to members in this node's configuration file (the same list on every node): a node started on an empty data directory, and init-cluster --bootstrap, know only the file`,
        });
      } else {
        this.logger.warn(`this node's [cluster] members gives ${d.id} other addresses than the cluster replicated (set-member): the cluster's are used`, {
          member: d.id, file: memberEntryToml(d.inFile),
          hint: `change ${d.id}'s entry in members in this node's configuration file to ${entry}: a node started on an empty data directory, and init-cluster --bootstrap, know only the file`,
        });
      }
    }
  }

  /** `orElse`: another way out, for an action a follower can also take on itself. */
  notLeader(leaderId: string | null, orElse?: string): SvcError {
    const leader = leaderId === null ? undefined : this.memberAddresses().get(leaderId);
    // Leaderless past two election timeouts: no election is about to end here; this node reaches
    // no majority (as /health says), and the client had better try another node.
    const cutOff = leaderId === null && this.leaderGone();
    return new SvcError("NOT_LEADER", leaderId === null ? "no leader is known right now" : `this node is not the leader; ${leaderId} is`, {
      hint: (leaderId !== null ? "send the request to the leader"
        : cutOff ? `this node has known no leader for ${(this.leaderlessMs() / 1000).toFixed(1)} s: it reaches no majority of the voters; send the request to another node`
        : "retry shortly: an election is in progress") + (orElse === undefined ? "" : `; or ${orElse}`),
      details: { leaderId, leaderClient: leader?.client ?? null, leaderAdmin: leader?.admin ?? null },
    });
  }

  requireLeader(orElse?: string): void {
    const status = this.core.status();
    if (status.role !== "leader") throw this.notLeader(status.leaderId, orElse);
  }

  checkServing(): void {
    if (this.fatalError !== null) throw this.fatalError;
    if (this.stopped) throw new SvcError("SHUTTING_DOWN", "the node is shutting down");
  }

  /**
   * Removed from the cluster: the latest membership in its log leaves it out. Also when
   * restarted after its removal: it replays its WAL, then joins, and no leader ever comes (none
   * replicates to it). Not a new member that installs an image, or copies the log, from before
   * it was added: no configuration it holds names it yet.
   */
  /**
   * The members of the cluster this node's data belongs to, when neither this node nor any
   * member its configuration file names is one of them (a backup restored onto hosts whose
   * node ids differ, started without init-cluster --bootstrap): it waits for members that
   * are not there, and only a new cluster made of the data gets it going. Null otherwise.
   */
  get foreignMembers(): string[] | null {
    const m = this.core.currentMembership();
    const members = [...m.voters, ...m.learners];
    if (m.voters.length === 0 || members.includes(this.config.nodeId) || this.removed) return null;
    if (this.config.cluster.members.some((f) => members.includes(f.id))) return null;
    return members;
  }

  get removed(): boolean {
    if (this.recovery !== "healthy" && this.recovery !== "replaying_wal" && this.recovery !== "joining") return false;
    // Removed while cut off: its log never got the entry, a member said so (RaftCore.removalNotice).
    if (this.core.removalNotice() !== null) return true;
    const m = this.core.currentMembership();
    if (m.voters.length === 0 || m.voters.includes(this.config.nodeId) || m.learners.includes(this.config.nodeId)) return false;
    return this.recovery === "healthy" || this.core.namedInMembership();
  }

  /** Said once per run: /health, clients and cluster-status say it too, but the log is where an operator looks first. */
  private removalLogged = false;

  /** A node whose own log removed it (remove-node while it ran) says so once in its log. */
  private tellRemoved(): void {
    if (this.removalLogged || this.core.removalNotice() !== null || !this.removed) return;
    this.removalLogged = true;
    this.logger.warn(`this node (${this.config.nodeId}) was removed from the cluster: it serves no reads or writes and answers clients 421 NOT_A_MEMBER`, {
      hint: removedWayOut,
    });
  }

  /**
   * Keep raft/REMOVED in step with the core's removal notice, and say once per run, at error
   * level, what happened and what to do. Written so that a restart goes on saying it was
   * removed rather than campaigning again in silence; removed when the notice lapses (the
   * node was added back and its log reached the configuration). A write that fails (a full
   * disk) is tried again at the next call: the notice holds in memory meanwhile.
   */
  syncRemoval(): void {
    const notice = this.core.removalNotice();
    if (notice !== null && !this.removalTold) {
      this.removalTold = true;
      this.logger.error(`this node was removed from the cluster while it was cut off: member ${notice.by} holds the configuration committed at index ${notice.configIndex}, ` +
        "which leaves it out, and this node's log ends before it. It no longer campaigns, and answers clients 421 NOT_A_MEMBER", {
        by: notice.by, configIndex: notice.configIndex,
        hint: removedWayOut,
      });
    }
    const saved = this.removedMark;
    if (notice === null ? saved === null : saved !== null && saved.configIndex === notice.configIndex && saved.by === notice.by) return;
    const mark = notice === null ? null : { configIndex: notice.configIndex, by: notice.by, clusterId: this.clusterId };
    try {
      this.io.log.setRemoved(mark);
    } catch (e) {
      // Tried again at every call; said once until it succeeds (a full disk would fill the log).
      if (!this.removalWriteFailing) this.logger.warn("could not record this node's removal in raft/REMOVED; trying again until it can", { error: errorMessage(e) });
      this.removalWriteFailing = true;
      return;
    }
    this.removalWriteFailing = false;
    this.removedMark = mark;
    if (mark === null) {
      this.removalTold = false;
      this.logger.info("the removal this node was told of is past (a leader replicates to it, or its log reached that configuration): raft/REMOVED is cleared");
    }
  }

  /**
   * Refuse a client's request on a removed node: its state is no longer replicated (a read
   * would be stale for ever, and nothing would say so), and it is no member to forward a write
   * for. The request never left this node.
   */
  checkMember(): void {
    if (!this.removed) return;
    throw new SvcError("NOT_A_MEMBER", `this node (${this.config.nodeId}) was removed from the cluster: it serves no reads or writes`, {
      hint: "send requests to a member (`svc admin cluster-info` on one lists them); stop this node, or add it back with `svc admin add-node` on an empty data directory",
    });
  }

  private lastAdmissionSpaceCheckMs = Number.NEGATIVE_INFINITY;

  /**
   * Refuse a write this node would have to persist as the leader while its disk is full, or
   * that could not commit because too many followers said theirs is full. A follower lets it
   * through: it goes to the leader, whose disk may have room, and commits on the members that
   * can write.
   */
  checkWritable(): void {
    // Not core.status(): it builds every peer's progress, and this runs on every write.
    if (!this.core.isLeader()) return;
    const space = this.io.diskSpace;
    const nowMs = this.clock.monotonicMs();
    if (this.diskFull === null && space !== undefined && nowMs - this.lastAdmissionSpaceCheckMs >= admissionSpaceCheckMs) {
      // Checked at admission too: the loop's periodic check alone would let a burst of writes
      // run the disk to its last byte between two checks. But not on every write: a statfs
      // cost a fifth of a write's CPU on the node's thread, and in 20 ms a burst writes far
      // less than the reserve (a WAL segment + 4 MiB).
      this.lastAdmissionSpaceCheckMs = nowMs;
      const free = space.freeBytes();
      if (free !== null && free < diskReserveBytes(this.config.wal.segmentSizeBytes)) {
        this.enterDiskFull({ path: space.path, bytesFree: free, cause: "below_reserve" });
      }
    }
    const full = this.diskFull;
    if (full !== null) {
      const free = full.bytesFree === null ? "free space unknown" : `${full.bytesFree} bytes free`;
      throw new SvcError("DISK_FULL", `the disk holding ${full.path} is full (${free}): this node refuses writes until space is freed`, {
        // (Not `svc admin snapshot`: an image needs room the full disk does not have, and is refused.)
        hint: "free space on that file system or grow it (older snapshots can go: `svc admin cleanup-snapshots --older-than 1h` keeps the newest valid one); writes resume by themselves within seconds",
        details: { path: full.path, bytesFree: full.bytesFree },
      });
    }
    // Followers whose disks are full cannot persist: with too few left for a majority a write
    // could only wait, so it is refused before it enters the log (nothing of it is applied).
    const others = this.core.votersDiskFull();
    if (others.length === 0) return;
    const voters = this.core.currentMembership().voters.length;
    if (voters - others.length >= majority(voters)) return;
    throw new SvcError("DISK_FULL", `the disks of ${others.join(", ")} are full: too few voters can persist a write for it to commit, so it was not tried`, {
      hint: `free space on the data directory's disk of ${others.join(", ")} (see their /health and logs); writes resume by themselves once a majority can persist again`,
      details: { members: others },
    });
  }

  /** Enter (or refresh) the disk-full state; logged once on entry. */
  enterDiskFull(state: DiskFullState, error?: unknown): void {
    const was = this.diskFull;
    this.diskFull = state;
    if (was !== null) return;
    this.logger.warn("disk full: refusing writes and serving reads until space is freed", {
      path: state.path, bytesFree: state.bytesFree, cause: state.cause, ...(error === undefined ? {} : { error: errorMessage(error) }),
    });
  }

  leaveDiskFull(bytesFree: number | null): void {
    if (this.diskFull === null) return;
    this.diskFull = null;
    this.logger.info("disk space available again: writes resume", { bytesFree });
  }

  /** A storage failure: nothing unsynced was acknowledged, but the node cannot go on safely. */
  fail(e: unknown): void {
    const error = e instanceof SvcError ? e : new SvcError("STORAGE_FAILED", `storage failure: ${errorMessage(e)}`, {
      hint: "check the disk (free space, I/O errors in the kernel log); the node stops and replays its WAL on restart",
      cause: e,
    });
    this.fatalError = error;
    this.logger.error(`fatal: ${error.message}`, { hint: error.hint });
    this.waiters.failAll(error);
    for (const hook of this.failHooks) hook(error);
    this.onFatal?.(error);
  }
}

/** What a node holding another set of members' data says, on /health and in its log. */
export function foreignMembersText(nodeId: string, members: readonly string[]): string {
  return `this node (${nodeId}) holds the data of a cluster whose members are ${members.join(", ")}; neither it nor any member its configuration file names is one of them, ` +
    "so it waits for members that are not there (a backup restored onto hosts whose node ids differ, started without init-cluster --bootstrap)";
}

export const foreignMembersWayOut = "stop it, extract the backup again into its emptied raft/ and store/, run `svc admin init-cluster --bootstrap` " +
  "(on every node given the backup), and start it: a new cluster of the data with the members the configuration file names (SPEC §4.5, disaster recovery)";
