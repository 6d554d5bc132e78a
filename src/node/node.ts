// The node: one member of a cluster, built from parts that each do one job —
//   context.ts          what the parts share (config, core, io, recovery state, cluster id)
//   loop.ts             the effect loop: Ready → persist → send → apply → answer → advance,
//                       and the recovery flow's progress (recovery.ts holds its table)
//   disk-guard.ts       a full disk: the state, and the Ready it stalled, retried
//   peer-messages.ts    Raft messages in and out, snapshot chunks to the transfer
//   proposer.ts         the write path's door: propose, wait until applied
//   snapshot-policy.ts  when to snapshot; compaction and pruning after one
//   membership-admin.ts member changes and leadership transfer
//   start.ts            production io: the data directory, its lock, loading, the transport
// This file is the public surface the HTTP apps and the CLI use. The simulator builds the
// same node on in-memory io with SvcNode.create.

import type { Config } from "../config/index.ts";
import type { RaftCore } from "../raft/index.ts";
import type { StoredHardState } from "../storage/index.ts";
import {
  checkReadStatement, checkWriteStatement, encodeCommand, refuseReadInWrite,
  type ApplyResult, type MemberAddress, type QueryResult, type SqlValue, type Statement, type Store, type StoreStats,
} from "../store/index.ts";
import { writesPausedAt } from "../store/store.ts";
import { isDiskFullError } from "../io/index.ts";
import { assert } from "../util/assert.ts";
import { SvcError, errorMessage, isSvcError } from "../util/errors.ts";
import type { Logger } from "../util/logger.ts";
import { NodeContext, foreignMembersText, foreignMembersWayOut, roleCodes, type NodeIo } from "./context.ts";
import { EffectLoop } from "./loop.ts";
import { MembershipAdmin } from "./membership-admin.ts";
import { createNodeMetrics, type NodeMetrics } from "./metrics.ts";
import { Proposer } from "./proposer.ts";
import { recoveryStateCode, type RecoveryState } from "./recovery.ts";
import { SnapshotPolicy, type SnapshotOutcome } from "./snapshot-policy.ts";
import { NodeSqlProcesses } from "./sql-processes.ts";
import { WriteGate, requestIdReused } from "./write-gate.ts";
import { archiveAtStopMsMax } from "./wal-archiver.ts";
import type { SnapshotTransfer } from "./snapshot-transfer.ts";
import { openNode } from "./start.ts";
import type { PeerSecrets } from "./peer-tls.ts";
import { wireGossip, type GossipSnapshot } from "./gossip.ts";
import { lostLogQuorumText } from "./lost-log-quorum.ts";
import type { NodeParts } from "./context.ts";
import { messageTraceFields } from "./_message-trace.ts";
import type { ConfigDrift } from "./config-drift.ts";
import type { MetricsRegistry } from "../metrics/index.ts";

export type Consistency = "linearizable" | "leader" | "stale";
export type { SnapshotOutcome, NodeParts, GossipSnapshot, ConfigDrift };

/** A linearizable read that a refused store commit keeps from a write waits this long for room before 507. */
const readCommitWaitMs = 1_000;
const readCommitPollMs = 50;

export interface ExecuteOutcome {
  results: { rowsAffected: number; lastInsertId: number | bigint }[];
  index: number;
}

/** How long a node that found its store damaged while serving waits, for its answer to go out, before it stops. */
const storeDamagedStopDelayMs = 200;

export class SvcNode {
  readonly metrics: NodeMetrics;
  /** Where reads and write checks run, killable; null on an in-memory store. */
  private readonly sql: NodeSqlProcesses | null;
  private readonly writeGate: WriteGate;
  /** The stop under way (it archives a last segment before the node stops): one for every caller. */
  private stopping: Promise<void> | null = null;

  private constructor(
    private readonly ctx: NodeContext,
    private readonly loop: EffectLoop,
    private readonly snapshots: SnapshotPolicy,
    private readonly proposer: Proposer,
    private readonly admin: MembershipAdmin,
    private readonly transfer: SnapshotTransfer,
    private readonly parts: NodeParts,
  ) {
    this.metrics = ctx.metrics;
    const sql = NodeSqlProcesses.forStore(ctx.store, ctx.config);
    this.sql = sql;
    this.writeGate = new WriteGate(ctx, proposer, () => sql?.checkerFor(ctx.store) ?? null);
  }

  /**
   * Open the data directory and start the node. Fails, before touching any data, when the
   * directory is not writable or another process holds its lock.
   */
  static async start(
    config: Config,
    logger: Logger,
    options: { version?: string; peerSecrets?: PeerSecrets; registerMetrics?: (registry: MetricsRegistry) => void } = {},
  ): Promise<SvcNode> {
    let node: SvcNode | null = null;
    // Messages that arrive before the node exists are dropped; Raft retransmits.
    const parts = await openNode(config, logger, {
      onMessage: (from, type, payload) => node?.onPeerMessage(from, type, payload),
      onPeerUnreachable: (id) => node?.onPeerUnreachable(id),
      onPeerReachable: (id) => node?.onPeerReachable(id),
    }, options.peerSecrets);
    const own = parts.registerMetrics;
    const extra = options.registerMetrics;
    try {
      node = SvcNode.create(extra === undefined ? parts : {
        ...parts,
        registerMetrics: (registry) => {
          own?.(registry);
          extra(registry);
        },
      }, options.version);
    } catch (e) {
      // What openNode opened must not outlive a node that could not be built: its peer port
      // and the data directory's lock would keep the process looking alive.
      for (const close of [() => parts.io.network.close(), () => parts.gossip?.close(), () => parts.io.log.close(), () => parts.store.close(), () => parts.release()]) {
        try {
          close();
        } catch {
          // best effort: the error that stopped the start is the one to report
        }
      }
      throw e;
    }
    return node;
  }

  /** Build a node from its parts and start its loop. */
  static create(parts: NodeParts, version = "unknown"): SvcNode {
    let ctx: NodeContext | null = null;
    let policy: SnapshotPolicy | null = null;
    const live = (): NodeContext => {
      assert(ctx !== null, "metrics are read only after the node is built");
      return ctx;
    };
    const metrics = createNodeMetrics({
      commitIndex: () => live().core.status().commit,
      appliedIndex: () => live().store.meta.appliedIndex,
      leaderCommitIndex: () => {
        const status = live().core.status();
        return status.role === "leader" ? status.commit : live().leaderCommitSeen;
      },
      term: () => live().core.status().term,
      isLeader: () => live().core.status().role === "leader",
      roleCode: () => roleCodes.indexOf(live().reportedRole()),
      recoveryStateCode: () => recoveryStateCode(live().recovery),
      snapshotIndex: () => live().snapshotIndex,
      checkpointIndex: () => policy?.checkpointIndex ?? parts.checkpointIndex,
      lastLogIndex: () => live().core.status().lastIndex,
      walSegments: () => live().io.log.stats().segmentCount,
      walSizeBytes: () => live().io.log.stats().sizeBytes,
      pendingWrites: () => live().waiters.size,
      writesPaused: () => writesPausedAt(live().store.meta, live().clock.nowMs()),
      diskFull: () => live().diskFull !== null,
      votersDiskFull: () => live().core.votersDiskFull().length,
      storeUncommitted: () => live().store.uncommittedCount,
    });
    ctx = new NodeContext(parts.config, parts.logger, parts.io, parts.core, metrics, parts.store, parts.hardState, parts.clusterId, parts.raftLogger);
    ctx.lostLog = parts.lostLog;
    ctx.removedMark = parts.removedMark ?? null;
    if (parts.ofAnotherCluster !== undefined) ctx.ofAnotherCluster = parts.ofAnotherCluster;
    if (parts.peersOfAnotherCluster !== undefined) ctx.peersOfAnotherCluster = parts.peersOfAnotherCluster;
    ctx.memberOf = parts.memberOf ?? null;
    policy = new SnapshotPolicy(ctx, parts.checkpointIndex, parts.imageLogBytesMin);
    const loop = new EffectLoop(ctx, policy);
    const c = ctx;
    const transfer = parts.makeTransfer({
      sent: (peer, ok) => {
        c.core.reportSnapshot(peer, ok);
        loop.schedule();
      },
      received: (message, clusterId) => {
        if (c.clusterId === "" && clusterId !== "") {
          try {
            c.adoptClusterId(clusterId);
          } catch (e) {
            if (!isDiskFullError(e)) throw e;
            // Not taken: the leader sends a snapshot again, to a member that still lacks one.
            c.logger.warn("a snapshot arrived but the disk is full: the cluster id it carries cannot be recorded, so it is not installed; the leader will send it again", { error: errorMessage(e) });
            return;
          }
        }
        // Its image arrived and checks: the message the leader sent with it, as peer-messages.ts traces the others.
        if (c.raftLogger.enabled("trace")) c.raftLogger.trace("message received", messageTraceFields(message, "from"));
        c.core.step(message);
        loop.schedule();
      },
      started: () => c.transitionIfAllowed("snapshot_transfer_started"),
      appliedIndex: () => c.store.meta.appliedIndex,
    }, metrics.transfer);
    loop.transfer = transfer;
    const proposer = new Proposer(ctx, () => loop.schedule());
    const node = new SvcNode(ctx, loop, policy, proposer, new MembershipAdmin(ctx, proposer), transfer, parts);
    if (parts.gossip !== undefined) wireGossip(ctx, parts.gossip, metrics.registry, version);
    parts.registerMetrics?.(metrics.registry);
    if (ctx.clusterId !== "") parts.io.network.setClusterId(ctx.clusterId);
    ctx.refreshPeers();
    loop.begin();
    return node;
  }

  // ─── state ──────────────────────────────────────────────────────────────────────────

  get clusterId(): string {
    return this.ctx.clusterId;
  }

  get config(): Config {
    return this.ctx.config;
  }

  get recoveryState(): RecoveryState {
    return this.ctx.recovery;
  }

  /**
   * Set while the data directory's disk is full (writes refused, reads served), with the space
   * free now: what was free when the write failed is often none at all, and says nothing of
   * what the operator has freed since.
   */
  get diskFull(): { path: string; bytesFree: number | null } | null {
    const state = this.ctx.diskFull;
    if (state === null) return null;
    return { path: state.path, bytesFree: this.ctx.io.diskSpace?.freeBytes() ?? state.bytesFree };
  }

  /** How long this node has known no leader (0 while it knows one). */
  leaderlessMs(): number {
    return this.ctx.leaderlessMs();
  }

  /** The node lost log entries it held and waits, not voting, for a leader to give them back (see NodeContext.lostLog). */
  get lostLog(): boolean {
    return this.ctx.lostLog;
  }

  /**
   * With no leader for two election timeouts, the voters that lost their log when they leave too
   * few to elect one, with what to do (see lost-log-quorum.ts); null otherwise.
   */
  get lostLogQuorumProblem(): string | null {
    if (!this.ctx.leaderGone()) return null;
    const q = this.ctx.lostLogQuorum();
    return q === null ? null : lostLogQuorumText(q);
  }

  /** Removed from the cluster (see NodeContext.removed). */
  get removed(): boolean {
    return this.ctx.removed;
  }

  /**
   * What a removed node says about itself, wherever it is asked (/health, cluster-info,
   * cluster-status), with what to do; null while it is a member.
   */
  get removedProblem(): string | null {
    if (!this.ctx.removed) return null;
    return `this node (${this.ctx.config.nodeId}) was removed from the cluster: stop it (its data is no longer replicated), ` +
      "or add it back with `svc admin add-node` on an empty data directory";
  }

  /** Restored data of other hosts' members, waiting for them (see NodeContext.foreignMembers); null otherwise. */
  get foreignMembersProblem(): string | null {
    const members = this.ctx.foreignMembers;
    return members === null ? null : `${foreignMembersText(this.ctx.config.nodeId, members)}: ${foreignMembersWayOut}`;
  }

  /** Members whose last handshake named another cluster than this node's (another cluster's data restored on them). */
  membersOfAnotherCluster(): string[] {
    if (this.ctx.clusterId === "") return [];
    const other = new Set(this.ctx.peersOfAnotherCluster());
    const m = this.ctx.core.currentMembership();
    return [...m.voters, ...m.learners].filter((id) => id !== this.ctx.config.nodeId && (other.has(id) || this.ctx.ofAnotherCluster(id)));
  }

  /** Where this node's [cluster] members disagrees with the cluster (see config-drift.ts). */
  configDrift(): ConfigDrift[] {
    return this.ctx.configDrift();
  }

  /** The unrecoverable error that stopped this node from serving, if any. */
  get fatal(): SvcError | null {
    return this.ctx.fatalError;
  }

  /** Paused, and the pause's lease (when it has one) has not run out. */
  get writesPaused(): boolean {
    return writesPausedAt(this.ctx.store.meta, this.ctx.clock.nowMs());
  }

  set onFatal(handler: ((e: SvcError) => void) | null) {
    this.ctx.onFatal = handler;
  }

  status() {
    const { ctx } = this;
    const raft = ctx.core.status();
    return {
      nodeId: ctx.config.nodeId,
      clusterId: ctx.clusterId,
      recovery: ctx.recovery,
      role: ctx.reportedRole(),
      term: raft.term,
      leaderId: ctx.reportedLeaderId(),
      commitIndex: raft.commit,
      appliedIndex: ctx.store.meta.appliedIndex,
      lastLogIndex: raft.lastIndex,
      snapshotIndex: ctx.snapshotIndex,
      /** The store is durable up to here (the newest checkpoint). */
      checkpointIndex: this.snapshots.checkpointIndex,
      /** The Raft log in memory starts after this index; older entries are only in the WAL and the store. */
      memoryLogStartIndex: raft.snapshotIndex,
      membership: raft.membership,
      writesPaused: writesPausedAt(ctx.store.meta, ctx.clock.nowMs()),
      /** When the pause's lease ends (ms since the epoch); 0 when it has none or writes are not paused. */
      writesPausedUntilMs: ctx.store.meta.writesPaused ? ctx.store.meta.writesPausedUntilMs : 0,
      /** WAL archiving on this node (null: wal.archive_command is not set). */
      walArchive: ctx.walArchiver?.snapshot() ?? null,
    };
  }

  // ─── client requests ────────────────────────────────────────────────────────────────

  /**
   * Propose a batch of statements (one transaction) and wait until it is applied. Every
   * statement is admitted here, whoever calls: SQL that could differ between replicas or
   * escape the transaction never reaches the log.
   */
  async execute(statements: Statement[], options: { requestId?: string } = {}): Promise<ExecuteOutcome> {
    try {
      return await this.executeOnce(statements, options);
    } catch (e) {
      throw this.stopIfStoreDamaged(e);
    }
  }

  /**
   * SQLite found this node's store damaged while serving a request (a read, a write's check):
   * the store is marked already (store/damage.ts), and the node stops, so that the other members
   * serve and one of them leads; its next start sets the store aside and rebuilds it. The
   * request is answered the error (503 STORE_DAMAGED: nothing of a write was applied).
   */
  private stopIfStoreDamaged(e: unknown): unknown {
    const { ctx } = this;
    if (!isSvcError(e, "STORE_DAMAGED") || ctx.fatalError !== null || ctx.stopped) return e;
    // Refused from now on: every request (503 STORE_DAMAGED), /health (unavailable, with the
    // error), the loop and the peers. The node stops a moment later, once this answer is out.
    ctx.fatalError = e;
    ctx.clock.after(storeDamagedStopDelayMs, () => ctx.fail(e));
    return e;
  }

  private async executeOnce(statements: Statement[], options: { requestId?: string }): Promise<ExecuteOutcome> {
    const { ctx } = this;
    const { requestId } = options;
    ctx.checkServing();
    const shapes = statements.map((s) => checkWriteStatement(s.sql));
    // A retry of a write that was applied gets its answer, even while writes are paused, and
    // on a node removed since.
    const known = requestId === undefined ? null : this.writeGate.remembered(requestId, statements);
    if (known !== null) return executeOutcome(known.applyResult, known.index);
    refuseReadInWrite(shapes);
    ctx.checkMember();
    ctx.checkWritable();
    if (writesPausedAt(ctx.store.meta, ctx.clock.nowMs())) {
      throw new SvcError("WRITES_PAUSED", "writes are paused on this cluster", { hint: "run `svc admin resume-writes` when the backup is done" });
    }
    const { applyResult, index } = await this.writeGate.propose(statements, requestId);
    return executeOutcome(applyResult, index);
  }

  /**
   * Pause or resume writes cluster-wide. `leaseMs`: the pause ends by itself that long after
   * now on the leader's clock unless proposed again (a backup renews it while it runs).
   */
  async setWritesPaused(paused: boolean, leaseMs?: number): Promise<{ index: number; untilMs: number }> {
    this.ctx.checkServing();
    this.ctx.checkWritable();
    const untilMs = paused && leaseMs !== undefined ? this.ctx.clock.nowMs() + leaseMs : 0;
    const command = paused ? (untilMs > 0 ? { op: "pause_writes" as const, untilMs } : { op: "pause_writes" as const }) : { op: "resume_writes" as const };
    const { index } = await this.proposer.propose(encodeCommand(command));
    this.ctx.logger.info(paused ? "writes paused" : "writes resumed", untilMs > 0 ? { index, untilMs } : { index });
    return { index, untilMs };
  }

  /**
   * A read, stopped at its time limit ([limits] query_timeout_ms, or admin_query_timeout_ms
   * for an operator's) or when `signal` says the client went away. It runs in a SQL process,
   * so the node goes on serving meanwhile.
   */
  async query(sql: string, params: SqlValue[], consistency: Consistency, options: { signal?: AbortSignal; admin?: boolean } = {}): Promise<QueryResult> {
    try {
      return await this.queryOnce(sql, params, consistency, options);
    } catch (e) {
      throw this.stopIfStoreDamaged(e);
    }
  }

  private async queryOnce(sql: string, params: SqlValue[], consistency: Consistency, options: { signal?: AbortSignal; admin?: boolean }): Promise<QueryResult> {
    const { ctx } = this;
    ctx.checkServing();
    // An operator may still read a removed node's own state (stale, from the admin port).
    if (options.admin !== true || consistency !== "stale") ctx.checkMember();
    if (consistency === "linearizable" && this.loop.stalled) {
      // Its ReadIndex round would wait behind the Ready the full disk holds, until it timed out.
      throw new SvcError("DISK_FULL", "this node's disk is full and it has stopped taking entries: it cannot serve a linearizable read", {
        hint: "read from another node, or with consistency \"stale\" here, or free space on this node's data directory",
      });
    }
    if (consistency === "linearizable") await this.loop.reads.wait();
    else if (consistency === "leader") ctx.requireLeader();
    else if (options.admin !== true && (ctx.recovery === "requesting_snapshot" || ctx.recovery === "installing_snapshot")) {
      // Its store is not the cluster's yet (empty after a rebuild): "no such table" would read
      // as if the table did not exist. An operator may still look (admin, stale).
      throw new SvcError("RECOVERING", `this node is recovering (${ctx.recovery}): it waits for the leader's snapshot and holds none of the cluster's data yet`, {
        hint: "read from another node, or here once /health says it is healthy",
      });
    }
    if (this.sql === null) return ctx.store.query(sql, params);
    checkReadStatement(sql);
    await this.commitForRead(consistency);
    const timeoutMs = options.admin === true ? ctx.config.limits.adminQueryTimeoutMs : ctx.config.limits.queryTimeoutMs;
    return this.sql.query(ctx.store, sql, params, options.signal === undefined ? { timeoutMs } : { timeoutMs, signal: options.signal });
  }

  /**
   * A SQL process reads what the store committed: commit what it applied first. On a full
   * disk a linearizable read cannot be served (it might miss a write it must see); the other
   * consistencies may lag, and are served what is committed.
   */
  private async commitForRead(consistency: Consistency): Promise<void> {
    const { ctx } = this;
    if (ctx.store.commitForReaders() || consistency !== "linearizable") return;
    // Space may come back in a moment (the loop checks every 200 ms): wait a little first.
    const deadline = ctx.clock.monotonicMs() + readCommitWaitMs;
    while (ctx.clock.monotonicMs() < deadline) {
      await ctx.clock.sleep(readCommitPollMs);
      if (ctx.store.commitForReaders()) return;
    }
    throw new SvcError("DISK_FULL", "the disk is full: writes this node applied cannot be made visible to its reads (the store's commit was refused)", {
      hint: "read from another node, or with consistency \"stale\", or free space on this node's data directory",
    });
  }

  /** A read of this node's own state as it is now (what "stale" consistency answers), at once. */
  queryLocal(sql: string, params: SqlValue[]): QueryResult {
    try {
      return this.ctx.store.query(sql, params);
    } catch (e) {
      throw this.stopIfStoreDamaged(e);
    }
  }

  /** `storeStats`: the store's part, when it was read elsewhere (statsBounded). */
  stats(storeStats: StoreStats = this.ctx.store.stats()): StoreStats & { raft: ReturnType<SvcNode["status"]>; wal: { segments: number; sizeBytes: number; firstIndex: number; lastIndex: number }; snapshots: { count: number; latestIndex: number; latestSizeBytes: number } } {
    const { ctx } = this;
    const log = ctx.io.log.stats();
    const latest = ctx.io.snapshots.latest();
    return {
      ...storeStats,
      raft: this.status(),
      wal: { segments: log.segmentCount, sizeBytes: log.sizeBytes, firstIndex: log.firstIndex, lastIndex: ctx.io.log.lastIndex },
      snapshots: { count: ctx.io.snapshots.count(), latestIndex: latest?.index ?? 0, latestSizeBytes: latest?.sizeBytes ?? 0 },
    };
  }

  /**
   * stats() for an operator: the tables' rows are counted in a SQL process, stopped at
   * admin_query_timeout_ms (counting a large table takes a while; the node goes on meanwhile).
   */
  async statsBounded(): Promise<ReturnType<SvcNode["stats"]>> {
    try {
      if (this.sql === null) return this.stats();
      await this.commitForRead("stale");
      return this.stats(await this.sql.stats(this.ctx.store, this.ctx.config.limits.adminQueryTimeoutMs));
    } catch (e) {
      throw this.stopIfStoreDamaged(e);
    }
  }

  /** Checks what verify-checksums reports for a running node: snapshots and the store. */
  async verify(): Promise<{ target: string; ok: boolean; detail: string }[]> {
    const target = this.parts.verifyTarget;
    if (target === undefined) return [];
    const { verifyDataDir } = await import("./verify.ts");
    return verifyDataDir(target.paths, { store: this.ctx.store, skipWal: false });
  }

  memberAddresses(): Map<string, MemberAddress> {
    return this.ctx.memberAddresses();
  }

  /** Throws NOT_LEADER (naming the leader when known) unless this node leads; `orElse`: another way out. */
  requireLeader(orElse?: string): void {
    this.ctx.requireLeader(orElse);
  }

  /** What gossip knows here: every member's state, facts and view (null: no gossip, as in the simulator). */
  gossip(): GossipSnapshot | null {
    return this.parts.gossip?.snapshot() ?? null;
  }

  /** Per-peer link state, for cluster-status. */
  peerStatus(): Record<string, { connected: boolean; inboundConnected: boolean; address: string }> {
    return this.ctx.io.network.linkStatus();
  }

  // ─── admin ──────────────────────────────────────────────────────────────────────────

  addMember(member: MemberAddress, options: { learner: boolean; catchUpTimeoutMs: number; signal?: AbortSignal }): Promise<{ index: number; role: "learner" | "voter" }> {
    return this.admin.addMember(member, options);
  }

  promoteMember(id: string): Promise<{ index: number }> {
    return this.admin.promoteMember(id);
  }

  updateMember(id: string, change: { peer?: string; client?: string; admin?: string }): Promise<{ index: number; member: MemberAddress }> {
    return this.admin.updateMember(id, change);
  }

  removeMember(id: string): Promise<{ index: number }> {
    return this.admin.removeMember(id);
  }

  transferLeader(to: string, timeoutMs: number): Promise<{ leader: string; term: number }> {
    return this.admin.transferLeader(to, timeoutMs);
  }

  /** Take a snapshot now (or join the one in progress). */
  takeSnapshot(): Promise<SnapshotOutcome> {
    return this.snapshots.take();
  }

  /** A message from a peer (the network has checked framing, CRC and cluster id). */
  onPeerMessage(from: string, type: number, payload: Uint8Array): void {
    this.loop.onPeerMessage(from, type, payload);
  }

  /** Nothing listens at a member's peer address: its process is gone (a leader's: campaign soon). */
  onPeerUnreachable(id: string): void {
    this.loop.onPeerUnreachable(id);
  }

  /** A connection to a member came up: a leader probes it now (RaftCore.peerReachable). */
  onPeerReachable(id: string): void {
    this.loop.onPeerReachable(id);
  }

  stop(): Promise<void> {
    this.stopping ??= this.stopOnce();
    return this.stopping;
  }

  private async stopOnce(): Promise<void> {
    const { ctx } = this;
    if (ctx.stopped) return;
    // Decided while still a member: it leads, or knows no leader (wal-archiver.ts).
    const archiver = ctx.walArchiver;
    const archiveLast = archiver?.archivesAtStop() ?? false;
    ctx.stopped = true;
    this.sql?.close();
    this.loop.stop();
    this.transfer.stop();
    ctx.io.network.close();
    this.loop.failPending(new SvcError("SHUTTING_DOWN", "the node is shutting down", { hint: "retry against another node" }));
    // Out of the cluster now (the others elect a leader meanwhile), the last segment is archived
    // from the WAL, which stays open until then.
    if (archiveLast) {
      await archiver?.archiveAtStop(archiveAtStopMsMax).catch((e: unknown) => {
        ctx.logger.error("archiving the last WAL segment at stop failed; the next leader archives it", { error: errorMessage(e) });
      });
    }
    archiver?.stop();
    await this.snapshots.settle();
    try {
      ctx.io.log.close();
      // What is applied, not what is committed: entries committed but not yet applied were
      // answered to no one, and a restart commits them again from the WAL. (A lone node whose
      // WAL is then removed by hand starts from its store; see load.ts refuseLostCommittedEntries.)
      ctx.io.log.saveHardState({ ...ctx.persistedHardState, commit: Math.min(ctx.core.status().commit, ctx.store.meta.appliedIndex) });
    } catch (e) {
      ctx.logger.error("could not close the WAL cleanly; it is replayed on the next start", { error: errorMessage(e) });
    }
    try {
      ctx.store.close();
    } catch (e) {
      // The boot mark stays: should the machine go down before the next start, the store is rebuilt.
      ctx.logger.error("could not flush the store to disk; it is checked again on the next start", { error: errorMessage(e) });
    }
    this.parts.release();
    ctx.logger.info("stopped");
  }
}

/** An execute entry's answer; a retried request id answers with the entry that applied it first. */
function executeOutcome(applyResult: ApplyResult, entryIndex: number): ExecuteOutcome {
  assert(applyResult.kind === "execute" || applyResult.kind === "unreadable", "an execute entry applies as execute");
  if (applyResult.kind !== "execute") throw new SvcError("APPLY_FAILED", "the entry could not be read back when applied");
  const index = applyResult.firstIndex ?? entryIndex;
  if (!applyResult.ok && applyResult.requestIdReused === true) throw requestIdReused(applyResult.message, index);
  if (!applyResult.ok) {
    throw new SvcError("SQL_ERROR", `statement ${applyResult.statementIndex}: ${applyResult.message}`, {
      hint: "nothing in this batch was applied",
      details: { statementIndex: applyResult.statementIndex, index },
    });
  }
  return { results: applyResult.results, index };
}
