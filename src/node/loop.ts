// The effect loop: the one place that turns the Raft core's Ready into effects, in this
// order for each Ready:
//   install snapshot → append entries to the log store → save term/vote → sync (once, for
//   every record of the batch: group commit) → send messages → apply committed → answer
//   clients → advance.
// A client is answered only after its entry was synced on a quorum and applied. The loop
// also owns the tick timer and the recovery flow's progress (recovery.ts decides the edges).
//
// A full disk stops the loop, not the node (disk-guard.ts): a Ready that fails for want of
// space is retried, and nothing after it — no message claiming its entries, no answer, no
// advance — happens until it succeeds. Messages to and from peers: peer-messages.ts.

import type { Divergence, Entry, Membership, Ready, SnapshotMeta } from "../raft/index.ts";
import { commitDelayMs, type CommitPolicy, type Store } from "../store/index.ts";
import { isDiskFullError, type Timer } from "../io/index.ts";
import { assert } from "../util/assert.ts";
import { SvcError, errorMessage } from "../util/errors.ts";
import type { NodeContext } from "./context.ts";
import { CatchUpPriority } from "./catch-up-priority.ts";
import { DiskGuard, type Stage } from "./disk-guard.ts";
import { PeerMessages } from "./peer-messages.ts";
import { ReadBarriers } from "./reads.ts";
import type { SnapshotPolicy } from "./snapshot-policy.ts";
import type { SnapshotTransfer } from "./snapshot-transfer.ts";
import { lostLogQuorumText } from "./lost-log-quorum.ts";
import { WalArchiver } from "./wal-archiver.ts";

const writeTimeoutMs = 30_000;
/** How often a node that lost its log and sees no leader says it still waits (see tellLostLogWaits). */
const lostLogReminderMs = 30_000;
/** How often a node with no leader looks whether too many voters lost their log: gossip changes once a protocol period (a second). */
const lostLogQuorumCheckMs = 1_000;

export class EffectLoop {
  readonly reads: ReadBarriers;
  private tickTimer: Timer | null = null;
  /** The store whose commit a full disk refused, until it commits what it applied (logged then). */
  private storeCommitRefused: Store | null = null;
  /** Commits what the store left open once it is due, quiet node or not (commitStoreIfDue). */
  private commitTimer: Timer | null = null;
  private readyScheduled = false;
  /** A Ready's log sync is running; the next Ready waits for it. */
  private syncInFlight = false;
  /** A follower's synced Ready whose acknowledgements went out, applied at the next turn (see runReady). */
  private applyDeferred = false;
  /** Commit index at which recovery's replay is complete once applied. */
  private catchUpTarget = 0;
  /** A ReadIndex round is out to learn whether this joining node has caught up. */
  private catchUpProbe = false;
  /** The membership the peers were last set for (refreshPeers). */
  private peersMembership: Membership | null = null;
  /** When a node that lost its log last said it still waits for a leader (monotonic ms). */
  private lostLogToldAtMs: number | null = null;
  /** The lost-log quorum last logged ("lost/voters"), until a leader is known again; and when last looked for. */
  private lostLogQuorumTold: Set<string> | null = null;
  private lostLogQuorumCheckedAtMs: number | null = null;
  /** Whether, at the last look, too many voters had lost their log (the reminder of tellLostLogWaits stays quiet then). */
  private lostLogQuorumStands = false;
  /** A full disk: a Ready it stalled, retried every second (disk-guard.ts). */
  private readonly disk: DiskGuard;
  /** Messages to and from the other members (peer-messages.ts). */
  private readonly peers: PeerMessages;
  /** The Ready whose snapshot was installed (a retried Ready does not install it twice). */
  private snapshotInstalledFor: Ready | null = null;
  transfer: SnapshotTransfer | null = null;
  /** Lowers the main thread's CPU priority while far behind (production only: the io sets it). */
  private readonly priority: CatchUpPriority | null;

  constructor(private readonly ctx: NodeContext, private readonly snapshots: SnapshotPolicy) {
    this.reads = new ReadBarriers(ctx.core, {
      notLeader: (leaderId) => ctx.notLeader(leaderId),
      started: () => {
        ctx.metrics.readIndexRounds.inc();
        this.schedule();
      },
    }, 2 * ctx.config.raft.electionTimeoutMs, () => ctx.clock.nowMs(), ctx.config.limits.queryTimeoutMs);
    ctx.failHooks.push((e) => this.reads.failAll(e));
    this.disk = new DiskGuard(ctx, {
      retry: (rd, stage) => this.runReady(rd, stage),
      processReady: () => this.processReady(),
      schedule: () => this.schedule(),
    });
    this.peers = new PeerMessages(ctx, snapshots, () => this.transfer, () => this.schedule(), () => this.stalled);
    const priority = ctx.io.threadPriority === undefined ? null : new CatchUpPriority(ctx.io.threadPriority, ctx.logger);
    this.priority = priority;
    if (priority !== null) {
      ctx.metrics.registry.gaugeFn("tensor_chain_cpu_nice", "Nice value of the node's main thread: 10 while it catches up far behind the leader, else its usual one", () => priority.nice);
    }
    if (ctx.io.walArchive !== undefined) {
      ctx.walArchiver = new WalArchiver(ctx, ctx.io.walArchive, (data) => {
        // The archive mark is fire-and-forget: lost with a leader change, the next leader
        // archives the range again.
        const r = ctx.core.propose(data, ctx.clock.nowMs());
        if (r.ok) this.schedule();
      });
    }
  }

  /** Enter the recovery flow (SPEC §3.1) and start ticking. */
  begin(): void {
    const { ctx } = this;
    const status = ctx.core.status();
    this.catchUpTarget = status.commit;
    // SPEC §3.1: a node with a WAL replays it, even when the store already holds all of it
    // (the log in memory then starts where the store ends, and there is nothing to apply).
    const walHadEntries = ctx.io.log.lastIndex > 0;
    if (status.membership.voters.length === 0 || ctx.lostLog || (status.lastIndex === 0 && ctx.config.cluster.members.length > 1)) {
      ctx.transition("wal_missing");
      if (ctx.clusterId === "" && ctx.memberOf !== null) {
        // Rebuilt from nothing: it belongs to the cluster MEMBER names, not to none.
        ctx.logger.info("recovery: this node was a member of its cluster (<data_dir>/MEMBER) and waits for the leader to send it the cluster's state; it does not vote until then", { clusterId: ctx.memberOf });
      } else if (ctx.clusterId === "") {
        ctx.logger.warn("this node belongs to no cluster yet: waiting for a leader to send it a snapshot", {
          hint: "set bootstrap = true on the first node of a new cluster, or add this node from the leader with `svc admin add-node`",
        });
      }
    } else {
      // SPEC §3.1: a node with a WAL replays it, whether or not anything is left to apply.
      ctx.transition(walHadEntries ? "wal_found" : "wal_empty");
      if (walHadEntries) ctx.logger.info("recovery: replay of the WAL", { from: status.snapshotIndex + 1, to: status.lastIndex, commit: status.commit });
      // The store already holds all the log knows committed: replay is over now, not at the
      // first Ready, which with every peer down comes only with this node's first election.
      if (ctx.recovery === "replaying_wal" && ctx.store.meta.appliedIndex >= this.catchUpTarget) {
        ctx.logger.info("recovery: replay finished", { applied: ctx.store.meta.appliedIndex });
        ctx.transition("replay_done");
      }
    }
    this.disk.check();
    // The catch-up is timed from here: a node that catches up before its first tick took some time too.
    ctx.metrics.catchUp.sample(ctx.recovery !== "healthy", ctx.store.meta.appliedIndex, ctx.clock.monotonicMs());
    // A lone voter campaigns even on a full disk: no one else can lead, and if its election
    // cannot be persisted either, the Ready waits for space like any other.
    if (status.membership.voters.length === 1 && status.membership.voters[0] === ctx.config.nodeId) ctx.core.campaign();
    this.tickTimer = ctx.clock.every(ctx.config.raft.heartbeatIntervalMs, () => this.tick());
    this.schedule();
  }

  /**
   * A node that lost its log waits for a leader and does not vote. Should no leader come, say so
   * every half minute, with the case in which none ever can: every member restored from the same
   * copy of a snapshot without the marker a full backup carries (each then lost its log).
   */
  private tellLostLogWaits(): void {
    const { ctx } = this;
    const nowMs = ctx.clock.monotonicMs();
    // It hears no election (it does not tick), so it may still name the leader it last heard from.
    if (!ctx.leaderGone()) {
      this.lostLogToldAtMs = null;
      return;
    }
    this.lostLogToldAtMs ??= nowMs;
    if (nowMs - this.lostLogToldAtMs < lostLogReminderMs) return;
    this.lostLogToldAtMs = nowMs;
    if (ctx.clusterId === "") {
      ctx.logger.warn("recovery: still no leader to send this node the cluster's state; it does not vote until one has (with no state, its vote could elect a member that lacks acknowledged writes)", {
        hint: "start the other members and check that they reach this one (`svc admin cluster-status`). " +
          "After a point-in-time restore (SPEC §4.5 clears only raft/), a member whose store/ was removed too counts as rebuilt from nothing (<data_dir>/MEMBER) " +
          "and does not vote for the restored node: stop it, remove that file and raft/LOST_LOG (written at its first start without raft/) on it, then start it",
      });
      return;
    }
    ctx.logger.warn("recovery: still no leader to give back the entries this node lost; it does not vote until one does", {
      hint: "start the other members and check that they reach this one (`svc admin cluster-status`). If every member was restored from a " +
        "copy of the same snapshot made by hand (an archive without raft/RESTORED), none of them can vote: stop them all and run " +
        "`svc admin init-cluster --bootstrap` on each, then start them",
    });
  }

  /**
   * Too many voters lost their log for a leader to be elected (lost-log-quorum.ts): say it at
   * error level once, and again only when a member not named yet joins them, until a leader is
   * heard from. A member turning suspect for a moment and back does not say it again; while it
   * stands, the half-minute reminder of tellLostLogWaits (whose hint does not fit) stays quiet,
   * and speaks again once it no longer does.
   */
  private tellLostLogQuorum(): void {
    const { ctx } = this;
    const nowMs = ctx.clock.monotonicMs();
    // A leader heard from: whatever was said is over.
    if (!ctx.leaderGone()) {
      this.lostLogQuorumTold = null;
      this.lostLogQuorumStands = false;
      return;
    }
    if (this.lostLogQuorumCheckedAtMs !== null && nowMs - this.lostLogQuorumCheckedAtMs < lostLogQuorumCheckMs) return;
    this.lostLogQuorumCheckedAtMs = nowMs;
    const q = ctx.lostLogQuorum();
    this.lostLogQuorumStands = q !== null;
    if (q === null) return;
    const told = this.lostLogQuorumTold;
    if (told !== null && q.lost.every((id) => told.has(id))) return;
    this.lostLogQuorumTold = new Set([...(told ?? []), ...q.lost]);
    ctx.logger.error(`recovery: no leader for ${(ctx.leaderlessMs() / 1000).toFixed(1)} s: ${lostLogQuorumText(q)}`, { lost: q.lost.join(","), voters: q.voters.join(",") });
  }

  private tick(): void {
    const { ctx } = this;
    this.updatePriority();
    // A node that lost entries it held does not campaign (it drops vote requests too):
    // elected, it could lose writes it had acknowledged. Without ticks its election timer
    // never fires; appends from the leader are answered all the same.
    // A node whose disk is full does not campaign either when others could lead: elected, it
    // could not take writes. A stalled loop ticks nothing (messages would pile up unsent).
    this.disk.check();
    this.commitStoreIfDue();
    if (!ctx.lostLog && this.disk.stalled === null && !this.disk.holdsElection()) ctx.core.tick();
    this.tellLostLogQuorum();
    if (ctx.lostLog && !this.lostLogQuorumStands) this.tellLostLogWaits();
    ctx.syncRemoval();
    if (ctx.waiters.size > 0 && ctx.leaderGone()) {
      // Writes proposed while this node led, and it has heard no leader since (cut off from the
      // majority): nothing will tell it their outcome until it is reachable again. Waiting out the
      // write timeout would only make their clients wait to learn the same.
      // (Those at or below the commit index it knows are committed: they apply, and are answered then.)
      ctx.waiters.failAbove(ctx.core.status().commit, new SvcError("NOT_LEADER", `this node lost its leadership and has heard no leader for ${(ctx.leaderlessMs() / 1000).toFixed(1)} s (it reaches no majority of the voters)`));
    }
    const now = ctx.clock.nowMs();
    ctx.metrics.catchUp.sample(ctx.recovery !== "healthy", ctx.store.meta.appliedIndex, ctx.clock.monotonicMs());
    ctx.waiters.expire(now, writeTimeoutMs);
    this.transfer?.checkStalls(now);
    this.reads.expire(now, ctx.core.status().leaderId, ctx.store.meta.appliedIndex);
    this.snapshots.maybeAuto();
    this.snapshots.collectWhenIdle();
    ctx.walArchiver?.tick();
    this.schedule();
  }

  /** A Ready is held for want of disk space: nothing the core says goes out until it is through. */
  get stalled(): boolean {
    return this.disk.stalled !== null;
  }

  stop(): void {
    this.commitTimer?.cancel();
    this.commitTimer = null;
    this.priority?.close();
    // The WAL archiver outlives the loop: SvcNode.stop archives a last segment after it.
    this.tickTimer?.cancel();
    this.tickTimer = null;
    this.disk.stop();
  }

  schedule(): void {
    if (this.readyScheduled || this.ctx.stopped) return;
    this.readyScheduled = true;
    this.ctx.clock.soon(() => {
      this.readyScheduled = false;
      this.processReady();
    });
  }

  private processReady(): void {
    const { ctx } = this;
    if (ctx.stopped || ctx.fatalError !== null || this.syncInFlight || this.applyDeferred || this.disk.stalled !== null) return;
    const diverged = ctx.core.divergence();
    if (diverged !== null) return ctx.fail(historyDiverged(diverged));
    try {
      while (ctx.core.hasReady()) {
        if (!this.runReady(ctx.core.ready(), "persist")) return;
      }
    } catch (e) {
      ctx.fail(e);
    }
  }

  /**
   * Take a Ready through its effects from `stage` on. Returns true when it is done; false
   * when it goes on later: its sync is in flight, or it stalled on a full disk.
   */
  private runReady(rd: Ready, stage: Stage): boolean {
    const { ctx } = this;
    if (stage === "persist") {
      let mustSync: boolean;
      try {
        mustSync = this.persist(rd);
      } catch (e) {
        if (!isDiskFullError(e)) throw e;
        this.disk.stall(rd, "persist", e);
        return false;
      }
      // Entries read back for members behind the in-memory log are committed, so durable:
      // nothing waits for this Ready's sync.
      if (rd.fetches.length > 0) this.peers.fetch(rd.fetches);
      if (mustSync) {
        // The log is syncing on another thread; requests that arrive meanwhile are
        // proposed and go into the next batch (group commit, pipelined).
        // Only append responses claim durability (the entries they acknowledge must be
        // on disk); everything else leaves now, so the leader's appends reach the
        // followers while its own disk is still syncing. The leader counts itself toward
        // a quorum only after advance(), so this never commits an unsynced entry.
        const afterSync = rd.messages.filter((m) => m.type === "append_response");
        this.peers.send(rd.messages.filter((m) => m.type !== "append_response"));
        this.syncInFlight = true;
        const startedMs = ctx.clock.monotonicMs();
        ctx.io.log.sync().then(
          () => {
            this.syncInFlight = false;
            ctx.metrics.walSyncLatency.observe((ctx.clock.monotonicMs() - startedMs) / 1000);
            ctx.metrics.walSyncs.inc();
            try {
              this.peers.send(afterSync);
            } catch (e) {
              ctx.fail(e);
              return;
            }
            // A follower's acknowledgements leave before it applies (the transport writes at the
            // end of this turn): the leader sends the next entries while this node applies these,
            // instead of after. Applying a catch-up batch takes tens of milliseconds.
            if (afterSync.length > 0 && rd.committed.length > 0) {
              this.applyDeferred = true;
              ctx.clock.soon(() => {
                this.applyDeferred = false;
                if (ctx.stopped || ctx.fatalError !== null) return;
                this.applyThenGoOn(rd);
              });
              return;
            }
            this.applyThenGoOn(rd);
          },
          (e: unknown) => {
            this.syncInFlight = false;
            // A stop closes the log under a sync in flight; its writes were failed already.
            // A failed sync is fatal even when it says ENOSPC: see Wal.sync for why.
            if (!ctx.stopped) ctx.fail(e);
          },
        );
        return false;
      }
      this.peers.send(rd.messages);
    }
    return this.applyAndAdvance(rd);
  }

  /** A synced Ready's last step: apply and advance it, then take the next. */
  private applyThenGoOn(rd: Ready): void {
    try {
      if (!this.applyAndAdvance(rd)) return;
    } catch (e) {
      this.ctx.fail(e);
      return;
    }
    this.processReady();
  }

  /** Write what a Ready asks to persist; returns true when a sync is owed before going on. */
  private persist(rd: Ready): boolean {
    const { ctx } = this;
    if (rd.snapshot !== null && this.snapshotInstalledFor !== rd) {
      this.installSnapshot(rd.snapshot);
      this.snapshotInstalledFor = rd;
    }
    const saved = ctx.persistedHardState;
    if (rd.hardState !== null && (rd.hardState.term !== saved.term || rd.hardState.vote !== saved.vote)) {
      // Term and vote are durable before anything depends on them: before any message
      // leaves, and before the log holds an entry of the new term. In the other order, a
      // crash between the two leaves entries newer than the saved term.
      const next = { ...rd.hardState, clusterId: ctx.clusterId };
      ctx.io.log.saveHardState(next);
      ctx.persistedHardState = next;
    }
    if (rd.entries.length > 0) {
      ctx.io.log.append(rd.entries);
      // A membership change counts once in the log: from then on, members are dialled and a
      // removed one is not (see NodeContext.refreshPeers).
      const membership = ctx.core.currentMembership();
      if (membership !== this.peersMembership) {
        this.peersMembership = membership;
        ctx.refreshPeers();
      }
      let bytes = 0;
      for (const e of rd.entries) bytes += e.data.length;
      ctx.metrics.walAppendedBytes.inc(bytes);
      ctx.metrics.walEntriesPerSync.observe(rd.entries.length);
    }
    return rd.mustSync && rd.entries.length > 0;
  }

  /** Replace the store with a snapshot received from the leader and start the log after it. */
  private installSnapshot(meta: SnapshotMeta): void {
    const { ctx } = this;
    const record = ctx.io.snapshots.find(meta.term, meta.index);
    assert(record !== null, "a snapshot is stepped into the core only after it was filed");
    ctx.logger.info("recovery: installing snapshot", { index: meta.index, term: meta.term });
    const { state, method } = ctx.io.snapshots.install(ctx.store, record);
    ctx.store = state;
    const how = { staged: "from its staged copy", copied: "by copying its image", in_memory: "in memory" }[method];
    ctx.logger.info(`recovery: snapshot installed ${how}`, { index: meta.index });
    if (ctx.clusterId === "" && record.clusterId !== "") ctx.adoptClusterId(record.clusterId);
    // The image carries the addresses replicated with add-node and set-member: dial members there.
    ctx.refreshPeers();
    ctx.io.log.resetTo(meta.index + 1);
    void ctx.io.log.compact(ctx.walRemovableThrough(meta.index)).catch((e: unknown) => ctx.logger.warn("could not remove WAL segments a snapshot covers", { error: errorMessage(e) }));
    ctx.snapshotIndex = Math.max(ctx.snapshotIndex, meta.index);
    this.snapshots.installed(meta.index);
    this.snapshots.pruneAfterInstall();
    this.catchUpTarget = Math.max(this.catchUpTarget, meta.index);
    ctx.transition("snapshot_installed");
  }

  /**
   * After persisting and sending: apply, answer, advance. Returns false when applying
   * stalled on a full disk (the store rolled the whole batch back; it is retried as a whole).
   */
  private applyAndAdvance(rd: Ready): boolean {
    const { ctx } = this;
    const pending = rd.committed.filter((e) => e.index > ctx.store.meta.appliedIndex);
    if (pending.length > 0) {
      try {
        this.apply(pending);
      } catch (e) {
        if (!isDiskFullError(e)) throw e;
        this.disk.stall(rd, "apply", e);
        return false;
      }
    }
    this.snapshotInstalledFor = null;
    for (const rs of rd.readStates) this.reads.confirmed(rs.requestId, rs.index);
    ctx.core.advance(rd);
    this.afterApply();
    return true;
  }

  private apply(entries: readonly Entry[]): void {
    const { ctx } = this;
    const results = ctx.store.apply(entries, this.commitPolicy());
    this.scheduleCommit();
    this.snapshots.applied(entries);
    ctx.walArchiver?.applied(entries);
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[i];
      const result = results[i];
      assert(entry !== undefined && result !== undefined, "one result per applied entry");
      if (result.kind === "init_cluster" && ctx.clusterId === "") ctx.adoptClusterId(ctx.store.meta.clusterId);
      if (result.kind === "set_member") ctx.refreshPeers();
      const answered = ctx.waiters.applied(entry.index, entry.term, result);
      if (answered && result.kind === "execute" && result.ok) ctx.metrics.writesTotal.inc();
    }
  }

  /** When the store commits what it applies (store.ts): every batch while the disk is full or a write is checked. */
  private commitPolicy(): CommitPolicy {
    const { ctx } = this;
    return { nowMs: ctx.clock.monotonicMs(), eager: ctx.diskFull !== null || ctx.storeCommitsEager };
  }

  /** Commit the store's open transaction when it is due, even if nothing is applied meanwhile. */
  private scheduleCommit(): void {
    const { ctx } = this;
    if (this.commitTimer !== null || ctx.stopped || ctx.store.uncommittedCount === 0) return;
    this.commitTimer = ctx.clock.after(commitDelayMs, () => {
      this.commitTimer = null;
      this.commitStoreIfDue();
      this.scheduleCommit();
    });
  }

  /** A quiet node commits its last applies too. A commit the full disk refused is tried again once it has room. */
  private commitStoreIfDue(): void {
    const { ctx } = this;
    if (ctx.stopped) return;
    // Refused here, by an apply or by a read: said once, when it goes through.
    if (ctx.store.commitRefused) this.storeCommitRefused ??= ctx.store;
    if (this.storeCommitRefused !== null && this.storeCommitRefused !== ctx.store) {
      this.storeCommitRefused = null; // a snapshot installed meanwhile replaced the store
    } else if (this.storeCommitRefused !== null && !ctx.store.commitRefused && ctx.store.uncommittedCount === 0) {
      // Committed here, by an apply or by a read.
      this.storeCommitRefused = null;
      ctx.logger.info("disk full: the store committed what it had applied when the disk filled");
    }
    // A refused commit waits for room (disk.check leaves the disk-full state once there is).
    if (ctx.store.uncommittedCount === 0 || this.disk.stalled !== null || (ctx.store.commitRefused && ctx.diskFull !== null)) return;
    try {
      ctx.store.commitIfDue(this.commitPolicy());
    } catch (e) {
      if (!isDiskFullError(e)) {
        ctx.fail(e);
        return;
      }
      this.storeCommitRefused = ctx.store;
      ctx.enterDiskFull({ path: ctx.config.dataDir, bytesFree: ctx.io.diskSpace?.freeBytes() ?? null, cause: "write_failed" }, e);
    }
  }

  /** A follower far behind catches up at a lower CPU priority (catch-up-priority.ts). */
  private updatePriority(): void {
    const { ctx } = this;
    if (ctx.stopped) return;
    this.priority?.update(() => ctx.core.status().role === "follower", ctx.leaderCommitSeen - ctx.store.meta.appliedIndex);
  }

  private afterApply(): void {
    this.updatePriority();
    const applied = this.ctx.store.meta.appliedIndex;
    this.reads.applied(applied);
    if (this.ctx.recovery !== "healthy") this.advanceRecovery(applied);
    this.snapshots.maybeAuto();
  }

  private advanceRecovery(applied: number): void {
    const { ctx } = this;
    if ((ctx.recovery === "replaying_wal" || ctx.recovery === "replaying_after_snapshot") && applied >= this.catchUpTarget) {
      ctx.logger.info("recovery: replay finished", { applied });
      ctx.transition("replay_done");
    }
    const status = ctx.core.status();
    if (ctx.recovery === "requesting_snapshot" && status.leaderId !== null && status.lastIndex > 0) ctx.transition("log_received");
    if (ctx.recovery === "installing_snapshot" && !(this.transfer?.busy(applied) ?? false) && !ctx.core.hasReady()) ctx.transition("snapshot_transfer_abandoned");
    if (ctx.recovery === "joining" && status.leaderId !== null && !this.catchUpProbe) this.probeCatchUp();
  }

  /**
   * Caught up means applied up to the leader's commit index as the leader itself states it:
   * a ReadIndex round asks exactly that (heartbeats alone cannot tell a lagging follower).
   */
  private probeCatchUp(): void {
    const { ctx } = this;
    this.catchUpProbe = true;
    this.reads.wait({ unbounded: true }).then(
      () => {
        this.catchUpProbe = false;
        if (ctx.recovery !== "joining") return;
        if (ctx.lostLog) {
          ctx.io.log.setLostLog(false);
          ctx.logger.info("recovery: holds again all the leader committed; votes and campaigns again");
        }
        ctx.lostLog = false;
        const status = ctx.core.status();
        const took = ctx.metrics.catchUp.caughtUp(ctx.store.meta.appliedIndex, ctx.clock.monotonicMs());
        ctx.logger.info(`recovery: caught_up; joined as ${status.role} after ${took.seconds.toFixed(1)} s`, { applied: ctx.store.meta.appliedIndex, entries: took.entries, term: status.term, leader: status.leaderId });
        ctx.transition("caught_up");
      },
      () => {
        // No leader answered; the next pass through afterApply tries again.
        this.catchUpProbe = false;
      },
    );
  }

  /** A message from a peer (the network has checked framing, CRC and cluster id). */
  onPeerMessage(from: string, type: number, payload: Uint8Array): void {
    this.peers.receive(from, type, payload);
  }

  /** The transport found nothing listening at a member's peer address (see RaftCore.peerUnreachable). */
  onPeerUnreachable(id: string): void {
    if (this.ctx.stopped || this.ctx.fatalError !== null) return;
    this.ctx.core.peerUnreachable(id);
    this.schedule();
  }

  /** The transport connected to a member (again): a leader probes it now. */
  onPeerReachable(id: string): void {
    if (this.ctx.stopped || this.ctx.fatalError !== null) return;
    this.ctx.core.peerReachable(id);
    this.schedule();
  }

  /** Fail every write and read still waiting (the node stops). */
  failPending(error: SvcError): void {
    this.ctx.waiters.failAll(error);
    this.reads.failAll(error);
  }
}

/**
 * Raft never replaces a committed entry: a leader whose entries differ from ones this node
 * committed leads another history. The usual cause is a restore (SPEC §4.5) that a node was
 * left out of (this one, or the leader: a node left out with a later term can win an election
 * over the restored members); the other, data copied from another cluster under this one's id.
 * The node stops rather than serve or vote with a history the cluster does not share, and
 * changes nothing on disk.
 */
export function historyDiverged(d: Divergence): SvcError {
  return new SvcError("HISTORY_DIVERGED", `the leader ${d.leader} (term ${d.term}) sends entries that differ from those this node committed at index ${d.index} (its commit index is ${d.commit}): this node and ${d.leader} hold different histories`, {
    hint: `one of them was left out of a restore (SPEC §4.5), or holds data of another cluster. Find which holds the history to keep (the rows you expect: a stopped node's store/state.db opens read-only in sqlite3); ` +
      "stop the node that holds the other one, remove the contents of its raft/ and store/ (or restore it as the others were) and start it, then start the rest. " +
      "Where more than one member holds the other history (a restore done on fewer than half of the members), restore those from the same backup instead: " +
      "a member whose raft/ and store/ were removed does not vote until a leader has caught it up, so a majority of them cannot elect the restored one. " +
      "This node's data is left as it was",
  });
}
