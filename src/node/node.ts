// The node: the one place that wires the pure Raft core to disks, timers and peers.
// One loop owns every effect, in this order for each Ready:
//   install snapshot → append entries to the WAL → save term/vote → fdatasync (once, for
//   every record of the batch: group commit) → send messages → apply committed → answer
//   clients → advance.
// A client is answered only after its entry was fsynced on a quorum and applied.

import { join } from "node:path";
import type { Config } from "../config/index.ts";
import { RaftCore, type MembershipChange, type Message, type Ready } from "../raft/index.ts";
import { decodeMessage, encodeMessage } from "../raft/codec.ts";
import { createTransport, MessageType, type Transport } from "../transport/index.ts";
import { SnapshotReceiver, SnapshotSender } from "./snapshot-transfer.ts";
import type { Entry, SnapshotMeta } from "../raft/types.ts";
import { fsyncPathAsync, lockDataDir, snapshotStateFile, writeHardState, type DataDirLock, type StoredHardState } from "../storage/index.ts";
import {
  Store, createSnapshotImage, encodeCommand,
  type MemberAddress, type ApplyResult, type QueryResult, type SqlValue, type Statement, type StoreStats,
} from "../store/index.ts";
import { assert } from "../util/assert.ts";
import { SvcError, errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/logger.ts";
import { createPrng } from "../util/prng.ts";
import { isPristine, loadState, prepareDataDir, toHardState, type LoadedState } from "./load.ts";
import { createNodeMetrics, type NodeMetrics } from "./metrics.ts";
import { recoveryStateCode, type RecoveryState } from "./recovery-state.ts";
import { ApplyWaiters } from "./waiters.ts";
import { ReadBarriers } from "./reads.ts";
import { bootstrapIfNew, clampCommit, forgetLocalState, hasLostLog, markLostLog, rebaseOnStore } from "./bootstrap.ts";

export type Consistency = "linearizable" | "leader" | "stale";

export interface ExecuteOutcome {
  results: { rowsAffected: number; lastInsertId: number | bigint }[];
  index: number;
}

export interface SnapshotOutcome {
  index: number;
  term: number;
  dir: string;
  sizeBytes: number;
  durationMs: number;
}

/** Snapshots the node keeps itself; older ones go (the cleanup job also removes by age). */
const snapshotsRetainedCount = 3;
const writeTimeoutMs = 30_000;
const snapshotIdleFactor = 10;
const largeCompactionBytes = 16 * 1024 * 1024;
const idleTicksBeforeCollect = 5;

export class SvcNode {
  private recovery: RecoveryState = "starting";
  private readonly waiters = new ApplyWaiters();
  readonly metrics: NodeMetrics;
  private tickTimer: ReturnType<typeof setInterval> | null = null;
  private readyScheduled = false;
  /** A Ready's WAL sync is running on another thread; the next Ready waits for it. */
  private syncInFlight = false;
  private stopped = false;
  private fatalError: SvcError | null = null;
  private persistedHardState: StoredHardState;
  private snapshotInFlight: Promise<SnapshotOutcome> | null = null;
  private lastSnapshotIndex: number;
  /**
   * Automatic snapshots copy the whole store, so under a high write rate snapshot_interval
   * alone would keep one running all the time. After each, the next automatic one waits
   * snapshotIdleFactor times as long as it took: at most a tenth of the time goes to them
   * (each copies the whole store, and that I/O delays the WAL's fsyncs).
   * POST /admin/snapshot is not held back.
   */
  private nextAutoSnapshotMs = 0;
  /** What the node had applied and compacted when last seen idle (see collectWhenIdle). */
  private idleSeen = "";
  private idleTicks = 0;
  private collectedAt = "";
  /** Bytes of entry data applied since the newest snapshot began. */
  private logBytesSinceSnapshot = 0;
  /** Reads waiting for the ReadIndex round in flight, and those that arrived after it began. */
  private readonly reads: ReadBarriers;
  /** Commit index at which recovery is complete once applied. */
  private catchUpTarget = 0;
  /**
   * Set when the node lost log entries it held (a cleared WAL): it cannot know how far its
   * log went, so it neither votes nor campaigns (either could elect a leader without writes
   * it had acknowledged) until a leader elected by the others has confirmed, by a ReadIndex
   * round, that this node applied everything committed.
   */
  private lostLog = false;
  /** A ReadIndex round is out to learn whether this joining node has caught up. */
  private catchUpProbe = false;
  /** The highest commit index the leader has told this node. */
  private leaderCommitSeen = 0;
  private readonly sender: SnapshotSender;
  private readonly receiver: SnapshotReceiver;
  private clusterIdValue: string;

  private constructor(
    readonly config: Config,
    private readonly logger: Logger,
    private readonly lock: DataDirLock,
    private readonly state: LoadedState,
    private readonly core: RaftCore,
    clusterId: string,
    private readonly transport: Transport,
  ) {
    this.clusterIdValue = clusterId;
    this.persistedHardState = state.hardState;
    this.lastSnapshotIndex = state.snapshot?.index ?? 0;
    this.metrics = createNodeMetrics({
      commitIndex: () => this.core.status().commit,
      appliedIndex: () => this.state.store.meta.appliedIndex,
      leaderCommitIndex: () => {
        const status = this.core.status();
        return status.role === "leader" ? status.commit : this.leaderCommitSeen;
      },
      term: () => this.core.status().term,
      isLeader: () => this.core.status().role === "leader",
      roleCode: () => ["follower", "pre_candidate", "candidate", "leader"].indexOf(this.core.status().role),
      recoveryStateCode: () => recoveryStateCode(this.recovery),
      snapshotIndex: () => this.lastSnapshotIndex,
      lastLogIndex: () => this.core.status().lastIndex,
      walSegments: () => this.state.wal.segments().length,
      walSizeBytes: () => this.state.wal.segments().reduce((sum, s) => sum + s.sizeBytes, 0),
      pendingWrites: () => this.waiters.size,
      writesPaused: () => this.state.store.meta.writesPaused,
    });
    this.reads = new ReadBarriers(core, {
      notLeader: (leaderId) => this.notLeader(leaderId),
      started: () => {
        this.metrics.readIndexRounds.inc();
        this.schedule();
      },
    }, 2 * config.raft.electionTimeoutMs);
    const t = this.metrics.transfer;
    this.sender = new SnapshotSender(transport, state.snapshots, logger.child("snapshot"), t, (peer, ok) => {
      this.core.reportSnapshot(peer, ok);
      this.schedule();
    });
    this.receiver = new SnapshotReceiver(transport, state.snapshots, state.paths.storePath, logger.child("snapshot"), t, (message, clusterId) => {
      if (this.clusterIdValue === "" && clusterId !== "") this.adoptClusterId(clusterId);
      this.core.step(message);
      this.schedule();
    }, () => {
      if (this.recovery === "requesting_snapshot" || this.recovery === "joining") this.setRecovery("installing_snapshot");
    }, () => this.state.store.meta.appliedIndex);
  }

  get clusterId(): string {
    return this.clusterIdValue;
  }

  /**
   * Open the data directory and start the node. Fails, before touching any data, when the
   * directory is not writable or another process holds its lock.
   */
  static async start(config: Config, logger: Logger): Promise<SvcNode> {
    const paths = prepareDataDir(config.dataDir);
    const lock = lockDataDir(config.dataDir, `node ${config.nodeId}`);
    let node: SvcNode | null = null;
    const transport = createTransport({
      nodeId: config.nodeId,
      clusterId: "",
      listen: { hostname: config.listen.peer.host, port: config.listen.peer.port },
      logger: logger.child("transport"),
      // Messages that arrive before the node exists are dropped; Raft retransmits.
      onMessage: (from, type, payload) => node?.onPeerMessage(from, type, payload),
    });
    try {
      transport.start();
      const log = logger.child("node");
      log.info("recovery: starting", { nodeId: config.nodeId, dataDir: config.dataDir });
      if (config.wal.archiveCommand !== "") {
        log.warn("wal.archive_command is set, but this version does not archive WAL segments yet: segments covered by a snapshot are removed unarchived", {
          hint: "take snapshot backups (POST /admin/snapshot and copy raft/snapshots) until WAL archiving is available",
        });
      }
      const state = await loadState(paths, config, logger.child("wal"));
      const wasPristine = isPristine(state);
      const clusterId = bootstrapIfNew(state, config, log);
      const multiMember = config.cluster.members.length > 1;
      // (A lone voter has no one to catch up with: it never holds back.)
      let lostLog = multiMember && hasLostLog(paths.raftDir);
      if (multiMember && state.walWasEmpty && !wasPristine) {
        // SPEC §3.1: no WAL means the state comes from the leader.
        forgetLocalState(state, log);
        lostLog = true;
      } else if (state.needsSnapshotAt !== null) {
        if (multiMember) {
          forgetLocalState(state, log);
          lostLog = true;
        } else {
          await rebaseOnStore(state, clusterId, log);
        }
      }
      const tickMs = config.raft.heartbeatIntervalMs;
      const core = new RaftCore(
        {
          id: config.nodeId,
          electionTimeoutTicks: Math.max(2, Math.round(config.raft.electionTimeoutMs / tickMs)),
          heartbeatTicks: 1,
          prng: createPrng(Date.now() >>> 0, process.pid),
          logger: logger.child("raft"),
          preVote: true,
          checkQuorum: true,
          maxInflightAppends: 64,
          maxEntriesPerAppend: 4096,
          maxBytesPerAppend: 4 * 1024 * 1024,
          maxPendingProposals: 65_536,
        },
        {
          hardState: clampCommit(toHardState(state.hardState), state),
          snapshot: state.snapshot,
          entries: state.entries,
          appliedIndex: state.store.meta.appliedIndex,
        },
      );
      node = new SvcNode(config, log, lock, state, core, clusterId, transport);
      node.lostLog = lostLog;
      if (clusterId !== "") transport.setClusterId(clusterId);
      node.refreshPeers();
      node.begin();
      return node;
    } catch (e) {
      transport.close();
      lock.release();
      throw e;
    }
  }

  // ─── public surface ─────────────────────────────────────────────────────────────────

  get recoveryState(): RecoveryState {
    return this.recovery;
  }

  /** The unrecoverable error that stopped this node from serving, if any. */
  get fatal(): SvcError | null {
    return this.fatalError;
  }

  get writesPaused(): boolean {
    return this.state.store.meta.writesPaused;
  }

  status() {
    const raft = this.core.status();
    return {
      nodeId: this.config.nodeId,
      clusterId: this.clusterId,
      recovery: this.recovery,
      role: raft.role,
      term: raft.term,
      leaderId: raft.leaderId,
      commitIndex: raft.commit,
      appliedIndex: this.state.store.meta.appliedIndex,
      lastLogIndex: raft.lastIndex,
      snapshotIndex: this.lastSnapshotIndex,
      membership: raft.membership,
      writesPaused: this.state.store.meta.writesPaused,
    };
  }

  /** Propose a batch of statements (one transaction) and wait until it is applied. */
  async execute(statements: Statement[]): Promise<ExecuteOutcome> {
    this.checkServing();
    if (this.state.store.meta.writesPaused) {
      throw new SvcError("WRITES_PAUSED", "writes are paused on this cluster", { hint: "run `svc admin resume-writes` when the backup is done" });
    }
    const result = await this.propose(encodeCommand({ op: "execute", statements }));
    const { applyResult, index } = result;
    assert(applyResult.kind === "execute" || applyResult.kind === "unreadable", "an execute entry applies as execute");
    if (applyResult.kind !== "execute") throw new SvcError("APPLY_FAILED", "the entry could not be read back when applied");
    if (!applyResult.ok) {
      throw new SvcError("SQL_ERROR", `statement ${applyResult.statementIndex}: ${applyResult.message}`, {
        hint: "nothing in this batch was applied",
        details: { statementIndex: applyResult.statementIndex, index },
      });
    }
    return { results: applyResult.results, index };
  }

  async setWritesPaused(paused: boolean): Promise<{ index: number }> {
    this.checkServing();
    const { index } = await this.propose(encodeCommand({ op: paused ? "pause_writes" : "resume_writes" }));
    this.logger.info(paused ? "writes paused" : "writes resumed", { index });
    return { index };
  }

  async query(sql: string, params: SqlValue[], consistency: Consistency): Promise<QueryResult> {
    this.checkServing();
    if (consistency === "linearizable") await this.reads.wait();
    else if (consistency === "leader") this.requireLeader();
    return this.state.store.query(sql, params);
  }

  stats(): StoreStats & { raft: ReturnType<SvcNode["status"]>; wal: { segments: number; sizeBytes: number; firstIndex: number; lastIndex: number }; snapshots: { count: number; latestIndex: number; latestSizeBytes: number } } {
    const store = this.state.store.stats();
    const segments = this.state.wal.segments();
    const snapshots = this.state.snapshots.list().filter((s) => s.meta !== null);
    const latest = snapshots.at(-1);
    return {
      ...store,
      raft: this.status(),
      wal: {
        segments: segments.length,
        sizeBytes: segments.reduce((sum, s) => sum + s.sizeBytes, 0),
        firstIndex: segments[0]?.firstIndex ?? 0,
        lastIndex: this.state.wal.lastIndex,
      },
      snapshots: { count: snapshots.length, latestIndex: latest?.index ?? 0, latestSizeBytes: latest?.meta?.stateSizeBytes ?? 0 },
    };
  }

  /** Checks what verify-checksums reports for a running node: snapshots and the store. */
  async verify(): Promise<{ target: string; ok: boolean; detail: string }[]> {
    const { verifyDataDir } = await import("./verify.ts");
    return verifyDataDir(this.state.paths, { store: this.state.store, skipWal: false });
  }

  /** Every member's addresses: the configuration file's, then those replicated at run time. */
  memberAddresses(): Map<string, MemberAddress> {
    const book = new Map<string, MemberAddress>();
    for (const m of this.config.cluster.members) book.set(m.id, { id: m.id, peer: m.peer.raw, client: m.client.raw, admin: m.admin.raw });
    for (const m of this.state.store.memberAddresses()) book.set(m.id, m);
    return book;
  }

  private refreshPeers(): void {
    const peers: Record<string, string> = {};
    for (const [id, m] of this.memberAddresses()) if (id !== this.config.nodeId) peers[id] = m.peer;
    this.transport.setPeers(peers);
  }

  /**
   * Add a member: replicate its addresses, add it as a learner, and unless `learner` is
   * set, promote it to voter once it has caught up (so it never weakens the quorum while
   * it copies the log).
   */
  async addMember(member: MemberAddress, options: { learner: boolean; catchUpTimeoutMs: number }): Promise<{ index: number; role: "learner" | "voter" }> {
    this.checkServing();
    this.requireLeader();
    await this.propose(encodeCommand({ op: "set_member", member }));
    let { index } = await this.proposeChange({ kind: "add_learner", id: member.id });
    if (options.learner) return { index, role: "learner" };
    const deadline = Date.now() + options.catchUpTimeoutMs;
    for (;;) {
      const status = this.core.status();
      const match = status.progress[member.id]?.match ?? 0;
      if (match >= status.commit) break;
      if (Date.now() > deadline) {
        throw new SvcError("CATCH_UP_TIMEOUT", `${member.id} was added as a learner but did not catch up within ${options.catchUpTimeoutMs} ms (it holds ${match} of ${status.commit})`, {
          hint: `check that ${member.id} runs and can reach ${this.config.nodeId}'s peer port, then run \`svc admin promote --id ${member.id}\``,
        });
      }
      await Bun.sleep(50);
    }
    ({ index } = await this.proposeChange({ kind: "promote", id: member.id }));
    return { index, role: "voter" };
  }

  async promoteMember(id: string): Promise<{ index: number }> {
    this.checkServing();
    return this.proposeChange({ kind: "promote", id });
  }

  async removeMember(id: string): Promise<{ index: number }> {
    this.checkServing();
    return this.proposeChange({ kind: "remove", id });
  }

  /** Hand leadership to `to` and wait until it has it. */
  async transferLeader(to: string, timeoutMs: number): Promise<{ leader: string; term: number }> {
    this.checkServing();
    const r = this.core.transferLeadership(to);
    if (!r.ok) {
      if (r.code === "NOT_LEADER") throw this.notLeader(r.leaderId);
      throw new SvcError("INVALID_TRANSFER", r.reason, { hint: "pick a voter that is up to date (see `svc admin cluster-info`)" });
    }
    this.schedule();
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const status = this.core.status();
      if (status.leaderId === to) return { leader: to, term: status.term };
      if (Date.now() > deadline) {
        throw new SvcError("TRANSFER_TIMEOUT", `leadership did not move to ${to} within ${timeoutMs} ms`, { hint: "check that it is running and caught up, then retry" });
      }
      await Bun.sleep(20);
    }
  }

  private async proposeChange(change: MembershipChange): Promise<{ index: number }> {
    const r = this.core.proposeMembership(change, Date.now());
    if (!r.ok) {
      if (r.code === "CHANGE_IN_PROGRESS") {
        throw new SvcError("CHANGE_IN_PROGRESS", "another membership change is still being committed", { hint: "retry in a moment" });
      }
      if (r.code === "INVALID_CHANGE") throw new SvcError("INVALID_CHANGE", `${change.kind} ${change.id}: ${r.reason}`, { hint: "see the current members with `svc admin cluster-info`" });
      throw this.proposeError(r);
    }
    this.schedule();
    await this.waiters.wait(r.index, r.term, Date.now());
    this.logger.info("membership changed", { change: change.kind, id: change.id, index: r.index });
    return { index: r.index };
  }

  /** Per-peer transport state, for cluster-status. */
  peerStatus(): Record<string, { connected: boolean; inboundConnected: boolean; address: string }> {
    const out: Record<string, { connected: boolean; inboundConnected: boolean; address: string }> = {};
    for (const [id, p] of Object.entries(this.transport.stats().peers)) {
      out[id] = { connected: p.connected, inboundConnected: p.inboundConnected, address: p.address };
    }
    return out;
  }

  /** Take a snapshot now (or join the one in progress). */
  takeSnapshot(): Promise<SnapshotOutcome> {
    this.checkServing();
    this.snapshotInFlight ??= this.snapshotNow().finally(() => {
      this.snapshotInFlight = null;
    });
    return this.snapshotInFlight;
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.tickTimer !== null) clearInterval(this.tickTimer);
    this.sender.stop();
    this.transport.close();
    this.waiters.failAll(new SvcError("SHUTTING_DOWN", "the node is shutting down", { hint: "retry against another node" }));
    this.reads.failAll(new SvcError("SHUTTING_DOWN", "the node is shutting down"));
    if (this.snapshotInFlight !== null) await this.snapshotInFlight.catch(() => undefined);
    try {
      this.state.wal.close();
      const status = this.core.status();
      writeHardState(this.state.paths.hardStatePath, { ...this.persistedHardState, commit: status.commit });
    } catch (e) {
      this.logger.error("could not close the WAL cleanly; it is replayed on the next start", { error: errorMessage(e) });
    }
    try {
      this.state.store.close();
    } catch (e) {
      // The boot mark stays: should the machine go down before the next start, the store is rebuilt.
      this.logger.error("could not flush the store to disk; it is checked again on the next start", { error: errorMessage(e) });
    }
    this.lock.release();
    this.logger.info("stopped");
  }

  // ─── the loop ───────────────────────────────────────────────────────────────────────

  private begin(): void {
    const status = this.core.status();
    this.catchUpTarget = status.commit;
    const walHadEntries = status.lastIndex > status.snapshotIndex;
    if (status.membership.voters.length === 0 || this.lostLog || (status.lastIndex === 0 && this.config.cluster.members.length > 1)) {
      this.setRecovery("requesting_snapshot");
      if (!this.lostLog) {
        this.logger.warn("this node belongs to no cluster yet: waiting for a leader to send it a snapshot", {
          hint: "set bootstrap = true on the first node of a new cluster, or add this node from the leader with `svc admin add-node`",
        });
      }
    } else {
      // SPEC §3.1: a node with a WAL replays it, whether or not anything is left to apply.
      this.setRecovery(walHadEntries ? "replaying_wal" : "joining");
      if (walHadEntries) this.logger.info("recovery: replay of the WAL", { from: status.snapshotIndex + 1, to: status.lastIndex, commit: status.commit });
    }
    if (status.membership.voters.length === 1 && status.membership.voters[0] === this.config.nodeId) this.core.campaign();
    this.tickTimer = setInterval(() => {
      // A node that lost entries it held does not campaign (it drops vote requests too):
      // elected, it could lose writes it had acknowledged. Without ticks its election timer
      // never fires; appends from the leader are answered all the same.
      if (!this.lostLog) this.core.tick();
      const now = Date.now();
      this.waiters.expire(now, writeTimeoutMs);
      this.sender.checkStalls(now);
      this.reads.expire(now, this.core.status().leaderId);
      this.maybeAutoSnapshot();
      this.collectWhenIdle();
      this.schedule();
    }, this.config.raft.heartbeatIntervalMs);
    this.schedule();
  }

  private schedule(): void {
    if (this.readyScheduled || this.stopped) return;
    this.readyScheduled = true;
    setImmediate(() => {
      this.readyScheduled = false;
      this.processReady();
    });
  }

  private processReady(): void {
    if (this.stopped || this.fatalError !== null || this.syncInFlight) return;
    try {
      while (this.core.hasReady()) {
        const rd = this.core.ready();
        if (this.persist(rd)) {
          // The WAL is syncing on another thread; requests that arrive meanwhile are
          // proposed and go into the next batch (group commit, pipelined).
          // Only append responses claim durability (the entries they acknowledge must be
          // on disk); everything else leaves now, so the leader's appends reach the
          // followers while its own disk is still syncing. The leader counts itself toward
          // a quorum only after advance(), so this never commits an unsynced entry.
          const afterSync = rd.messages.filter((m) => m.type === "append_response");
          this.send(rd.messages.filter((m) => m.type !== "append_response"));
          this.syncInFlight = true;
          const started = performance.now();
          this.state.wal.syncAsync().then(
            () => {
              this.syncInFlight = false;
              this.metrics.walSyncLatency.observe((performance.now() - started) / 1000);
              this.metrics.walSyncs.inc();
              this.finishReady(rd, afterSync);
              this.processReady();
            },
            (e: unknown) => {
              this.syncInFlight = false;
              // A stop closes the WAL under a sync in flight; its writes were failed already.
              if (!this.stopped) this.fail(e);
            },
          );
          return;
        }
        this.finishReady(rd);
      }
    } catch (e) {
      this.fail(e);
    }
  }

  /** Write what a Ready asks to persist; returns true when an fsync is owed before going on. */
  private persist(rd: Ready): boolean {
    const { wal } = this.state;
    if (rd.snapshot !== null) this.installSnapshot(rd.snapshot);
    if (rd.hardState !== null && (rd.hardState.term !== this.persistedHardState.term || rd.hardState.vote !== this.persistedHardState.vote)) {
      // Term and vote are durable (writeHardState fsyncs) before anything depends on them:
      // before any message leaves, and before the WAL holds an entry of the new term. In the
      // other order, a crash between the two leaves entries newer than the saved term.
      const next = { ...rd.hardState, clusterId: this.clusterId };
      writeHardState(this.state.paths.hardStatePath, next);
      this.persistedHardState = next;
    }
    if (rd.entries.length > 0) {
      wal.append(rd.entries);
      let bytes = 0;
      for (const e of rd.entries) bytes += e.data.length;
      this.metrics.walAppendedBytes.inc(bytes);
      this.metrics.walEntriesPerSync.observe(rd.entries.length);
    }
    return rd.mustSync && rd.entries.length > 0;
  }

  /** Replace the store with a snapshot received from the leader and start the log after it. */
  private installSnapshot(meta: SnapshotMeta): void {
    const entry = this.state.snapshots.list().find((e) => e.index === meta.index && e.term === meta.term && e.meta !== null);
    assert(entry !== undefined, "a snapshot is stepped into the core only after it was filed");
    this.logger.info("recovery: installing snapshot", { index: meta.index, term: meta.term });
    this.state.store.close({ discard: true });
    const storePath = this.state.paths.storePath;
    const staged = Store.installImage(join(entry.dir, snapshotStateFile), storePath, Store.stagedImagePath(storePath, entry.name));
    this.logger.info(staged ? "recovery: snapshot installed from its staged copy" : "recovery: snapshot installed by copying its image", { index: meta.index });
    this.state.store = Store.open(this.state.paths.storePath);
    if (this.clusterIdValue === "" && entry.meta !== null) this.adoptClusterId(entry.meta.clusterId);
    this.state.wal.resetTo(meta.index + 1);
    this.state.wal.removeSegmentsCoveredBy(meta.index);
    this.lastSnapshotIndex = meta.index;
    this.state.snapshots.prune(snapshotsRetainedCount);
    this.catchUpTarget = Math.max(this.catchUpTarget, meta.index);
    this.setRecovery("replaying_after_snapshot");
  }

  private adoptClusterId(clusterId: string): void {
    this.clusterIdValue = clusterId;
    this.transport.setClusterId(clusterId);
    const next = { ...this.persistedHardState, clusterId };
    writeHardState(this.state.paths.hardStatePath, next);
    this.persistedHardState = next;
    if (this.state.store.meta.clusterId === "") this.state.store.setClusterId(clusterId);
    this.logger.info("joined cluster", { clusterId });
  }

  // ─── peers ──────────────────────────────────────────────────────────────────────────

  /** A message from a peer (the transport has checked framing, CRC and cluster id). */
  onPeerMessage(from: string, type: number, payload: Uint8Array): void {
    if (this.stopped || this.fatalError !== null) return;
    switch (type) {
      case MessageType.raft: {
        const decoded = decodeMessage(payload);
        if (!decoded.ok) {
          this.metrics.peerMessagesDropped.labels("malformed").inc();
          this.logger.debug("dropped a malformed raft message", { from, error: decoded.error.code });
          return;
        }
        const m = decoded.message;
        if (m.from !== from || m.to !== this.config.nodeId) {
          this.metrics.peerMessagesDropped.labels("misaddressed").inc();
          return;
        }
        if ((m.type === "vote" || m.type === "pre_vote") && this.lostLog) {
          this.metrics.peerMessagesDropped.labels("vote_while_recovering").inc();
          return;
        }
        if (m.type === "append" || m.type === "heartbeat") this.leaderCommitSeen = Math.max(this.leaderCommitSeen, m.commit);
        this.core.step(m);
        this.schedule();
        return;
      }
      case MessageType.snapshotChunk:
        this.receiver.onChunk(from, payload);
        return;
      case MessageType.snapshotAck:
        this.sender.onAck(from, payload);
        return;
      default:
        this.metrics.peerMessagesDropped.labels("unknown_type").inc();
    }
  }

  private send(messages: readonly Message[]): void {
    for (const m of messages) {
      if (m.type === "snapshot") {
        this.sender.start(m).catch((e: unknown) => {
          this.logger.error("cannot send snapshot", { peer: m.to, error: errorMessage(e) });
          this.core.reportSnapshot(m.to, false);
        });
        continue;
      }
      if (!this.transport.send(m.to, MessageType.raft, encodeMessage(m)) && m.type === "append") this.core.reportUnreachable(m.to);
    }
  }

  /** After persisting: send, apply, answer, advance. */
  private finishReady(rd: Ready, messages: readonly Message[] = rd.messages): void {
    this.send(messages);
    if (rd.committed.length > 0) this.apply(rd.committed);
    for (const rs of rd.readStates) this.reads.confirmed(rs.requestId, rs.index);
    this.core.advance(rd);
    this.afterApply();
  }

  private apply(entries: readonly Entry[]): void {
    const results = this.state.store.apply(entries);
    for (const e of entries) this.logBytesSinceSnapshot += e.data.length;
    const now = Date.now();
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[i];
      const result = results[i];
      assert(entry !== undefined && result !== undefined, "one result per applied entry");
      if (result.kind === "init_cluster" && this.clusterIdValue === "") this.adoptClusterId(this.state.store.meta.clusterId);
      if (result.kind === "set_member") this.refreshPeers();
      const waitedMs = this.waiters.applied(entry.index, entry.term, result, now);
      if (waitedMs >= 0 && result.kind === "execute") {
        if (result.ok) this.metrics.writesTotal.inc();
      }
    }
  }

  private afterApply(): void {
    const applied = this.state.store.meta.appliedIndex;
    this.reads.applied(applied);
    if (this.recovery !== "healthy") this.advanceRecovery(applied);
    this.maybeAutoSnapshot();
  }

  /**
   * Once writes stop for a moment, collect the garbage their bodies and entries left: the
   * engine otherwise keeps it, and the process holds hundreds of megabytes it no longer uses.
   * A snapshot that ends after that drops the log it covers: it is collected the same way.
   */
  private collectWhenIdle(): void {
    const seen = this.snapshotInFlight === null ? `${this.state.store.meta.appliedIndex}/${this.lastSnapshotIndex}` : "snapshotting";
    if (seen !== this.idleSeen) {
      this.idleSeen = seen;
      this.idleTicks = 0;
      return;
    }
    this.idleTicks++;
    if (this.idleTicks === idleTicksBeforeCollect && this.collectedAt !== seen && seen !== "snapshotting") {
      this.collectedAt = seen;
      Bun.gc(true);
    }
  }

  /**
   * Checked after applying and on every tick (a paced snapshot may come due while idle).
   * Due after snapshot_interval entries, or sooner when the entries since the last snapshot,
   * which the log holds in memory until a snapshot lets it drop them, pass a byte budget
   * (a sixty-fourth of max_memory_mb, at most 16 MiB: the process holds about three times
   * what the log does, counting what the allocator keeps); at twice that budget memory wins
   * over the pacing.
   */
  private maybeAutoSnapshot(): void {
    if (this.snapshotInFlight !== null || this.recovery !== "healthy" || this.fatalError !== null || this.stopped) return;
    const budgetBytes = Math.min(16 * 1024 * 1024, this.config.maxMemoryBytes / 64);
    const dueByCount = this.state.store.meta.appliedIndex - this.lastSnapshotIndex >= this.config.snapshotIntervalEntries;
    const dueByBytes = this.logBytesSinceSnapshot >= budgetBytes;
    const paced = performance.now() >= this.nextAutoSnapshotMs || this.logBytesSinceSnapshot >= 2 * budgetBytes;
    if ((dueByCount || dueByBytes) && paced) this.takeSnapshot().catch(() => undefined);
  }

  private advanceRecovery(applied: number): void {
    if ((this.recovery === "replaying_wal" || this.recovery === "replaying_after_snapshot") && applied >= this.catchUpTarget) {
      this.logger.info("recovery: replay finished", { applied });
      this.setRecovery("joining");
    }
    const status = this.core.status();
    if (this.recovery === "requesting_snapshot" && status.leaderId !== null && status.lastIndex > 0) {
      // The leader sent the log itself rather than a snapshot (it had not compacted).
      this.setRecovery("joining");
    }
    if (this.recovery === "installing_snapshot" && !this.receiver.busy(applied) && !this.core.hasReady()) {
      // The transfer ended without an install (the log overtook it): carry on joining.
      this.setRecovery("joining");
    }
    if (this.recovery === "joining" && status.leaderId !== null && !this.catchUpProbe) this.probeCatchUp();
  }

  /**
   * Caught up means applied up to the leader's commit index as the leader itself states it:
   * a ReadIndex round asks exactly that (heartbeats alone cannot tell a lagging follower).
   */
  private probeCatchUp(): void {
    this.catchUpProbe = true;
    this.reads.wait().then(
      () => {
        this.catchUpProbe = false;
        if (this.recovery !== "joining") return;
        if (this.lostLog) {
          markLostLog(this.state.paths.raftDir, false);
          this.logger.info("recovery: holds again all the leader committed; votes and campaigns again");
        }
        this.lostLog = false;
        const status = this.core.status();
        this.logger.info(`recovery: caught_up; joined as ${status.role}`, { applied: this.state.store.meta.appliedIndex, term: status.term, leader: status.leaderId });
        this.setRecovery("healthy");
      },
      () => {
        // No leader answered; the next pass through afterApply tries again.
        this.catchUpProbe = false;
      },
    );
  }

  private async propose(data: Uint8Array): Promise<{ applyResult: ApplyResult; index: number }> {
    const started = performance.now();
    const r = this.core.propose(data, Date.now());
    if (!r.ok) throw this.proposeError(r);
    this.schedule();
    try {
      const applyResult = await this.waiters.wait(r.index, r.term, Date.now());
      this.metrics.writeLatency.observe((performance.now() - started) / 1000);
      return { applyResult, index: r.index };
    } catch (e) {
      if (e instanceof SvcError) this.metrics.writeErrorsTotal.labels(e.code).inc();
      throw e;
    }
  }

  private proposeError(r: { code: string; leaderId?: string | null }): SvcError {
    if (r.code === "NOT_LEADER") return this.notLeader(r.leaderId ?? null);
    if (r.code === "PROPOSALS_FULL") {
      return new SvcError("OVERLOADED", "too many writes are waiting to commit", { hint: "retry after a short wait; add back-pressure in the client" });
    }
    return new SvcError(r.code, `the write was refused: ${r.code}`);
  }

  private notLeader(leaderId: string | null): SvcError {
    const leader = leaderId === null ? undefined : this.memberAddresses().get(leaderId);
    return new SvcError("NOT_LEADER", leaderId === null ? "no leader is known right now" : `this node is not the leader; ${leaderId} is`, {
      hint: leaderId === null ? "retry shortly: an election is in progress" : "send the request to the leader",
      details: { leaderId, leaderClient: leader?.client ?? null, leaderAdmin: leader?.admin ?? null },
    });
  }

  private requireLeader(): void {
    const status = this.core.status();
    if (status.role !== "leader") throw this.notLeader(status.leaderId);
  }

  // ─── snapshots ──────────────────────────────────────────────────────────────────────

  private async snapshotNow(): Promise<SnapshotOutcome> {
    const started = performance.now();
    this.metrics.snapshotInProgress.set(1);
    const bytesAtStart = this.logBytesSinceSnapshot;
    const { snapshots, paths, wal } = this.state;
    const tempDir = snapshots.beginTemp();
    try {
      const image = await createSnapshotImage(paths.storePath, join(tempDir, snapshotStateFile));
      if (image.appliedIndex <= this.lastSnapshotIndex) {
        snapshots.discard(tempDir);
        const latest = snapshots.latest();
        return { index: this.lastSnapshotIndex, term: latest?.term ?? 0, dir: latest?.dir ?? "", sizeBytes: latest?.meta?.stateSizeBytes ?? 0, durationMs: performance.now() - started };
      }
      const entry = await snapshots.commit(tempDir, {
        clusterId: this.clusterId, index: image.appliedIndex, term: image.appliedTerm, membership: image.membership,
        stateSha256: image.stateSha256,
      });
      // A snapshot installed from the leader meanwhile may already cover more than this one.
      if (!this.stopped && entry.index > this.core.status().snapshotIndex) {
        this.core.compact({ index: entry.index, term: entry.term, membership: image.membership });
        // Removals made durable off this thread: a directory fsync waits for the journal.
        const removed = wal.removeSegmentsCoveredBy(entry.index, undefined, { syncDir: false });
        this.metrics.walSegmentsRemoved.inc(removed.length);
        const pruned = snapshots.prune(snapshotsRetainedCount, { syncDir: false });
        if (removed.length > 0) await fsyncPathAsync(paths.walDir);
        if (pruned.length > 0) await fsyncPathAsync(paths.snapshotsDir);
      }
      this.lastSnapshotIndex = Math.max(this.lastSnapshotIndex, entry.index);
      this.logBytesSinceSnapshot = Math.max(0, this.logBytesSinceSnapshot - bytesAtStart);
      // A compaction that dropped a large log leaves that much garbage: collect it now, while
      // it is known to be there, instead of letting the process grow until the next cycle.
      if (bytesAtStart >= largeCompactionBytes) Bun.gc(false);
      const durationMs = performance.now() - started;
      this.nextAutoSnapshotMs = performance.now() + snapshotIdleFactor * durationMs;
      const sizeBytes = entry.meta?.stateSizeBytes ?? 0;
      this.metrics.snapshotsTotal.inc();
      this.metrics.snapshotDuration.observe(durationMs / 1000);
      this.metrics.snapshotLastCompletedTimestamp.set(Date.now() / 1000);
      this.metrics.snapshotSizeBytes.set(sizeBytes);
      this.logger.info("snapshot taken", { index: entry.index, term: entry.term, dir: entry.dir, sizeBytes, durationMs: Math.round(durationMs) });
      return { index: entry.index, term: entry.term, dir: entry.dir, sizeBytes, durationMs };
    } catch (e) {
      snapshots.discard(tempDir);
      // A failing snapshot (a full disk, say) is retried, but not on every write.
      this.nextAutoSnapshotMs = performance.now() + 10_000;
      this.metrics.snapshotFailuresTotal.inc();
      this.logger.error("snapshot failed", { error: errorMessage(e) });
      throw e;
    } finally {
      this.metrics.snapshotInProgress.set(0);
    }
  }

  // ─── state ──────────────────────────────────────────────────────────────────────────

  private setRecovery(state: RecoveryState): void {
    if (this.recovery === state) return;
    this.logger.info(`recovery: ${this.recovery} -> ${state}`);
    this.recovery = state;
  }

  private checkServing(): void {
    if (this.fatalError !== null) throw this.fatalError;
    if (this.stopped) throw new SvcError("SHUTTING_DOWN", "the node is shutting down");
  }

  /** A storage failure: nothing unsynced was acknowledged, but the node cannot go on safely. */
  private fail(e: unknown): void {
    const error = e instanceof SvcError ? e : new SvcError("STORAGE_FAILED", `storage failure: ${errorMessage(e)}`, {
      hint: "check the disk (free space, I/O errors in the kernel log); the node stops and replays its WAL on restart",
      cause: e,
    });
    this.fatalError = error;
    this.logger.error(`fatal: ${error.message}`, { hint: error.hint });
    this.waiters.failAll(error);
    this.reads.failAll(error);
    this.onFatal?.(error);
  }

  /** Called once when the node hits an unrecoverable error; serve.ts exits the process. */
  onFatal: ((e: SvcError) => void) | null = null;
}

