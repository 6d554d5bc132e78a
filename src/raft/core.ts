// RaftCore: the Raft state machine of one node, with no I/O. Time enters as tick(), peer
// messages as step(), client work as propose()/readIndex(); everything the node must persist,
// send and apply comes out of ready(), and advance() says it was done. One Ready is
// outstanding at a time; steps and ticks may happen while it is (the node persists it
// asynchronously), and their effects come in the next Ready.

import { assert, SvcError } from "../util/index.ts";
import type { Logger } from "../util/index.ts";
import { validateMessage } from "./_validate.ts";
import type {
  Divergence,
  LogFetch,
  MembershipChangeResult,
  PeerProgress,
  ProposeResult,
  RaftOptions,
  RaftState,
  RaftStatus,
  ReadIndexResult,
  ReadState,
  Ready,
  RemovalNotice,
  TransferResult,
} from "./api.ts";
import { entrySizeBytes, RaftLog } from "./log.ts";
import type { AppendMessage, AppendResponseMessage, HeartbeatMessage, Message, NotMemberMessage, SnapshotMessage, VoteMessage, PreVoteMessage } from "./messages.ts";
import type { MembershipChange } from "./membership.ts";
import { allMembers, applyChange, isLearner, isMember, isVoter, MembershipHistory, membershipEquals } from "./membership.ts";
import { Progress } from "./progress.ts";
import { majority, quorumIndex, voteOutcome } from "./quorum.ts";
import { ReadIndexTracker, type PendingRead } from "./readindex.ts";
import type { Entry, HardState, Membership, NodeId, Role, SnapshotMeta } from "./types.ts";
import { emptyMembership, encodeMembership } from "./types.ts";

/**
 * Drop reasons that only a safety violation by some peer can cause, or (heartbeat_commit_beyond_log)
 * a member whose log was emptied or rebuilt by its operator; the simulator, which never loses
 * a synced log, requires zero.
 */
export const safetyDropReasons: readonly string[] = ["conflict_below_commit", "two_leaders_in_term", "heartbeat_commit_beyond_log"];

const defaultMaxCommittedEntriesPerReady = 4096;
/**
 * Non-members refused at once (see refuseNonMember): each is sent a not_member at most once per
 * election timeout, and past this many in one timeout the rest go unanswered until it passes.
 */
const refusedPeersMax = 64;
/** Appends' worth of entries one log-store read asks for (see requestFetch). */
const fetchAppendsMax = 2;

/** A message without its envelope; distributes over the union so each variant keeps its fields. */
type Payload<M = Message> = M extends Message ? Omit<M, "from" | "to" | "term"> : never;

export class RaftCore {
  private readonly opts: RaftOptions;
  private readonly id: NodeId;
  private readonly logger: Logger;
  /**
   * Whether trace lines are written (RUST_LOG=tensor_chain::raft=trace), decided once: on the
   * write path a node that does not trace pays one test per decision, never building fields.
   */
  private readonly tracing: boolean;
  private readonly log: RaftLog;
  private readonly members: MembershipHistory;

  private role: Role = "follower";
  private term: number;
  private vote: NodeId | null;
  private leaderId: NodeId | null = null;

  /** Ticks since the last election reset (follower/candidate) or check-quorum round (leader). */
  private electionElapsed = 0;
  private campaignsHeld = false;
  private heartbeatElapsed = 0;
  /** Ticks since the core started: when a member was last heard from (Progress.heardAtTick). */
  private ticks = 0;
  /** In [T, 2T), drawn anew at every reset so that candidates rarely collide. */
  private randomizedElectionTimeoutTicks: number;

  /** Votes received in the current (pre-)campaign, by voter. */
  private readonly votes = new Map<NodeId, boolean>();

  /** Leader only: replication state of every member, self included (its match is persistedIndex). */
  private readonly progress = new Map<NodeId, Progress>();
  /** Leader only: new entries await sending; ready() sends them in one batch per follower. */
  private appendsDirty = false;
  private leadTransferee: NodeId | null = null;
  private readonly reads = new ReadIndexTracker();
  /** ReadIndex requests that arrived before this leader committed an entry of its term. */
  private waitingReads: { requestId: number; from: NodeId }[] = [];

  private msgs: Message[] = [];
  private fetches: LogFetch[] = [];
  /** Numbers log-store reads; never reused, so an answer names the request it answers. */
  private fetchSeq = 0;
  /**
   * The log store said it no longer holds this index: neither it nor anything before it
   * (the store only drops entries from its front), so members that far behind get a snapshot.
   */
  private logStoreMissingThrough = 0;
  private readStates: ReadState[] = [];
  /** The hard state as last handed out in a Ready. */
  private prevHardState: HardState;
  /** Highest index the node confirmed applied (through advance). */
  private applied: number;
  /** Highest index handed out in Ready.committed. Invariant: applied <= applyingIndex <= commit. */
  private applyingIndex: number;
  private outstanding: Ready | null = null;
  private readonly dropped = new Map<string, number>();
  /**
   * The first append from a leader whose entries differ from ones this node committed: two
   * histories met (Raft never replaces a committed entry). Null while none came.
   */
  private divergedAt: Divergence | null = null;
  /**
   * Set when a member said this node is left out of a configuration committed later than any
   * this node holds (see handleNotMember): it was removed while cut off. It then does not
   * campaign; it still answers votes (Raft's votes need no membership, and a member wrongly
   * told it was removed must still help elect a leader). It lapses once this node's commit
   * index reaches configIndex (its own log then says whether it is a member), or once a
   * leader replicates to it (that leader's configuration names it).
   */
  private removal: RemovalNotice | null;
  /** When each non-member was last sent a not_member, in ticks (see refuseNonMember). Bounded by refusedPeersMax. */
  private readonly refusedAtTick = new Map<NodeId, number>();

  constructor(opts: RaftOptions, state: RaftState) {
    assert(opts.id.length > 0, "node id is non-empty");
    assert(opts.electionTimeoutTicks > opts.heartbeatTicks, "election timeout exceeds the heartbeat interval");
    assert(opts.heartbeatTicks >= 1, "heartbeat interval is at least one tick");
    assert(opts.maxEntriesPerAppend >= 1 && opts.maxBytesPerAppend >= 1, "appends may carry an entry");
    assert(opts.maxPendingProposals >= 1, "at least one proposal may be pending");
    this.opts = opts;
    this.id = opts.id;
    this.logger = opts.logger;
    this.tracing = opts.logger.enabled("trace");
    checkLoadedState(state);

    const snapIndex = state.snapshot?.index ?? 0;
    const lastIndex = snapIndex + state.entries.length;
    const applied = Math.max(state.appliedIndex ?? snapIndex, snapIndex);
    // The state machine can be ahead of the saved commit when the process died between
    // applying and saving the hard state; whatever it applied was committed.
    const commit = Math.max(state.hardState.commit, applied);
    if (commit > lastIndex) {
      throw new SvcError("RAFT_STATE_INVALID", `commit index ${commit} is beyond the last log index ${lastIndex}: the log lost committed entries`, {
        hint: "the WAL is damaged or was truncated; restore this node from a snapshot of a healthy member or rebuild it",
      });
    }
    this.log = new RaftLog(state.snapshot, state.entries, commit);
    this.members = new MembershipHistory(state.snapshot?.membership ?? state.membership ?? emptyMembership);
    this.members.onAppend(state.entries, (e) => this.reportMalformedConfig(e));
    this.term = state.hardState.term;
    this.vote = state.hardState.vote;
    this.applied = applied;
    this.applyingIndex = applied;
    this.prevHardState = { term: this.term, vote: this.vote, commit: state.hardState.commit };
    this.randomizedElectionTimeoutTicks = this.drawElectionTimeout();
    this.removal = state.removal ?? null;
    this.settleRemoval();
    this.logger.info("raft core started", { id: this.id, term: this.term, commit, lastIndex, snapshotIndex: snapIndex });
  }

  // ─── time ────────────────────────────────────────────────────────────────────────────

  tick(): void {
    this.ticks++;
    if (this.role === "leader") this.tickLeader();
    else this.tickElection();
  }

  /**
   * Held by a node that belongs to no cluster yet: it may hold the membership (a first entry
   * the leader sent) without the entries the cluster committed with it, and elected by members
   * that hold nothing at all it would write over them. It still votes, and its lease lapses.
   */
  holdCampaigns(held: boolean): void {
    this.campaignsHeld = held;
  }

  private tickElection(): void {
    this.electionElapsed++;
    // Only a node that may campaign restarts the count: for the others it keeps growing, so
    // the leader lease they grant (see step) lapses once the leader falls silent.
    if (this.promotable() && !this.campaignsHeld && this.electionElapsed >= this.randomizedElectionTimeoutTicks) {
      if (this.tracing) this.logger.trace("election timeout: no leader heard from", { term: this.term, ticks: this.electionElapsed, leader: this.leaderId });
      this.electionElapsed = 0;
      this.hup(false);
    }
  }

  /**
   * The node learned that nothing listens at a member's peer address (a dial was refused right
   * after the connection dropped): its process is gone. When that member is this follower's
   * leader, waiting out the election timeout only prolongs the outage, so the follower lets the
   * lease it grants lapse now and campaigns within a tick or a few (one per voter ahead of it). Safety does not rest on it:
   * a stale report (the leader restarted, or is back) costs a pre-vote the other members refuse
   * while their lease runs, and a heartbeat from the leader ends it.
   * To a leader it says that appends in flight to the member were lost (its transport drops
   * what it queued for a member it cannot reach): the member goes back to probing.
   */
  peerUnreachable(id: NodeId): void {
    if (this.role === "leader") return this.reportUnreachable(id);
    if (id !== this.leaderId) return;
    const timeout = this.opts.electionTimeoutTicks;
    if (this.electionElapsed >= timeout) return;
    this.logger.info("leader unreachable (its peer port refused a connection): campaigning without waiting out the election timeout", { leader: id, term: this.term });
    this.electionElapsed = timeout;
    // Every follower hears it at about the same moment: were they to campaign together, their
    // pre-votes would pass and the votes split, and the next try waits a full timeout. So they
    // take turns, one tick apart, in the order of their ids.
    const rank = this.membership().voters.filter((v) => v !== id).sort().indexOf(this.id);
    this.randomizedElectionTimeoutTicks = timeout + 1 + Math.max(0, rank);
  }

  /**
   * A connection to `id` came up (it was down, or restarted): a leader probing it sends the
   * probe now instead of at the next heartbeat, so a member that comes back starts catching up
   * at once. A probe is always safe to send; nothing changes for a member not in probe.
   */
  peerReachable(id: NodeId): void {
    if (this.role !== "leader" || id === this.id) return;
    const pr = this.progress.get(id);
    if (pr === undefined || pr.state !== "probe" || pr.fetching !== 0) return;
    if (this.tracing) this.logger.trace("member reachable again: probing it now", { member: id, next: pr.next });
    pr.probeSent = false;
    this.sendAppends(id, true);
  }

  private tickLeader(): void {
    this.heartbeatElapsed++;
    this.electionElapsed++;
    if (this.electionElapsed >= this.opts.electionTimeoutTicks) {
      this.electionElapsed = 0;
      if (this.opts.checkQuorum && !this.quorumActive()) {
        this.logger.warn("stepping down: no quorum heard from within an election timeout", { term: this.term });
        this.becomeFollower(this.term, null);
        return;
      }
      if (this.leadTransferee !== null) {
        this.logger.info("leadership transfer timed out", { to: this.leadTransferee });
        this.leadTransferee = null;
      }
    }
    if (this.heartbeatElapsed >= this.opts.heartbeatTicks) {
      this.heartbeatElapsed = 0;
      this.bcastHeartbeat();
    }
  }

  /**
   * Mark a member whose disk is full, or clear the mark. Cleared, it starts over from what it
   * matched: it dropped the appends sent while it was full.
   */
  private setPeerDiskFull(id: NodeId, pr: Progress, full: boolean): void {
    if (pr.diskFull === full) return;
    pr.diskFull = full;
    if (full) {
      this.logger.warn("a member's disk is full: it takes no entries until it has room", { member: id });
      return;
    }
    this.logger.info("a member whose disk was full takes entries again", { member: id });
    if (pr.state === "replicate") pr.becomeProbe();
  }

  /**
   * The voters other than this node that said their disk is full (none while it does not
   * lead). When they leave fewer than a quorum able to persist, a write cannot commit.
   */
  votersDiskFull(): NodeId[] {
    if (this.role !== "leader") return [];
    const full: NodeId[] = [];
    for (const v of this.membership().voters) if (v !== this.id && this.progress.get(v)?.diskFull === true) full.push(v);
    return full;
  }

  /**
   * Strict reconfiguration (as etcd's default): a change whose new voters could not commit,
   * because fewer than a majority of them were heard from within an election timeout (this
   * leader counts), is refused. Made, it would leave the cluster unable to take a write (and,
   * should one of those members have lost its log, unable to elect) until they came back.
   * Returns why, or null when a majority of the new voters is up.
   */
  private unreachableQuorum(voters: readonly NodeId[]): string | null {
    const silent = voters.filter((v) => v !== this.id && this.ticks - (this.progress.get(v)?.heardAtTick ?? Number.NEGATIVE_INFINITY) > this.opts.electionTimeoutTicks);
    const needed = majority(voters.length);
    if (voters.length - silent.length >= needed) return null;
    return `the new configuration's ${voters.length} voters need ${needed} to commit, and ${silent.join(", ")} ${silent.length === 1 ? "has" : "have"} not answered ` +
      "within an election timeout: bring them back first (or remove one that is gone for good before changing another)";
  }

  /**
   * A learner is promoted only once it is up and in step with the log (as etcd: it holds at
   * least 90% of what is committed, and answered within an election timeout). A voter that
   * holds nothing, or never ran, would count toward every quorum while helping none.
   */
  private learnerNotReady(id: NodeId): string | null {
    const pr = this.progress.get(id);
    if (pr === undefined) return null; // applyChange has refused a stranger already
    if (this.ticks - pr.heardAtTick > this.opts.electionTimeoutTicks) {
      return `${id} has not answered within an election timeout: start it (or check it reaches this node), let it catch up, then promote it`;
    }
    if (pr.match * 10 < this.log.commit * 9) {
      return `${id} holds ${pr.match} of the ${this.log.commit} committed entries: promote it once it has caught up (svc admin cluster-info shows how far it is)`;
    }
    return null;
  }

  /** Check-quorum: did a majority of voters answer in this round? Starts the next round. */
  private quorumActive(): boolean {
    const voters = this.membership().voters;
    let active = 0;
    for (const v of voters) {
      if (v === this.id || this.progress.get(v)?.recentActive === true) active++;
    }
    for (const [id, pr] of this.progress) pr.recentActive = id === this.id;
    return active >= Math.floor(voters.length / 2) + 1;
  }

  // ─── elections ───────────────────────────────────────────────────────────────────────

  /** Start an election now (bootstrap of a one-voter cluster, tests). Ignored when this node may not campaign. */
  campaign(): void {
    this.hup(false);
  }

  /** A node campaigns only as a voter with a log of its own (never while installing a snapshot, nor once it knows it was removed). */
  private promotable(): boolean {
    return isVoter(this.membership(), this.id) && this.log.pendingSnapshot === null && this.removalInForce() === null;
  }

  private hup(transfer: boolean): void {
    if (this.role === "leader") return;
    if (!this.promotable()) {
      this.logger.debug("not campaigning: not a voter in the current membership", { id: this.id });
      return;
    }
    if (this.opts.preVote && !transfer) this.campaignPre();
    else this.campaignElection(transfer);
  }

  private campaignPre(): void {
    this.role = "pre_candidate";
    this.leaderId = null;
    this.votes.clear();
    this.electionElapsed = 0;
    this.randomizedElectionTimeoutTicks = this.drawElectionTimeout();
    this.logger.debug("starting pre-vote", { term: this.term + 1 });
    this.votes.set(this.id, true);
    if (this.tally() === "won") return this.campaignElection(false);
    for (const v of this.membership().voters) {
      if (v === this.id) continue;
      this.send(v, this.term + 1, { type: "pre_vote", lastIndex: this.log.lastIndex(), lastTerm: this.log.lastTerm() });
    }
  }

  private campaignElection(transfer: boolean): void {
    this.reset(this.term + 1);
    this.role = "candidate";
    this.vote = this.id;
    this.logger.info("starting election", { term: this.term, transfer });
    this.votes.set(this.id, true);
    if (this.tally() === "won") return this.becomeLeader();
    for (const v of this.membership().voters) {
      if (v === this.id) continue;
      this.send(v, this.term, { type: "vote", lastIndex: this.log.lastIndex(), lastTerm: this.log.lastTerm(), transfer });
    }
  }

  private tally(): "won" | "lost" | "pending" {
    return voteOutcome(this.membership().voters, this.votes);
  }

  private reset(term: number): void {
    if (term !== this.term) {
      assert(term > this.term, "terms only grow");
      if (this.tracing) this.logger.trace("entering a new term", { term, was: this.term, role: this.role });
      this.term = term;
      this.vote = null;
    }
    this.leaderId = null;
    this.electionElapsed = 0;
    this.heartbeatElapsed = 0;
    this.randomizedElectionTimeoutTicks = this.drawElectionTimeout();
    this.votes.clear();
    this.leadTransferee = null;
    this.progress.clear();
    this.appendsDirty = false;
    // Pending reads cannot be confirmed by a node that is no longer leader; the requesters time out.
    this.reads.clear();
    this.waitingReads = [];
  }

  private becomeFollower(term: number, leaderId: NodeId | null): void {
    const was = this.role;
    this.reset(term);
    this.role = "follower";
    this.leaderId = leaderId;
    if (was !== "follower") this.logger.info("became follower", { term, leaderId, was });
  }

  private becomeLeader(): void {
    assert(this.role === "candidate", "only a candidate becomes leader");
    this.reset(this.term);
    this.role = "leader";
    this.leaderId = this.id;
    this.syncProgress();
    this.logger.info("became leader", { term: this.term, lastIndex: this.log.lastIndex() });
    // A noop of the new term lets the leader commit entries of earlier terms (§5.4.2) and
    // tells it when it may serve ReadIndex requests.
    this.appendEntry("noop", new Uint8Array(0), 0);
  }

  private drawElectionTimeout(): number {
    const t = this.opts.electionTimeoutTicks;
    return t + this.opts.prng.nextInt(t);
  }

  // ─── messages in ─────────────────────────────────────────────────────────────────────

  step(m: Message): void {
    const invalid = validateMessage(m);
    if (invalid !== null) return this.drop(m, invalid);
    if (m.to !== this.id) return this.drop(m, "wrong_recipient");
    if (m.from === this.id) return this.drop(m, "from_self");
    // Before any term is looked at: a refusal says nothing of terms, and a removed node's
    // term must never move a member's (nor a member's refusal move its own).
    if (m.type === "not_member") return this.handleNotMember(m);
    this.refuseNonMember(m.from);

    if (m.term > this.term) {
      if (m.type === "pre_vote" || m.type === "vote") {
        const transfer = m.type === "vote" && m.transfer;
        // A node that heard from a leader within the election timeout ignores campaigns:
        // a node cut off from the cluster cannot raise the term and depose a healthy leader.
        const inLease = this.leaderId !== null && this.electionElapsed < this.opts.electionTimeoutTicks;
        if (!transfer && inLease && (this.opts.checkQuorum || m.type === "pre_vote")) return this.drop(m, "vote_within_leader_lease");
      }
      if (m.type === "pre_vote" || (m.type === "pre_vote_response" && !m.reject)) {
        // A pre-vote concerns a term nobody has entered yet: it changes nothing here.
      } else {
        const fromLeader = m.type === "append" || m.type === "heartbeat" || m.type === "snapshot";
        this.becomeFollower(m.term, fromLeader ? m.from : null);
      }
    } else if (m.term < this.term) {
      if (m.type === "append" || m.type === "heartbeat") {
        // A stale leader is talking to us. Tell it our term so it steps down (§5.1): we may
        // be unable to make it learn otherwise (with pre-vote or check-quorum our campaigns
        // are ignored, and a node outside its own stale membership never campaigns).
        this.send(m.from, this.term, { type: "append_response", reject: false, index: 0, hintIndex: 0, hintTerm: 0 });
      } else if (m.type === "pre_vote" || m.type === "vote") {
        // Tell a candidate behind us our term (§5.1). Otherwise a candidate we never contact
        // (it is not in our, possibly stale, membership) may stay behind our term forever.
        this.send(m.from, this.term, { type: m.type === "vote" ? "vote_response" : "pre_vote_response", reject: true });
      }
      return this.drop(m, "stale_term");
    }
    // A leader of this node's term or a later one replicates to it: that leader's configuration,
    // which holds every committed entry, names it (it was added back). What the refusal said is
    // past; if it is not, the next refusal says it again.
    if (this.removal !== null && (m.type === "append" || m.type === "heartbeat" || m.type === "snapshot")) {
      this.logger.info("a leader replicates to this node: it is a member again, and the removal it was told of is past", { leader: m.from, term: m.term, configIndex: this.removal.configIndex });
      this.removal = null;
    }

    switch (m.type) {
      case "pre_vote":
      case "vote":
        return this.handleVoteRequest(m);
      default:
        break;
    }
    switch (this.role) {
      case "leader":
        return this.stepLeader(m);
      case "candidate":
      case "pre_candidate":
        return this.stepCandidate(m);
      case "follower":
        return this.stepFollower(m);
    }
  }

  /**
   * A node outside this node's committed configuration (and outside its latest one, which may
   * be adding it) sent Raft traffic: tell it, naming the committed configuration's index, at most
   * once per election timeout. The message is handled as before all the same: this is only an
   * extra answer, and whether it means anything is for the receiver to judge (handleNotMember).
   */
  private refuseNonMember(to: NodeId): void {
    const commit = this.log.commit;
    const committed = this.members.at(commit);
    if (committed.voters.length === 0 || isMember(committed, to) || isMember(this.membership(), to)) return;
    // A configuration that came with a snapshot is in force at the snapshot's index (its entry is at or before it).
    const configIndex = this.members.configIndexAt(commit) || this.log.snapshotIndex();
    if (configIndex === 0) return; // a bootstrap configuration: no entry to name
    const last = this.refusedAtTick.get(to);
    const window = this.opts.electionTimeoutTicks;
    if (last !== undefined && this.ticks - last < window) return;
    if (last === undefined && this.refusedAtTick.size >= refusedPeersMax) {
      for (const [id, at] of this.refusedAtTick) if (this.ticks - at >= window) this.refusedAtTick.delete(id);
      if (this.refusedAtTick.size >= refusedPeersMax) return;
    }
    this.refusedAtTick.set(to, this.ticks);
    if (this.tracing) this.logger.trace("message from a node outside the committed configuration: telling it", { to, configIndex, commit });
    this.send(to, this.term, { type: "not_member", configIndex });
  }

  /**
   * A member says the configuration in force at configIndex, which it holds committed, leaves
   * this node out. That makes this node removed only when no configuration it holds is as late:
   * a committed entry is in every later leader's log, so a configuration after every one this
   * node knows, and without it, was committed after them. A member that lags (its committed
   * configuration predates the one that added this node, or this node's latest one) names an
   * index at or below one this node holds, and is ignored; so is it by a node that no
   * configuration it holds names yet (a new member copying the log from before it was added).
   * Nothing here touches the term: a refusal neither raises this node's nor answers with it.
   */
  private handleNotMember(m: NotMemberMessage): void {
    if (this.removalInForce() !== null) return this.drop(m, "not_member_known");
    if (!isMember(this.membership(), this.id)) return this.drop(m, "not_member_not_named");
    // Only a member of this node's own latest configuration speaks for the cluster it belongs to.
    if (!isMember(this.membership(), m.from)) return this.drop(m, "not_member_from_stranger");
    const heldThrough = Math.max(this.members.latestConfigIndex(), this.log.snapshotIndex(), this.log.commit);
    if (m.configIndex <= heldThrough) return this.drop(m, "not_member_stale");
    this.removal = { configIndex: m.configIndex, by: m.from };
    this.logger.warn("removed from the cluster: a member holds a configuration committed after every one this node holds, and it leaves this node out; not campaigning", {
      by: m.from, configIndex: m.configIndex, heldThrough, term: this.term,
    });
    if (this.role !== "follower") this.becomeFollower(this.term, null);
  }

  /** The removal this node learned of (handleNotMember), while its own log has not reached it; null otherwise. */
  private removalInForce(): RemovalNotice | null {
    const r = this.removal;
    return r !== null && this.log.commit < r.configIndex && this.log.snapshotIndex() < r.configIndex ? r : null;
  }

  /** A removal notice this node's own log has reached is forgotten: its log speaks for its membership then. */
  private settleRemoval(): void {
    const r = this.removal;
    if (r === null || this.removalInForce() !== null) return;
    this.removal = null;
    this.logger.info("this node's log reached the configuration it was told removed it: its log speaks for its membership now", { configIndex: r.configIndex });
  }

  /**
   * The removal a member told this node of, while in force (see handleNotMember): the node
   * persists it and reports the node removed; null when none is.
   */
  removalNotice(): RemovalNotice | null {
    return this.removalInForce();
  }

  private handleVoteRequest(m: PreVoteMessage | VoteMessage): void {
    const isPre = m.type === "pre_vote";
    const canVote =
      this.vote === m.from || (this.vote === null && this.leaderId === null) || (isPre && m.term > this.term);
    const responseType = isPre ? "pre_vote_response" : "vote_response";
    const upToDate = this.log.isUpToDate(m.lastIndex, m.lastTerm);
    if (canVote && upToDate) {
      if (this.tracing) this.logger.trace(isPre ? "pre-vote granted" : "vote granted", { to: m.from, term: m.term, lastIndex: m.lastIndex, lastTerm: m.lastTerm });
      // A granted pre-vote answers in the term asked about, so the pre-candidate counts it.
      this.send(m.from, m.term, { type: responseType, reject: false });
      if (!isPre) {
        this.electionElapsed = 0;
        this.vote = m.from;
      }
    } else {
      if (this.tracing) {
        this.logger.trace(isPre ? "pre-vote refused" : "vote refused", {
          to: m.from, term: m.term, reason: this.voteRefusal(canVote, upToDate),
          lastIndex: m.lastIndex, lastTerm: m.lastTerm, ownLastIndex: this.log.lastIndex(), ownLastTerm: this.log.lastTerm(),
        });
      }
      this.send(m.from, this.term, { type: responseType, reject: true });
    }
  }

  /** Why a vote is refused, in words for the trace. */
  private voteRefusal(canVote: boolean, upToDate: boolean): string {
    const reasons: string[] = [];
    if (!canVote) reasons.push(this.vote !== null ? `already voted for ${this.vote} in term ${this.term}` : `follows leader ${this.leaderId ?? "?"} in term ${this.term}`);
    if (!upToDate) reasons.push("the candidate's log is behind this node's");
    return reasons.join("; ");
  }

  private stepFollower(m: Message): void {
    switch (m.type) {
      case "append":
        this.electionElapsed = 0;
        this.leaderId = m.from;
        return this.handleAppend(m);
      case "heartbeat":
        this.electionElapsed = 0;
        this.leaderId = m.from;
        return this.handleHeartbeat(m);
      case "snapshot":
        this.electionElapsed = 0;
        this.leaderId = m.from;
        return this.handleSnapshot(m);
      case "timeout_now":
        this.logger.info("leadership transfer: campaigning now", { from: m.from });
        if (!this.promotable()) return this.drop(m, "timeout_now_not_promotable");
        return this.hup(true);
      case "read_index_response":
        this.readStates.push({ requestId: m.requestId, index: m.index });
        return;
      case "read_index":
        return this.drop(m, "read_index_not_leader");
      default:
        return this.drop(m, `${m.type}_as_follower`);
    }
  }

  private stepCandidate(m: Message): void {
    switch (m.type) {
      case "append":
      case "heartbeat":
      case "snapshot":
        // A leader exists in our term: we lost.
        this.becomeFollower(this.term, m.from);
        return this.stepFollower(m);
      case "pre_vote_response":
      case "vote_response": {
        const expected = this.role === "pre_candidate" ? "pre_vote_response" : "vote_response";
        if (m.type !== expected) return this.drop(m, "vote_response_for_other_campaign");
        this.votes.set(m.from, !m.reject);
        const outcome = this.tally();
        if (this.tracing) {
          let granted = 0;
          for (const g of this.votes.values()) if (g) granted++;
          this.logger.trace(m.type === "pre_vote_response" ? "pre-vote answer counted" : "vote answer counted", {
            from: m.from, granted: !m.reject, term: this.role === "pre_candidate" ? this.term + 1 : this.term,
            votesGranted: granted, voters: this.membership().voters.length, outcome,
          });
        }
        if (outcome === "won") {
          if (this.role === "pre_candidate") this.campaignElection(false);
          else this.becomeLeader();
        } else if (outcome === "lost") {
          this.becomeFollower(this.term, null);
        }
        return;
      }
      default:
        return this.drop(m, `${m.type}_as_candidate`);
    }
  }

  private stepLeader(m: Message): void {
    switch (m.type) {
      case "append_response":
        return this.handleAppendResponse(m);
      case "heartbeat_response": {
        const pr = this.progress.get(m.from);
        if (pr === undefined) return this.drop(m, "response_from_non_member");
        pr.recentActive = true;
        pr.heardAtTick = this.ticks;
        if (m.diskFull === true) {
          // Alive (this counts for check-quorum and confirms reads) but unable to persist:
          // nothing is sent to it until it has room, and writes know it cannot help commit.
          this.setPeerDiskFull(m.from, pr, true);
        } else {
          this.setPeerDiskFull(m.from, pr, false);
          if (!pr.probeIsFresh(this.ticks, this.opts.heartbeatTicks)) pr.probeSent = false;
          // The follower is alive but the window is full: the appends in it may all have been
          // lost. Free one slot so that the next append goes out; if the follower lacks what it
          // follows, its rejection sends this progress back to probing.
          if (pr.state === "replicate" && pr.inflights.full()) pr.inflights.freeFirstOne();
          // A member in probe (unreachable for a while, perhaps restarted) is probed even when
          // it matched the whole log: only its answer shows whether it still holds it.
          if (pr.match < this.log.lastIndex() || pr.state === "probe") this.sendAppends(m.from, true);
        }
        if (m.readSeq > this.reads.currentSeq()) return this.drop(m, "read_seq_never_sent");
        if (m.readSeq > 0) {
          for (const read of this.reads.ack(this.id, m.from, m.readSeq, this.membership().voters)) this.deliverRead(read);
        }
        return;
      }
      case "read_index":
        if (this.startOrQueueRead(m.requestId, m.from) !== "ok") this.drop(m, "read_index_full");
        return;
      case "append":
      case "heartbeat":
      case "snapshot":
        this.logger.error("another leader in this term: election safety is broken", { term: this.term, other: m.from });
        return this.drop(m, "two_leaders_in_term");
      default:
        return this.drop(m, `${m.type}_as_leader`);
    }
  }

  // ─── follower side of replication ────────────────────────────────────────────────────

  private handleAppend(m: AppendMessage): void {
    const log = this.log;
    // Entries at or below the commit index match any leader's (Leader Completeness): one that
    // differs is of another history (see divergedAt), and nothing of the append is taken.
    const differing = this.committedEntryDiffering(m);
    if (differing !== null) {
      this.logger.error("leader's entries conflict with committed ones", { conflict: differing, commit: log.commit, from: m.from });
      this.divergedAt ??= { leader: m.from, term: m.term, index: differing, commit: log.commit };
      return this.drop(m, "conflict_below_commit");
    }
    if (m.prevIndex < log.commit) {
      if (this.tracing) this.logger.trace("append starts below the commit index: acknowledged up to it", { from: m.from, prevIndex: m.prevIndex, commit: log.commit });
      // Everything up to commit already matches the leader's log.
      return this.respondAppend(m.from, false, log.commit);
    }
    if (!log.matchTerm(m.prevIndex, m.prevTerm)) {
      const hint = log.findConflictByTerm(Math.min(m.prevIndex, log.lastIndex()), m.prevTerm);
      if (this.tracing) {
        this.logger.trace("append rejected: this log does not hold the entry it follows", {
          from: m.from, prevIndex: m.prevIndex, prevTerm: m.prevTerm, heldTerm: log.term(m.prevIndex) ?? null, lastIndex: log.lastIndex(), hintIndex: hint.index, hintTerm: hint.term,
        });
      }
      this.send(m.from, this.term, {
        type: "append_response",
        reject: true,
        index: m.prevIndex,
        hintIndex: hint.index,
        hintTerm: hint.term,
      });
      return;
    }
    const lastNewIndex = m.prevIndex + m.entries.length;
    const conflict = log.findConflict(m.entries);
    if (conflict !== 0) {
      // Past the commit index here (prevIndex >= commit): committedEntryDiffering saw the rest.
      const fresh = m.entries.slice(conflict - m.prevIndex - 1);
      if (this.tracing && conflict <= log.lastIndex()) this.logger.trace("entries that differ from the leader's removed", { from: m.from, first: conflict, last: log.lastIndex() });
      if (conflict <= log.lastIndex()) this.members.onTruncate(conflict);
      log.truncateAndAppend(fresh);
      this.members.onAppend(fresh, (e) => this.reportMalformedConfig(e));
    }
    if (this.tracing) {
      this.logger.trace("append accepted", {
        from: m.from, prevIndex: m.prevIndex, entries: m.entries.length, last: lastNewIndex, appended: conflict === 0 ? 0 : lastNewIndex - conflict + 1, commit: m.commit,
      });
    }
    this.commitTo(Math.min(m.commit, lastNewIndex));
    this.respondAppend(m.from, false, lastNewIndex);
  }

  /**
   * The first index at or below commit where `m` (its previous entry, or one it carries) differs
   * from this log; null: none. Below the log's first entry (compacted into a snapshot or the
   * store) the terms are gone, but not the one at the log's base: terms never fall along a
   * log, so a leader's entry of a later term than a committed entry after it cannot be of
   * the same history. That catches a node left out of a restore, whose commit index is past
   * the restored leader's log: the leader's probes all fall below it.
   */
  private committedEntryDiffering(m: AppendMessage): number | null {
    const commit = this.log.commit;
    const differs = (index: number, term: number): number | null => {
      if (index > commit) return null;
      const held = this.log.term(index);
      if (held !== undefined) return held === term ? null : index;
      const base = this.log.firstIndex() - 1;
      const baseTerm = this.log.term(base);
      // This log's entry at `index` has a term at most the base's, so not the leader's `term`.
      return base > index && base <= commit && baseTerm !== undefined && term > baseTerm ? index : null;
    };
    const atPrev = differs(m.prevIndex, m.prevTerm);
    if (atPrev !== null) return atPrev;
    for (const e of m.entries) {
      if (e.index > commit) break;
      const at = differs(e.index, e.term);
      if (at !== null) return at;
    }
    return null;
  }

  private respondAppend(to: NodeId, reject: boolean, index: number): void {
    this.send(to, this.term, { type: "append_response", reject, index, hintIndex: 0, hintTerm: 0 });
  }

  private handleHeartbeat(m: HeartbeatMessage): void {
    // The leader caps commit at what it knows we hold, so it exceeds our log only when we
    // lost entries we acknowledged (an emptied WAL, a rebuilt node). Say so: on a quiet
    // cluster no new entry would ever make the leader look at our log again. The rejection
    // names the index the leader believes we hold and our last one, as a probe's would.
    const lastIndex = this.log.lastIndex();
    if (m.commit > lastIndex) {
      this.drop(m, "heartbeat_commit_beyond_log");
      this.send(m.from, this.term, { type: "append_response", reject: true, index: m.commit, hintIndex: lastIndex, hintTerm: this.log.lastTerm() });
    } else {
      this.commitTo(m.commit);
    }
    this.send(m.from, this.term, { type: "heartbeat_response", readSeq: m.readSeq });
  }

  private handleSnapshot(m: SnapshotMessage): void {
    const meta = m.snapshot;
    const log = this.log;
    if (meta.index <= log.commit) {
      if (this.tracing) this.logger.trace("snapshot not installed: the commit index is past it", { from: m.from, index: meta.index, commit: log.commit });
      return this.respondAppend(m.from, false, log.commit);
    }
    if (log.matchTerm(meta.index, meta.term)) {
      if (this.tracing) this.logger.trace("snapshot not installed: the log holds its last entry", { from: m.from, index: meta.index, term: meta.term });
      // We already hold the snapshot's last entry, so everything up to it matches.
      this.commitTo(meta.index);
      return this.respondAppend(m.from, false, meta.index);
    }
    this.logger.info("installing snapshot from leader", { index: meta.index, term: meta.term, from: m.from });
    this.members.onTruncate(0);
    this.members.onSnapshot(meta);
    log.restore(meta);
    // The node replaces its state machine with the snapshot: nothing at or below it is applied from the log.
    this.applyingIndex = meta.index;
    this.respondAppend(m.from, false, meta.index);
  }

  private commitTo(index: number): void {
    const before = this.log.commit;
    if (!this.log.commitTo(index)) return;
    if (this.tracing) this.logger.trace("commit index advanced", { from: before, to: this.log.commit });
    if (this.role === "leader") this.onLeaderCommit();
  }

  // ─── leader side of replication ──────────────────────────────────────────────────────

  private appendEntry(kind: Entry["kind"], data: Uint8Array, timestampMs: number): Entry {
    const e: Entry = { term: this.term, index: this.log.lastIndex() + 1, kind, timestampMs, data };
    this.log.append([e]);
    this.appendsDirty = true;
    if (kind === "config") {
      this.members.onAppend([e], (bad) => this.reportMalformedConfig(bad));
      this.syncProgress();
      this.maybeCommit(); // the quorum changed
    }
    // A one-voter leader commits as soon as the node persisted the entry (see advance()).
    return e;
  }

  /**
   * Make the progress map match the membership (leader only). A member that the latest,
   * uncommitted config removes keeps receiving the log until that config commits, so that
   * it learns of its removal and stops campaigning; it no longer counts for the quorum.
   */
  private syncProgress(): void {
    if (this.role !== "leader") return;
    const m = this.membership();
    const members = new Set([...allMembers(m), ...allMembers(this.members.at(this.log.commit))]);
    for (const id of [...this.progress.keys()]) if (!members.has(id)) this.progress.delete(id);
    for (const id of members) {
      if (this.progress.has(id)) continue;
      const pr = new Progress(this.log.lastIndex() + 1, this.opts.maxInflightAppends, this.opts.maxInflightBytes);
      if (id === this.id) {
        pr.match = this.log.persistedIndex;
        pr.becomeReplicate();
        pr.next = this.log.lastIndex() + 1;
        pr.recentActive = true;
      }
      this.progress.set(id, pr);
    }
    if (this.leadTransferee !== null && !isVoter(m, this.leadTransferee)) this.leadTransferee = null;
  }

  private matchOf(id: NodeId): number {
    if (id === this.id) return this.log.persistedIndex;
    return this.progress.get(id)?.match ?? 0;
  }

  /** Leader: advance commit to the highest index a quorum holds, if it is of this term (§5.4.2). */
  private maybeCommit(): boolean {
    const q = quorumIndex(this.membership().voters, (id) => this.matchOf(id));
    if (q <= this.log.commit || this.log.term(q) !== this.term) return false;
    this.commitTo(q);
    this.appendsDirty = true; // followers learn the new commit with the next appends
    return true;
  }

  private onLeaderCommit(): void {
    if (this.committedInTerm() && this.waitingReads.length > 0) {
      const waiting = this.waitingReads;
      this.waitingReads = [];
      for (const w of waiting) this.startRead(w.requestId, w.from);
    }
    const m = this.membership();
    if (this.progress.size > allMembers(m).length) this.syncProgress(); // a removal committed
    if (!isVoter(m, this.id) && this.members.latestConfigIndex() <= this.log.commit) {
      // Hand over rather than leave the voters to wait out an election timeout: a voter that
      // holds the whole log (the removal included) campaigns at once, as in a transfer.
      const successor = this.successorAfterRemoval(m);
      this.logger.info("stepping down: this node was removed from the voters", { term: this.term, successor });
      if (successor !== null) this.send(successor, this.term, { type: "timeout_now" });
      this.becomeFollower(this.term, null);
    }
  }

  /** The first voter (by id) of `m` that holds this leader's whole log and can take writes; null if none. */
  private successorAfterRemoval(m: Membership): NodeId | null {
    const last = this.log.lastIndex();
    for (const id of [...m.voters].sort()) {
      const pr = this.progress.get(id);
      if (id !== this.id && pr !== undefined && pr.match === last && pr.recentActive && !pr.diskFull) return id;
    }
    return null;
  }

  private committedInTerm(): boolean {
    return this.log.term(this.log.commit) === this.term;
  }

  private handleAppendResponse(m: AppendResponseMessage): void {
    const pr = this.progress.get(m.from);
    if (pr === undefined) return this.drop(m, "response_from_non_member");
    pr.recentActive = true;
    pr.heardAtTick = this.ticks;
    // Its core speaks only once its loop is no longer stalled: its disk has room again.
    this.setPeerDiskFull(m.from, pr, false);
    if (m.reject) {
      let nextProbe = m.hintIndex;
      if (m.hintTerm > 0) nextProbe = this.log.findConflictByTerm(m.hintIndex, m.hintTerm).index;
      if (m.index <= pr.match && pr.state !== "snapshot") return this.handleRejectBelowMatch(m.from, pr, m.index, nextProbe);
      if (pr.maybeDecrTo(m.index, nextProbe)) {
        if (this.tracing) this.logger.trace("member lacks the entry an append followed: probing back", { member: m.from, rejected: m.index, match: pr.match, next: pr.next, was: pr.state });
        if (pr.state === "replicate") pr.becomeProbe();
        this.sendAppends(m.from, true);
      }
      return;
    }
    if (m.index > this.log.lastIndex()) return this.drop(m, "ack_beyond_log");
    const wasPaused = pr.isPaused();
    // A probe accepted at match says nothing new about the log, but that the member still holds it.
    const probeConfirmed = pr.state === "probe" && m.index === pr.match && pr.next === pr.match + 1;
    if (!pr.maybeUpdate(m.index) && !probeConfirmed) return;
    if (pr.state === "probe" || (pr.state === "snapshot" && pr.match >= pr.pendingSnapshot)) {
      if (this.tracing) this.logger.trace("member holds the log up to its match: replicating to it", { member: m.from, match: pr.match, was: pr.state });
      if (pr.state === "snapshot") pr.becomeProbe();
      pr.becomeReplicate();
    } else if (pr.state === "replicate") {
      pr.inflights.freeLE(m.index);
    }
    if (this.maybeCommit()) {
      this.bcastAppend();
    } else if (wasPaused || pr.state === "replicate") {
      this.sendAppends(m.from, false);
    }
    if (this.role !== "leader") return; // a committed removal of ourselves
    if (m.from === this.leadTransferee && pr.match === this.log.lastIndex()) {
      this.logger.info("leadership transfer: target caught up, sending timeout_now", { to: m.from });
      this.send(m.from, this.term, { type: "timeout_now" });
    }
  }

  /**
   * The member says it lacks an index it acknowledged. Either the answer is stale (it lacked
   * the index when it answered, not now) or the member lost its log (an emptied WAL, a
   * rebuilt node). A probe at match tells the two apart: accepted, nothing changes; rejected,
   * the member no longer holds what it matched, and the leader probes down from its last index.
   */
  private handleRejectBelowMatch(from: NodeId, pr: Progress, rejectedIndex: number, nextProbe: number): void {
    if (pr.state === "probe" && rejectedIndex === pr.match && pr.next === pr.match + 1) {
      // Also reached by a rejection delayed past the acknowledgement that set match (a
      // reordering network): the member then accepts the probe, and the cost is a round
      // trip (a snapshot if the leader compacted past the member's old last index).
      this.logger.info("member no longer holds entries it acknowledged (log emptied or rebuilt); probing it from its last index", { member: from, match: pr.match, lastIndex: nextProbe });
      pr.forgetMatch(Math.min(nextProbe, rejectedIndex - 1));
    } else if (pr.state === "replicate") {
      pr.becomeProbe();
    }
    this.sendAppends(from, true);
  }

  private bcastAppend(): void {
    this.appendsDirty = false;
    for (const id of this.progress.keys()) if (id !== this.id) this.sendAppends(id, true);
  }

  private bcastHeartbeat(): void {
    const readSeq = this.reads.currentSeq();
    for (const [id, pr] of this.progress) {
      if (id === this.id) continue;
      this.send(id, this.term, { type: "heartbeat", commit: Math.min(pr.match, this.log.commit), readSeq });
    }
  }

  /** Send to one follower what it needs: one append (possibly empty), then pipeline more while allowed. */
  private sendAppends(to: NodeId, sendIfEmpty: boolean): void {
    const pr = this.progress.get(to);
    if (pr === undefined) return;
    if (!this.sendAppend(to, pr, sendIfEmpty)) return;
    while (pr.state === "replicate" && pr.next <= this.log.lastIndex() && this.sendAppend(to, pr, false)) {
      // pipelining: bounded by maxInflightAppends through pr.isPaused()
    }
  }

  private sendAppend(to: NodeId, pr: Progress, sendIfEmpty: boolean): boolean {
    if (pr.isPaused()) return false;
    const prevIndex = pr.next - 1;
    const prevTerm = this.log.term(prevIndex);
    const entries = this.log.slice(pr.next, this.log.lastIndex(), this.opts.maxEntriesPerAppend, this.opts.maxBytesPerAppend);
    if (prevTerm === undefined || entries === undefined) {
      if (this.opts.catchUpFromLogStore === true && prevIndex > this.logStoreMissingThrough) return this.requestFetch(to, pr);
      return this.sendSnapshot(to, pr);
    }
    if (entries.length === 0 && !sendIfEmpty) return false;
    this.sendAppendOf(to, pr, prevIndex, prevTerm, entries);
    return true;
  }

  private sendAppendOf(to: NodeId, pr: Progress, prevIndex: number, prevTerm: number, entries: readonly Entry[]): void {
    this.send(to, this.term, { type: "append", prevIndex, prevTerm, entries, commit: this.log.commit });
    let sizeBytes = 0;
    for (const e of entries) sizeBytes += e.data.length;
    pr.sentAppend(entries.length, entries.at(-1)?.index ?? prevIndex, sizeBytes, this.ticks);
  }

  /**
   * The member needs entries compacted from memory: ask the node to read them back from the
   * log store, as much as the in-flight window has room for, and at most two appends' worth
   * (one in probe), so that handling an answer encodes little in one turn; the next read is
   * asked for as soon as this one is sent, while the window has room. The answer comes
   * through fetched(); until then nothing else is sent to the member.
   */
  private requestFetch(to: NodeId, pr: Progress): boolean {
    const through = this.log.snapshotIndex();
    assert(pr.next <= through, "only compacted entries are read back from the log store");
    const appendsMax = pr.state === "replicate" ? Math.max(1, Math.min(fetchAppendsMax, pr.inflights.slotsFree())) : 1;
    const bytesMax = Math.max(1, Math.min(pr.state === "replicate" ? pr.inflights.bytesFree() : Number.POSITIVE_INFINITY, appendsMax * this.opts.maxBytesPerAppend));
    const fetch: LogFetch = { seq: ++this.fetchSeq, to, from: Math.max(1, pr.next - 1), through, bytesMax };
    if (this.logger.enabled("debug")) this.logger.debug("reading entries back from the log store for a member behind the in-memory log", { to, from: fetch.from, through });
    pr.fetching = fetch.seq;
    this.fetches.push(fetch);
    return true;
  }

  /**
   * The node's answer to a LogFetch: the entries read (from fetch.from on), or null when the
   * log store no longer holds fetch.from. An answer the member's progress no longer waits
   * for (another request since, a change of state or term) is ignored. The entries become
   * appends while the member's window allows; a member the store cannot serve gets a snapshot.
   */
  fetched(fetch: LogFetch, entries: readonly Entry[] | null): void {
    if (this.role !== "leader") return;
    const pr = this.progress.get(fetch.to);
    if (pr === undefined || pr.fetching !== fetch.seq) return;
    pr.fetching = 0;
    if (entries === null) {
      this.logStoreMissingThrough = Math.max(this.logStoreMissingThrough, fetch.from);
      this.logger.info("the log store no longer holds what a member needs: it gets a snapshot", { to: fetch.to, from: fetch.from });
      this.sendAppends(fetch.to, true);
      return;
    }
    const problem = fetchedProblem(fetch, entries, this.log.snapshot(), this.term);
    if (problem !== null) {
      this.logger.error("entries read back from the log store are not the log: the member gets a snapshot", { to: fetch.to, from: fetch.from, problem });
      this.logStoreMissingThrough = Math.max(this.logStoreMissingThrough, fetch.through);
      this.sendAppends(fetch.to, true);
      return;
    }
    if (pr.next - 1 === fetch.from || (fetch.from === 1 && pr.next === 1)) this.sendFetched(fetch.to, pr, entries);
    // Whatever the read did not cover comes from memory, or from the next read.
    this.sendAppends(fetch.to, false);
  }

  /** Appends from entries read back for the member, while its window has room. */
  private sendFetched(to: NodeId, pr: Progress, fetched: readonly Entry[]): void {
    let at = 0;
    let prevIndex = pr.next - 1;
    let prevTerm: number;
    if (fetched[0]?.index === prevIndex) {
      prevTerm = fetched[0].term;
      at = 1;
    } else {
      assert(prevIndex === 0, "a read starts at the append's prevIndex, or at 1");
      prevTerm = 0;
    }
    while (at < fetched.length && !pr.isPaused()) {
      const batch: Entry[] = [];
      let bytes = 0;
      while (at < fetched.length && batch.length < this.opts.maxEntriesPerAppend) {
        const e = fetched[at]!;
        const size = entrySizeBytes(e);
        if (batch.length > 0 && bytes + size > this.opts.maxBytesPerAppend) break;
        bytes += size;
        batch.push(e);
        at++;
      }
      this.sendAppendOf(to, pr, prevIndex, prevTerm, batch);
      const last = batch.at(-1)!;
      prevIndex = last.index;
      prevTerm = last.term;
      if (pr.state !== "replicate") break; // probe: one append, then wait for its answer
    }
  }

  private sendSnapshot(to: NodeId, pr: Progress): boolean {
    // Streaming a snapshot is costly: only to a member that has answered recently.
    if (!pr.recentActive) return false;
    const snap = this.log.snapshot();
    assert(snap !== null, "entries are compacted only behind a snapshot");
    this.logger.info("member needs a snapshot", { to, index: snap.index, term: snap.term });
    pr.becomeSnapshot(snap.index);
    this.send(to, this.term, { type: "snapshot", snapshot: snap });
    return true;
  }

  // ─── client requests ─────────────────────────────────────────────────────────────────

  propose(data: Uint8Array, timestampMs: number): ProposeResult {
    const refusal = this.proposalRefusal();
    if (refusal !== null) return refusal;
    const e = this.appendEntry("normal", data, timestampMs);
    return { ok: true, index: e.index, term: e.term };
  }

  private proposalRefusal(): Exclude<ProposeResult, { ok: true }> | null {
    if (this.role !== "leader") return { ok: false, code: "NOT_LEADER", leaderId: this.leaderId };
    // While handing over, new entries would only delay the target catching up.
    if (this.leadTransferee !== null) return { ok: false, code: "NOT_LEADER", leaderId: null };
    if (this.log.lastIndex() - this.log.commit >= this.opts.maxPendingProposals) return { ok: false, code: "PROPOSALS_FULL" };
    return null;
  }

  proposeMembership(change: MembershipChange, timestampMs: number): MembershipChangeResult {
    const refusal = this.proposalRefusal();
    if (refusal !== null) return refusal;
    // One change at a time, and only once this leader committed an entry of its term: a
    // leader that has not may still hold an uncommitted change of a previous leader.
    if (this.members.latestConfigIndex() > this.log.commit || !this.committedInTerm()) {
      return { ok: false, code: "CHANGE_IN_PROGRESS" };
    }
    const next = applyChange(this.membership(), change);
    if (!next.ok) return { ok: false, code: "INVALID_CHANGE", reason: next.reason };
    const notReady = change.kind === "promote" ? this.learnerNotReady(change.id) : null;
    if (notReady !== null) return { ok: false, code: "INVALID_CHANGE", reason: notReady };
    const unreachable = this.unreachableQuorum(next.membership.voters);
    if (unreachable !== null) return { ok: false, code: "INVALID_CHANGE", reason: unreachable };
    this.logger.info("proposing membership change", { change: change.kind, id: change.id });
    const e = this.appendEntry("config", encodeMembership(next.membership), timestampMs);
    return { ok: true, index: e.index, term: e.term };
  }

  readIndex(requestId: number): ReadIndexResult {
    if (this.role === "leader") return this.startOrQueueRead(requestId, this.id) === "ok" ? { ok: true } : { ok: false, code: "READS_FULL" };
    if (this.role === "follower" && this.leaderId !== null) {
      this.send(this.leaderId, this.term, { type: "read_index", requestId });
      return { ok: true };
    }
    return { ok: false, code: "NOT_LEADER", leaderId: this.leaderId };
  }

  private startOrQueueRead(requestId: number, from: NodeId): "ok" | "full" {
    if (this.reads.size() + this.waitingReads.length >= this.opts.maxPendingProposals) return "full";
    if (!this.committedInTerm()) this.waitingReads.push({ requestId, from });
    else this.startRead(requestId, from);
    return "ok";
  }

  private startRead(requestId: number, from: NodeId): void {
    const voters = this.membership().voters;
    if (voters.length === 1 && voters[0] === this.id) {
      this.deliverRead({ requestId, from, index: this.log.commit, seq: 0 });
      return;
    }
    this.reads.add(requestId, from, this.log.commit);
    this.bcastHeartbeat();
  }

  private deliverRead(read: PendingRead): void {
    if (read.from === this.id) this.readStates.push({ requestId: read.requestId, index: read.index });
    else this.send(read.from, this.term, { type: "read_index_response", requestId: read.requestId, index: read.index });
  }

  transferLeadership(to: NodeId): TransferResult {
    if (this.role !== "leader") return { ok: false, code: "NOT_LEADER", leaderId: this.leaderId };
    if (to === this.id) {
      // What was asked for holds. A transfer away in progress is called off: the latest request
      // wins (as etcd's), and proposals are taken again at once.
      if (this.leadTransferee !== null) {
        this.logger.info("leadership transfer called off: asked to stay leader", { to: this.leadTransferee });
        this.leadTransferee = null;
      }
      return { ok: true };
    }
    if (!isVoter(this.membership(), to)) {
      return { ok: false, code: "INVALID_TRANSFER", reason: isLearner(this.membership(), to) ? `${to} is a learner: promote it first` : `${to} is not a member of the cluster` };
    }
    if (this.progress.get(to)?.diskFull === true) return { ok: false, code: "INVALID_TRANSFER", reason: `${to}'s disk is full: it could not take writes` };
    if (this.leadTransferee === to) return { ok: true };
    this.leadTransferee = to;
    // The transfer is abandoned after one election timeout (tickLeader).
    this.electionElapsed = 0;
    this.logger.info("leadership transfer started", { to });
    const pr = this.progress.get(to);
    assert(pr !== undefined, "every voter has progress on the leader");
    if (pr.match === this.log.lastIndex()) this.send(to, this.term, { type: "timeout_now" });
    else this.sendAppends(to, true);
    return { ok: true };
  }

  // ─── node feedback ───────────────────────────────────────────────────────────────────

  reportSnapshot(peer: NodeId, ok: boolean): void {
    if (this.role !== "leader") return;
    const pr = this.progress.get(peer);
    if (pr === undefined || pr.state !== "snapshot") return;
    if (!ok) pr.pendingSnapshot = 0;
    pr.becomeProbe();
    // Success: wait for the follower's response to the installed snapshot. Failure: retry
    // after the next heartbeat response rather than at once.
    pr.probeSent = true;
    pr.probeSentAtTick = this.ticks;
    this.logger.info("snapshot send finished", { peer, ok });
  }

  /**
   * The oldest image a member waiting for a snapshot may be sent. Reading entries back from the
   * log store, any image will do past what the store said it no longer holds: the member is
   * caught up from the image on by reads. Otherwise the image must reach where the in-memory
   * log starts.
   */
  snapshotFloor(): number {
    const compacted = this.log.snapshotIndex();
    if (this.opts.catchUpFromLogStore !== true) return compacted;
    return Math.min(compacted, this.logStoreMissingThrough + 1);
  }

  /** The node sends `peer` the image at `index` (at or past snapshotFloor): its progress waits for that. */
  snapshotChosen(peer: NodeId, index: number): void {
    if (this.role !== "leader") return;
    const pr = this.progress.get(peer);
    if (pr === undefined || pr.state !== "snapshot") return;
    if (this.tracing) this.logger.trace("snapshot image chosen for a member", { member: peer, index });
    pr.pendingSnapshot = index;
  }

  reportUnreachable(peer: NodeId): void {
    if (this.role !== "leader") return;
    const pr = this.progress.get(peer);
    if (pr !== undefined && pr.state === "replicate") pr.becomeProbe();
  }

  /** The node took a local snapshot at meta.index (<= applied): entries up to it are dropped. */
  compact(meta: SnapshotMeta): void {
    assert(meta.index <= this.applied, "only applied entries are compacted");
    if (meta.index <= this.log.snapshotIndex()) return;
    assert(membershipEquals(meta.membership, this.members.at(meta.index)), "snapshot membership is the one in force at its index");
    this.log.compact(meta);
    this.members.onSnapshot(meta);
    // Snapshot messages not yet handed out name the snapshot this one replaces, which the
    // node may no longer hold: point them at the new one.
    this.msgs = this.msgs.map((m) => {
      if (m.type !== "snapshot") return m;
      const pr = this.progress.get(m.to);
      if (pr !== undefined && pr.state === "snapshot") pr.pendingSnapshot = meta.index;
      return { ...m, snapshot: meta };
    });
  }

  /** The membership in force at index (the latest config entry at or before it); for snapshot metadata. */
  membershipAt(index: number): Membership {
    return this.members.at(index);
  }

  // ─── Ready ───────────────────────────────────────────────────────────────────────────

  hasReady(): boolean {
    if (this.outstanding !== null) return false;
    return (
      this.appendsDirty ||
      this.log.hasUnstable() ||
      this.log.pendingSnapshot !== null ||
      this.msgs.length > 0 ||
      this.fetches.length > 0 ||
      this.readStates.length > 0 ||
      this.hardStateChanged() ||
      this.log.commit > this.applyingIndex
    );
  }

  ready(): Ready {
    assert(this.outstanding === null, "advance() the previous Ready before taking the next");
    if (this.appendsDirty && this.role === "leader") this.bcastAppend();
    this.appendsDirty = false;
    const snapshot = this.log.pendingSnapshot;
    this.log.pendingSnapshot = null;
    const entries = this.log.takeUnstable();
    const hs = this.hardState();
    const termOrVoteChanged = hs.term !== this.prevHardState.term || hs.vote !== this.prevHardState.vote;
    const hardState = termOrVoteChanged || hs.commit !== this.prevHardState.commit ? hs : null;
    this.prevHardState = hs;
    const committed = this.takeCommitted();
    const rd: Ready = {
      hardState,
      entries,
      snapshot,
      messages: this.msgs,
      committed,
      readStates: this.readStates,
      fetches: this.fetches,
      mustSync: entries.length > 0 || snapshot !== null || termOrVoteChanged,
    };
    this.msgs = [];
    this.readStates = [];
    this.fetches = [];
    this.outstanding = rd;
    if (this.tracing) this.traceReady(rd, termOrVoteChanged);
    return rd;
  }

  /** What a Ready asks the node to persist and apply, at trace level. */
  private traceReady(rd: Ready, termOrVoteChanged: boolean): void {
    if (rd.snapshot !== null) this.logger.trace("installing a snapshot", { index: rd.snapshot.index, term: rd.snapshot.term });
    if (termOrVoteChanged && rd.hardState !== null) this.logger.trace("saving term and vote", { term: rd.hardState.term, vote: rd.hardState.vote });
    const firstNew = rd.entries[0];
    if (firstNew !== undefined) {
      this.logger.trace("appending entries to the log", { first: firstNew.index, last: rd.entries.at(-1)?.index, count: rd.entries.length, term: firstNew.term, sync: rd.mustSync });
    }
    const firstCommitted = rd.committed[0];
    if (firstCommitted !== undefined) {
      this.logger.trace("entries committed, applying", { first: firstCommitted.index, last: rd.committed.at(-1)?.index, count: rd.committed.length, commit: this.log.commit });
    }
  }

  private takeCommitted(): Entry[] {
    if (this.log.commit <= this.applyingIndex) return [];
    const max = this.opts.maxCommittedEntriesPerReady ?? defaultMaxCommittedEntriesPerReady;
    const out = this.log.slice(this.applyingIndex + 1, this.log.commit, max, Number.POSITIVE_INFINITY);
    assert(out !== undefined, "committed entries not yet applied are still in the log");
    const last = out.at(-1);
    if (last !== undefined) this.applyingIndex = last.index;
    return out;
  }

  advance(rd: Ready): void {
    assert(rd === this.outstanding, "advance() takes the Ready last returned by ready()");
    this.outstanding = null;
    if (rd.snapshot !== null) {
      this.log.snapshotPersisted(rd.snapshot);
      this.applied = Math.max(this.applied, rd.snapshot.index);
    }
    this.log.persisted(rd.entries);
    this.settleRemoval();
    const lastApplied = rd.committed.at(-1);
    if (lastApplied !== undefined) this.applied = Math.max(this.applied, lastApplied.index);
    if (this.role === "leader") {
      // Self-ack: the leader's own copy counts toward the quorum only once it is durable.
      const self = this.progress.get(this.id);
      if (self !== undefined) self.maybeUpdate(this.log.persistedIndex);
      if (this.maybeCommit() && this.role === "leader") this.bcastAppend();
    }
  }

  private hardState(): HardState {
    return { term: this.term, vote: this.vote, commit: this.log.commit };
  }

  private hardStateChanged(): boolean {
    const p = this.prevHardState;
    return p.term !== this.term || p.vote !== this.vote || p.commit !== this.log.commit;
  }

  // ─── status ──────────────────────────────────────────────────────────────────────────

  /** A leader sent entries that differ from ones this node committed (see divergedAt); null: never. */
  divergence(): Divergence | null {
    return this.divergedAt;
  }

  /** The current term, without building a status (asked on every write). */
  currentTerm(): number {
    return this.term;
  }

  /** Whether this node leads, without building a status (asked on every write). */
  isLeader(): boolean {
    return this.role === "leader";
  }

  status(): RaftStatus {
    const progress: Record<NodeId, PeerProgress> = {};
    const m = this.membership();
    for (const [id, pr] of this.progress) {
      progress[id] = {
        match: id === this.id ? this.log.persistedIndex : pr.match,
        next: pr.next,
        state: pr.state,
        inflight: pr.inflights.count(),
        recentActive: pr.recentActive,
        diskFull: pr.diskFull,
        learner: isLearner(m, id),
        ticksSinceHeard: id === this.id ? 0 : Math.min(Number.MAX_SAFE_INTEGER, this.ticks - pr.heardAtTick),
      };
    }
    return {
      id: this.id,
      role: this.role,
      term: this.term,
      vote: this.vote,
      leaderId: this.leaderId,
      commit: this.log.commit,
      applied: this.applied,
      lastIndex: this.log.lastIndex(),
      lastTerm: this.log.lastTerm(),
      persistedIndex: this.log.persistedIndex,
      snapshotIndex: this.log.snapshotIndex(),
      membership: m,
      progress,
      leadTransferee: this.leadTransferee,
      pendingReadCount: this.reads.size() + this.waitingReads.length,
      droppedMessages: Object.fromEntries(this.dropped),
    };
  }

  /**
   * Whether this node is a member of any configuration it holds (its snapshot's, or one in its
   * log): false for a new member still copying the log from before it was added.
   */
  namedInMembership(): boolean {
    return this.members.named(this.id);
  }

  /** The latest membership in the log (config entries count from when they are appended); the same object until it changes. */
  currentMembership(): Membership {
    return this.members.current();
  }

  private membership(): Membership {
    return this.members.current();
  }

  // ─── helpers ─────────────────────────────────────────────────────────────────────────

  private send(to: NodeId, term: number, payload: Payload): void {
    this.msgs.push({ ...payload, from: this.id, to, term } as Message);
  }

  private drop(m: Message, reason: string): void {
    this.dropped.set(reason, (this.dropped.get(reason) ?? 0) + 1);
    if (this.logger.enabled("debug")) {
      this.logger.debug("dropped message", { reason, type: (m as { type?: unknown }).type, from: (m as { from?: unknown }).from, term: (m as { term?: unknown }).term });
    }
  }

  private reportMalformedConfig(e: Entry): void {
    this.dropped.set("malformed_config_entry", (this.dropped.get("malformed_config_entry") ?? 0) + 1);
    this.logger.error("config entry with unreadable membership ignored", { index: e.index, term: e.term });
  }
}

/**
 * Why entries read back from the log store cannot be sent as the leader's log, or null when
 * they can: they start at the read's first index, are contiguous, stay within what was
 * asked, have terms that never decrease nor pass the leader's, and meet the compaction
 * point with its term.
 */
function fetchedProblem(fetch: LogFetch, entries: readonly Entry[], snapshot: SnapshotMeta | null, term: number): string | null {
  if (entries.length === 0) return "no entries";
  if (entries[0]!.index !== fetch.from) return `starts at ${entries[0]!.index}, not ${fetch.from}`;
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!;
    if (e.index !== fetch.from + i) return `entry ${i} has index ${e.index}`;
    if (e.index > fetch.through) return `entry ${e.index} is past ${fetch.through}`;
    if (e.term > term) return `entry ${e.index} has term ${e.term}, past the leader's ${term}`;
    if (i > 0 && e.term < entries[i - 1]!.term) return `entry ${e.index} has a term below its predecessor's`;
    if (snapshot !== null && e.index === snapshot.index && e.term !== snapshot.term) return `entry ${e.index} has term ${e.term}, the compaction point ${snapshot.term}`;
  }
  return null;
}

/** Checks what the node loaded before the core builds on it; damage is an operator-facing error. */
function checkLoadedState(state: RaftState): void {
  const bad = (what: string): never => {
    throw new SvcError("RAFT_STATE_INVALID", `loaded Raft state is inconsistent: ${what}`, {
      hint: "the WAL or hard state is damaged; run wal-repair or restore this node from a healthy member",
    });
  };
  const first = (state.snapshot?.index ?? 0) + 1;
  let prevTerm = state.snapshot?.term ?? 0;
  state.entries.forEach((e, i) => {
    if (e.index !== first + i) bad(`entry ${i} has index ${e.index}, expected ${first + i}`);
    if (e.term < prevTerm) bad(`entry ${e.index} has term ${e.term} below its predecessor's ${prevTerm}`);
    if (e.term > state.hardState.term) bad(`entry ${e.index} has term ${e.term} beyond the saved term ${state.hardState.term}`);
    prevTerm = e.term;
  });
}
