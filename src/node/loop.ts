// The effect loop: the one place that turns the Raft core's Ready into effects, in this
// order for each Ready:
//   install snapshot → append entries to the log store → save term/vote → sync (once, for
//   every record of the batch: group commit) → send messages → apply committed → answer
//   clients → advance.
// A client is answered only after its entry was synced on a quorum and applied. The loop
// also owns the tick timer and the recovery flow's progress (recovery.ts decides the edges).
//
// A full disk stops the loop, not the node: a Ready whose append, hard state or apply fails
// for want of space is kept as it is and retried every second (the WAL and the store undo a
// failed write, so a retry starts from the same state), and nothing after it — no message
// claiming the entries, no answer, no advance — happens until it succeeds. Meanwhile reads
// are served from the store as it is and new writes are refused (DISK_FULL).

import { decodeMessage, encodeMessage, type Message, type Ready, type SnapshotMeta } from "../raft/index.ts";
import type { Entry } from "../raft/index.ts";
import type { Timer } from "../io/index.ts";
import { MessageType } from "../transport/index.ts";
import { assert } from "../util/assert.ts";
import { SvcError, errorMessage } from "../util/errors.ts";
import { isDiskFullError } from "../io/index.ts";
import { diskReserveBytes, type NodeContext } from "./context.ts";
import { ReadBarriers } from "./reads.ts";
import type { SnapshotPolicy } from "./snapshot-policy.ts";
import type { SnapshotTransfer } from "./snapshot-transfer.ts";
import { WalArchiver } from "./wal-archiver.ts";

const writeTimeoutMs = 30_000;
/** How often a Ready stalled on a full disk is retried. */
const diskRetryMs = 1_000;
/** How often the free space is compared with the reserve (a statfs: about a microsecond). */
const diskCheckMs = 200;
/** How often a leader whose disk is full tries to hand leadership to another voter. */
const diskHandOffMs = 10_000;

export class EffectLoop {
  readonly reads: ReadBarriers;
  private tickTimer: Timer | null = null;
  private readyScheduled = false;
  /** A Ready's log sync is running; the next Ready waits for it. */
  private syncInFlight = false;
  /** Commit index at which recovery's replay is complete once applied. */
  private catchUpTarget = 0;
  /** A ReadIndex round is out to learn whether this joining node has caught up. */
  private catchUpProbe = false;
  /**
   * A Ready whose persisting or applying failed for want of disk space, and the step to retry
   * it from. While set, no other Ready is taken and the core is not ticked.
   */
  private stalled: { rd: Ready; stage: "persist" | "apply" } | null = null;
  private stallTimer: Timer | null = null;
  /** The Ready whose snapshot was installed (a retried Ready does not install it twice). */
  private snapshotInstalledFor: Ready | null = null;
  private lastDiskCheckMs = Number.NEGATIVE_INFINITY;
  private lastHandOffMs = Number.NEGATIVE_INFINITY;
  transfer: SnapshotTransfer | null = null;

  constructor(private readonly ctx: NodeContext, private readonly snapshots: SnapshotPolicy) {
    this.reads = new ReadBarriers(ctx.core, {
      notLeader: (leaderId) => ctx.notLeader(leaderId),
      started: () => {
        ctx.metrics.readIndexRounds.inc();
        this.schedule();
      },
    }, 2 * ctx.config.raft.electionTimeoutMs, () => ctx.clock.nowMs());
    ctx.failHooks.push((e) => this.reads.failAll(e));
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
      if (!ctx.lostLog) {
        ctx.logger.warn("this node belongs to no cluster yet: waiting for a leader to send it a snapshot", {
          hint: "set bootstrap = true on the first node of a new cluster, or add this node from the leader with `svc admin add-node`",
        });
      }
    } else {
      // SPEC §3.1: a node with a WAL replays it, whether or not anything is left to apply.
      ctx.transition(walHadEntries ? "wal_found" : "wal_empty");
      if (walHadEntries) ctx.logger.info("recovery: replay of the WAL", { from: status.snapshotIndex + 1, to: status.lastIndex, commit: status.commit });
    }
    this.checkDisk();
    // A lone voter campaigns even on a full disk: no one else can lead, and if its election
    // cannot be persisted either, the Ready waits for space like any other.
    if (status.membership.voters.length === 1 && status.membership.voters[0] === ctx.config.nodeId) ctx.core.campaign();
    this.tickTimer = ctx.clock.every(ctx.config.raft.heartbeatIntervalMs, () => this.tick());
    this.schedule();
  }

  private tick(): void {
    const { ctx } = this;
    // A node that lost entries it held does not campaign (it drops vote requests too):
    // elected, it could lose writes it had acknowledged. Without ticks its election timer
    // never fires; appends from the leader are answered all the same.
    // A node whose disk is full does not campaign either when others could lead: elected, it
    // could not take writes. A stalled loop ticks nothing (messages would pile up unsent).
    this.checkDisk();
    if (!ctx.lostLog && this.stalled === null && !this.diskFullHoldsElection()) ctx.core.tick();
    const now = ctx.clock.nowMs();
    ctx.metrics.catchUp.sample(ctx.recovery !== "healthy", ctx.store.meta.appliedIndex, ctx.clock.monotonicMs());
    ctx.waiters.expire(now, writeTimeoutMs);
    this.transfer?.checkStalls(now);
    this.reads.expire(now, ctx.core.status().leaderId);
    this.snapshots.maybeAuto();
    this.snapshots.collectWhenIdle();
    ctx.walArchiver?.tick();
    this.schedule();
  }

  stop(): void {
    this.ctx.walArchiver?.stop();
    this.tickTimer?.cancel();
    this.tickTimer = null;
    this.stallTimer?.cancel();
    this.stallTimer = null;
  }

  // ─── a full disk ────────────────────────────────────────────────────────────────────

  private diskFullHoldsElection(): boolean {
    const { ctx } = this;
    if (ctx.diskFull === null) return false;
    const status = ctx.core.status();
    return status.role !== "leader" && status.membership.voters.length > 1;
  }

  /** Compare the free space with the reserve (every few ticks); enter or leave the state. */
  private checkDisk(): void {
    const { ctx } = this;
    const space = ctx.io.diskSpace;
    if (space === undefined) return;
    const now = ctx.clock.monotonicMs();
    if (now - this.lastDiskCheckMs < diskCheckMs) return;
    this.lastDiskCheckMs = now;
    const free = space.freeBytes();
    if (free === null) return;
    if (free < diskReserveBytes(ctx.config.wal.segmentSizeBytes)) {
      ctx.enterDiskFull({ path: space.path, bytesFree: free, cause: this.stalled !== null ? "write_failed" : "below_reserve" });
      this.handOffLeadership(now);
    } else if (this.stalled === null) {
      ctx.leaveDiskFull(free);
    }
  }

  /** A leader whose disk is full asks the most caught-up other voter to take over. */
  private handOffLeadership(now: number): void {
    const { ctx } = this;
    const status = ctx.core.status();
    if (status.role !== "leader" || now - this.lastHandOffMs < diskHandOffMs) return;
    let best: string | null = null;
    let bestMatch = -1;
    for (const id of status.membership.voters) {
      const match = status.progress[id]?.match ?? -1;
      if (id !== ctx.config.nodeId && match > bestMatch) {
        best = id;
        bestMatch = match;
      }
    }
    if (best === null) return;
    this.lastHandOffMs = now;
    ctx.logger.info("disk full: handing leadership to another voter", { to: best });
    ctx.core.transferLeadership(best);
    this.schedule();
  }

  /** Keep a Ready that failed for want of space, and retry it every second. */
  private stall(rd: Ready, stage: "persist" | "apply", e: unknown): void {
    const { ctx } = this;
    this.stalled = { rd, stage };
    const path = (e as { path?: unknown }).path;
    ctx.enterDiskFull({
      path: typeof path === "string" ? path : stage === "apply" ? ctx.config.dataDir : ctx.io.diskSpace?.path ?? ctx.config.dataDir,
      bytesFree: ctx.io.diskSpace?.freeBytes() ?? null,
      cause: "write_failed",
    }, e);
    this.stallTimer ??= ctx.clock.after(diskRetryMs, () => this.retryStalled());
  }

  private retryStalled(): void {
    const { ctx } = this;
    this.stallTimer = null;
    const stalled = this.stalled;
    if (stalled === null || ctx.stopped || ctx.fatalError !== null) return;
    this.stalled = null;
    let done: boolean;
    try {
      done = this.runReady(stalled.rd, stalled.stage);
    } catch (e) {
      ctx.fail(e);
      return;
    }
    if (this.stalled !== null) return;
    // Past the step that failed (a sync may still be in flight: it goes on by itself).
    ctx.logger.info("disk full: the stalled write went through", { stage: stalled.stage });
    this.lastDiskCheckMs = Number.NEGATIVE_INFINITY;
    if (ctx.io.diskSpace === undefined) ctx.leaveDiskFull(null);
    else this.checkDisk();
    if (done) this.processReady();
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
    if (ctx.stopped || ctx.fatalError !== null || this.syncInFlight || this.stalled !== null) return;
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
  private runReady(rd: Ready, stage: "persist" | "apply"): boolean {
    const { ctx } = this;
    if (stage === "persist") {
      let mustSync: boolean;
      try {
        mustSync = this.persist(rd);
      } catch (e) {
        if (!isDiskFullError(e)) throw e;
        this.stall(rd, "persist", e);
        return false;
      }
      if (mustSync) {
        // The log is syncing on another thread; requests that arrive meanwhile are
        // proposed and go into the next batch (group commit, pipelined).
        // Only append responses claim durability (the entries they acknowledge must be
        // on disk); everything else leaves now, so the leader's appends reach the
        // followers while its own disk is still syncing. The leader counts itself toward
        // a quorum only after advance(), so this never commits an unsynced entry.
        const afterSync = rd.messages.filter((m) => m.type === "append_response");
        this.send(rd.messages.filter((m) => m.type !== "append_response"));
        this.syncInFlight = true;
        const startedMs = ctx.clock.monotonicMs();
        ctx.io.log.sync().then(
          () => {
            this.syncInFlight = false;
            ctx.metrics.walSyncLatency.observe((ctx.clock.monotonicMs() - startedMs) / 1000);
            ctx.metrics.walSyncs.inc();
            try {
              this.send(afterSync);
              if (!this.applyAndAdvance(rd)) return;
            } catch (e) {
              ctx.fail(e);
              return;
            }
            this.processReady();
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
      this.send(rd.messages);
    }
    return this.applyAndAdvance(rd);
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
        this.stall(rd, "apply", e);
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
    const results = ctx.store.apply(entries);
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

  private afterApply(): void {
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
    this.reads.wait().then(
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

  // ─── peers ──────────────────────────────────────────────────────────────────────────

  /** A message from a peer (the network has checked framing, CRC and cluster id). */
  onPeerMessage(from: string, type: number, payload: Uint8Array): void {
    const { ctx } = this;
    if (ctx.stopped || ctx.fatalError !== null) return;
    switch (type) {
      case MessageType.raft: {
        const decoded = decodeMessage(payload);
        if (!decoded.ok) {
          ctx.metrics.peerMessagesDropped.labels("malformed").inc();
          ctx.logger.debug("dropped a malformed raft message", { from, error: decoded.error.code });
          return;
        }
        const m = decoded.message;
        if (m.from !== from || m.to !== ctx.config.nodeId) {
          ctx.metrics.peerMessagesDropped.labels("misaddressed").inc();
          return;
        }
        if ((m.type === "vote" || m.type === "pre_vote") && ctx.lostLog) {
          ctx.metrics.peerMessagesDropped.labels("vote_while_recovering").inc();
          return;
        }
        if (m.type === "append" || m.type === "heartbeat") ctx.leaderCommitSeen = Math.max(ctx.leaderCommitSeen, m.commit);
        ctx.core.step(m);
        this.schedule();
        return;
      }
      case MessageType.snapshotChunk:
        this.transfer?.onChunk(from, payload);
        return;
      case MessageType.snapshotAck:
        this.transfer?.onAck(from, payload);
        return;
      default:
        ctx.metrics.peerMessagesDropped.labels("unknown_type").inc();
    }
  }

  private send(messages: readonly Message[]): void {
    const { ctx } = this;
    for (const m of messages) {
      if (m.type === "snapshot") {
        const transfer = this.transfer;
        if (transfer === null) {
          ctx.core.reportSnapshot(m.to, false);
          continue;
        }
        // The core names the point its in-memory log starts after; the follower is sent the
        // newest image at or past it (made now when there is none: see snapshot-policy.ts).
        this.snapshots.imageAtLeast(m.snapshot.index)
          .then((snapshot) => transfer.send({ ...m, snapshot }))
          .catch((e: unknown) => {
            ctx.logger.error("cannot send snapshot", { peer: m.to, error: errorMessage(e) });
            ctx.core.reportSnapshot(m.to, false);
            this.schedule();
          });
        continue;
      }
      if (!ctx.io.network.send(m.to, MessageType.raft, encodeMessage(m)) && m.type === "append") ctx.core.reportUnreachable(m.to);
    }
  }

  /** Fail every write and read still waiting (the node stops). */
  failPending(error: SvcError): void {
    this.ctx.waiters.failAll(error);
    this.reads.failAll(error);
  }
}
