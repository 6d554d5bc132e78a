// A deterministic simulation of svc nodes: the real SvcNode (effect loop, recovery flow,
// proposer, snapshot policy and install, SQL store) built by SvcNode.create on the in-memory
// twins of its io — ManualClock, MemLogStore, MemSnapshots with an in-memory Store — and a
// simulated network. One seed decides everything: the cluster's shape, message loss, delay,
// duplication and partitions, crashes (which lose exactly what was not synced), fsync errors,
// and the client load. Checked: no acknowledged write is ever missing from a member that has
// applied past it, members that applied the same index hold the same rows, linearizable reads
// never go back in time, and once faults stop a last write reaches every member.

import type { Config, Member } from "../../src/config/index.ts";
import { ManualClock, MemLogStore, type HardStateRecord, type MemLogImage, type PeerNetwork } from "../../src/io/index.ts";
import { SvcNode, planStart, type SnapshotMessage, type SnapshotTransfer, type SnapshotTransferHooks } from "../../src/node/index.ts";
import { RaftCore, encodeMembership, isMember, type Entry, type Membership } from "../../src/raft/index.ts";
import { MemSnapshots, Store, encodeCommand, type MemSnapshot } from "../../src/store/index.ts";
import { createPrng, silentLogger, type Logger, type Prng } from "../../src/util/index.ts";

export interface NodeSimConfig {
  readonly seed: number;
  readonly voterCount: number;
  /** Ids beyond the voters that membership changes may add (they start empty). */
  readonly spareCount: number;
  /** Every member starts with the bootstrap entries (else only n1 has them; the rest are sent them). */
  readonly allBootstrapped: boolean;
  readonly stepsMs: number;
  readonly snapshotIntervalEntries: number;
  /** When an image is due: the WAL kept since the newest one, in bytes (small, so images come often). */
  readonly imageLogBytesMin: number;
  readonly lossRate: number;
  readonly duplicateRate: number;
  readonly delayMaxMs: number;
  readonly syncDelayMaxMs: number;
  readonly crashPerMs: number;
  /** Every member goes down at once (each comes back after its own delay). */
  readonly powerLossPerMs: number;
  readonly fsyncErrorPerMs: number;
  readonly partitionPerMs: number;
  readonly writePerMs: number;
  readonly readPerMs: number;
  /** A member restarts with its WAL emptied (SPEC §4.6): it must refuse to vote until caught up. */
  readonly walLossPerMs: number;
  readonly membershipPerMs: number;
  readonly transferPerMs: number;
  /** The Raft core's own options, varied to stress it (production uses fixed values: see start.ts). */
  readonly core: { readonly preVote: boolean; readonly checkQuorum: boolean; readonly maxInflightAppends: number; readonly maxEntriesPerAppend: number; readonly maxBytesPerAppend: number; readonly maxInflightBytes: number };
  /** A member's disk is full for a while: appends and hard-state saves fail with ENOSPC (the node stalls, then resumes). */
  readonly diskFullPerMs: number;
  /** The node's max_memory: a small one makes the in-memory log a few entries long, so catch-ups read the log store. */
  readonly maxMemoryBytes: number;
  /** Members behind the in-memory log are sent entries from the log store (else a snapshot at once). */
  readonly catchUpFromLogStore: boolean;
}

export function nodeSimConfigForSeed(seed: number): NodeSimConfig {
  const p = createPrng(seed, 0x51de);
  const pick = <T>(xs: readonly T[]): T => xs[p.nextInt(xs.length)] as T;
  const quiet = p.next() < 0.15;
  const voterCount = pick([1, 3, 3, 5]);
  const membership = voterCount > 1 && p.next() < 0.35;
  return {
    seed,
    voterCount,
    spareCount: membership ? 2 : 0,
    allBootstrapped: p.next() < 0.7,
    stepsMs: 2500 + p.nextInt(1500),
    snapshotIntervalEntries: pick([8, 20, 64, 100_000]),
    imageLogBytesMin: pick([2_000, 20_000, 1 << 30]),
    lossRate: quiet ? 0 : pick([0, 0.01, 0.05]),
    duplicateRate: quiet ? 0 : pick([0, 0.02]),
    delayMaxMs: pick([1, 3, 8]),
    syncDelayMaxMs: pick([0, 2, 10]),
    crashPerMs: pick([0, 0.0005, 0.002]),
    powerLossPerMs: pick([0, 0.0003, 0.001]),
    fsyncErrorPerMs: quiet ? 0 : pick([0, 0, 0.0005]),
    partitionPerMs: quiet ? 0 : pick([0, 0.0005, 0.002]),
    writePerMs: pick([0.05, 0.2]),
    readPerMs: pick([0.02, 0.1]),
    walLossPerMs: voterCount > 1 ? pick([0, 0, 0.0005]) : 0,
    membershipPerMs: membership ? pick([0.001, 0.003]) : 0,
    transferPerMs: voterCount > 1 ? pick([0, 0.0005]) : 0,
    core: {
      preVote: p.next() < 0.8,
      checkQuorum: p.next() < 0.8,
      maxInflightAppends: pick([1, 2, 8, 64]),
      maxEntriesPerAppend: pick([1, 3, 16, 4096]),
      maxBytesPerAppend: pick([64, 1024, 64 * 1024, 4 * 1024 * 1024]),
      maxInflightBytes: pick([1024, 64 * 1024, 4 * 1024 * 1024, Number.POSITIVE_INFINITY]),
    },
    diskFullPerMs: quiet ? 0 : pick([0, 0.0005, 0.002]),
    // Drawn last, so every earlier choice of a seed stays what it was.
    maxMemoryBytes: pick([256 * 1024 * 1024, 64 * 1024, 4 * 1024]),
    catchUpFromLogStore: p.next() < 0.85,
  };
}

const heartbeatMs = 10;
const electionMs = 100;
const settleMsMax = 20_000;
const chunkType = 0x11;

export class NodeSimViolation extends Error {}

/** What survives a crash: the synced log and hard state, and the filed snapshots. */
interface Disk {
  log: MemLogImage<Entry>;
  snapshots: readonly MemSnapshot[];
  /** raft/wal/ was emptied while the node was down. */
  walCleared: boolean;
}

interface Packet {
  readonly atMs: number;
  readonly order: number;
  readonly from: string;
  readonly to: string;
  readonly type: number;
  readonly payload: Uint8Array;
  /** A snapshot moved in one piece (the transfer twin). */
  readonly snapshot?: { readonly message: SnapshotMessage; readonly image: Uint8Array; readonly record: MemSnapshot["record"] };
}

/** Share of deliveries to a live member after which its sender is told it is unreachable anyway. */
const staleUnreachableRate = 0.002;

class SimMember {
  node: SvcNode | null = null;
  clock: ManualClock | null = null;
  log: MemLogStore<Entry> | null = null;
  /** The running node's core, for the checks the simulator makes of what it believes. */
  core: RaftCore | null = null;
  snapshots: MemSnapshots | null = null;
  transferHooks: SnapshotTransferHooks | null = null;
  downUntilMs = 0;
  /** Until then the member's disk is full: its log store refuses appends and hard-state saves. */
  diskFullUntilMs = 0;
  /** Removed from the cluster and shut down, as an operator would. */
  retired = false;
  constructor(readonly id: string, public disk: Disk) {}
}

export class NodeSimulation {
  readonly prng: Prng;
  readonly members: SimMember[] = [];
  nowMs = 0;
  private packets: Packet[] = [];
  private readonly cuts = new Set<string>();
  private partitionEndsAtMs = -1;
  private writeSeq = 0;
  /** Acknowledged writes: row id → the log index it was applied at. */
  readonly acked = new Map<number, number>();
  /** For each read: rows acknowledged when it started; its answer must hold at least those. */
  private readsChecked = 0;
  private readonly contentAt = new Map<number, string>();
  /** Election safety: the leader seen in each term. */
  private readonly leaderOfTerm = new Map<number, string>();
  /** Log matching: what each (index, term) synced anywhere holds. */
  private readonly entryAt = new Map<string, number>();
  private adminInFlight = false;
  /** Removal notices seen (member@configIndex), counted once each. */
  private readonly noticesSeen = new Set<string>();
  /** What happened in the run, for the test's summary. */
  readonly counts = { crashes: 0, powerLosses: 0, walLosses: 0, fsyncErrors: 0, diskFulls: 0, membershipChanges: 0, removalNotices: 0, transfers: 0, snapshotsSent: 0, elections: 0, logStoreReads: 0, logStoreEntries: 0, logStoreMisses: 0 };
  readonly trace: string[] = [];
  private readonly memberConfig: Member[];

  constructor(readonly config: NodeSimConfig, private readonly logger: Logger = silentLogger) {
    this.prng = createPrng(config.seed, 1);
    const voterIds = Array.from({ length: config.voterCount }, (_, i) => `n${i + 1}`);
    const ids = Array.from({ length: config.voterCount + config.spareCount }, (_, i) => `n${i + 1}`);
    this.memberConfig = ids.map((id, i) => ({
      id,
      peer: addr(`10.0.0.${i + 1}:7879`),
      client: addr(`10.0.0.${i + 1}:7878`),
      admin: addr(`10.0.0.${i + 1}:9090`),
    }));
    const membership: Membership = { voters: voterIds, learners: [] };
    const clusterId = `sim-${config.seed}`;
    const bootstrap: Entry[] = [
      { term: 1, index: 1, kind: "config", timestampMs: 0, data: encodeMembership(membership) },
      { term: 1, index: 2, kind: "normal", timestampMs: 0, data: encodeCommand({ op: "init_cluster", clusterId }) },
    ];
    for (const id of ids) {
      const holds = voterIds.includes(id) && (config.allBootstrapped || id === "n1");
      const hardState: HardStateRecord | null = holds ? { term: 1, vote: null, commit: 2, clusterId } : null;
      this.members.push(new SimMember(id, { log: { entries: holds ? bootstrap : [], offset: 0, hardState, lostLog: false }, snapshots: [], walCleared: false }));
    }
    for (const m of this.members) this.start(m);
  }

  note(s: string): void {
    this.trace.push(`[${this.nowMs}] ${s}`);
    if (this.trace.length > 300) this.trace.splice(0, 100);
  }

  private config_(id: string): Config {
    return {
      nodeId: id,
      dataDir: `mem:${id}`,
      maxMemoryBytes: this.config.maxMemoryBytes,
      snapshotIntervalEntries: this.config.snapshotIntervalEntries,
      listen: { client: addr("127.0.0.1:0"), admin: addr("127.0.0.1:0"), peer: addr("127.0.0.1:0") },
      cluster: { bootstrap: false, members: this.memberConfig.slice(0, this.config.voterCount) },
      wal: { archiveCommand: "", archiveTimeoutMs: 60_000, segmentSizeBytes: 1 << 20 },
      raft: { heartbeatIntervalMs: heartbeatMs, electionTimeoutMs: electionMs },
      limits: { queryTimeoutMs: 5000, adminQueryTimeoutMs: 60_000, writeCheckTimeoutMs: 1000 },
    };
  }

  /** Start (or restart) a member on what its disk holds, as the real load does. */
  private start(m: SimMember): void {
    const disk = m.disk;
    const clock = new ManualClock(1_700_000_000_000 + this.nowMs);
    const snapshots = new MemSnapshots(disk.snapshots);
    const latest = snapshots.latest();
    const snapshotIndex = latest?.index ?? 0;
    let logImage = disk.log;
    const pristine = disk.log.hardState === null && latest === null && disk.log.entries.length === 0;
    // As the real load does: a store (rebuilt from the newest snapshot) ahead of the log's end
    // (a snapshot filed on receipt, a crash before its install restarted the log) needs the log
    // to start over after it.
    const logLastIndex = disk.log.offset + disk.log.entries.length;
    const needsSnapshotAt = snapshotIndex > logLastIndex ? snapshotIndex : null;
    const plan = planStart({ multiMember: this.config.voterCount > 1, walWasEmpty: disk.walCleared, wasPristine: pristine, needsSnapshotAt });
    if (plan === "rebase_on_store") {
      const hs = disk.log.hardState ?? { term: 0, vote: null, commit: 0, clusterId: "" };
      logImage = { entries: [], offset: snapshotIndex, hardState: { ...hs, commit: snapshotIndex }, lostLog: disk.log.lostLog, removed: disk.log.removed ?? null };
      this.note(`${m.id} starts with its log after the store's snapshot ${snapshotIndex} (the log ended at ${logLastIndex})`);
    } else if (plan === "forget_local_state") {
      // As the real start does: the log restarts after the newest snapshot, the commit index
      // falls back to it, and the member neither votes nor campaigns until it caught up.
      const hs = disk.log.hardState ?? { term: 0, vote: null, commit: 0, clusterId: "" };
      logImage = { entries: [], offset: snapshotIndex, hardState: { ...hs, commit: snapshotIndex }, lostLog: true, removed: disk.log.removed ?? null };
      this.note(`${m.id} starts with its WAL emptied: forgets what it held past ${snapshotIndex}`);
    }
    m.disk = { ...disk, log: logImage, walCleared: false };
    const log = new MemLogStore<Entry>(logImage);
    // The store is derived: rebuilt from the newest snapshot, then the log replays.
    const store = latest === null ? Store.openInMemory() : Store.openInMemory(snapshots.image(latest.term, latest.index));
    const entries = log.all().filter((e) => e.index > snapshotIndex);
    if ((entries[0]?.index ?? snapshotIndex + 1) !== snapshotIndex + 1) throw new NodeSimViolation(`${m.id}: the log starts at ${entries[0]?.index} after a snapshot at ${snapshotIndex}`);
    log.onDurable = (fresh) => this.checkLogMatching(m.id, fresh);
    const saved = logImage.hardState ?? { term: entries.at(-1)?.term ?? 0, vote: null, commit: 0, clusterId: "" };
    const lastIndex = entries.at(-1)?.index ?? snapshotIndex;
    const hardState = { ...saved, commit: Math.min(saved.commit, lastIndex) };
    const core = new RaftCore(
      {
        id: m.id,
        electionTimeoutTicks: electionMs / heartbeatMs,
        heartbeatTicks: 1,
        prng: createPrng(this.config.seed, this.prng.nextU32()),
        logger: this.logger.child(m.id),
        preVote: this.config.core.preVote,
        checkQuorum: this.config.core.checkQuorum,
        maxInflightAppends: this.config.core.maxInflightAppends,
        maxEntriesPerAppend: this.config.core.maxEntriesPerAppend,
        maxBytesPerAppend: this.config.core.maxBytesPerAppend,
        maxInflightBytes: this.config.core.maxInflightBytes,
        maxPendingProposals: 1024,
        catchUpFromLogStore: this.config.catchUpFromLogStore,
      },
      {
        hardState: { term: hardState.term, vote: hardState.vote, commit: hardState.commit },
        snapshot: latest === null ? null : { index: latest.index, term: latest.term, membership: latest.membership },
        entries,
        appliedIndex: store.meta.appliedIndex,
        // As the real start does with raft/REMOVED.
        removal: logImage.removed == null ? null : { configIndex: logImage.removed.configIndex, by: logImage.removed.by },
      },
    );
    // A full disk as the WAL shows it: the write fails with ENOSPC and changes nothing.
    const append = log.append.bind(log);
    const saveHardState = log.saveHardState.bind(log);
    const refuseWhenFull = (): void => {
      if (this.nowMs < m.diskFullUntilMs) throw Object.assign(new Error("ENOSPC: no space left on device (simulated)"), { code: "ENOSPC" });
    };
    log.append = (fresh) => {
      refuseWhenFull();
      append(fresh);
    };
    log.saveHardState = (state) => {
      refuseWhenFull();
      saveHardState(state);
    };
    const readCommitted = log.readCommitted.bind(log);
    log.readCommitted = async (reader, from, through, bytesMax) => {
      const got = await readCommitted(reader, from, through, bytesMax);
      if (got === null) this.counts.logStoreMisses++;
      else {
        this.counts.logStoreReads++;
        this.counts.logStoreEntries += got.length;
        this.note(`${m.id} read ${from}..${got.at(-1)?.index} back from its log store for ${reader}`);
      }
      return got;
    };
    log.deferSync = (complete) => clock.after(this.prng.nextInt(this.config.syncDelayMaxMs + 1), complete);
    const network: PeerNetwork = {
      send: (peerId, type, payload) => {
        this.sendPacket(m.id, peerId, type, payload);
        return true;
      },
      setPeers: () => undefined,
      setClusterId: () => undefined,
      linkStatus: () => ({}),
      close: () => undefined,
    };
    m.clock = clock;
    m.log = log;
    m.core = core;
    m.snapshots = snapshots;
    m.node = SvcNode.create({
      config: this.config_(m.id),
      logger: this.logger.child(m.id),
      io: { clock, log, snapshots, network, collectGarbage: () => undefined },
      core,
      store,
      hardState,
      clusterId: hardState.clusterId !== "" ? hardState.clusterId : store.meta.clusterId,
      lostLog: logImage.lostLog,
      removedMark: logImage.removed ?? null,
      checkpointIndex: 0,
      imageLogBytesMin: this.config.imageLogBytesMin,
      makeTransfer: (hooks) => {
        m.transferHooks = hooks;
        return this.transferTwin(m);
      },
      release: () => undefined,
    });
    m.node.onFatal = (e) => this.note(`${m.id} fatal: ${e.code} ${e.message}`);
    this.note(`${m.id} started (log ${log.lastIndex}, snapshot ${snapshotIndex}, recovery ${m.node.recoveryState})`);
  }

  /** The transfer twin: a filed image moves to the follower in one packet, or is lost. */
  private transferTwin(m: SimMember): SnapshotTransfer {
    return {
      send: (message) => {
        const record = m.snapshots?.find(message.snapshot.term, message.snapshot.index) ?? null;
        const image = record === null ? null : m.snapshots?.image(record.term, record.index) ?? null;
        if (record === null || image === null) throw new NodeSimViolation(`${m.id} was asked to send snapshot ${message.snapshot.index} it does not hold`);
        this.packets.push({ atMs: this.nowMs + 1 + this.prng.nextInt(this.config.delayMaxMs * 4 + 1), order: this.prng.nextU32(), from: m.id, to: message.to, type: chunkType, payload: new Uint8Array(0), snapshot: { message, image, record } });
        return Promise.resolve();
      },
      onChunk: () => undefined,
      onAck: () => undefined,
      checkStalls: () => undefined,
      busy: () => false,
      stop: () => undefined,
    };
  }

  private sendPacket(from: string, to: string, type: number, payload: Uint8Array): void {
    if (this.prng.next() < this.config.lossRate) return;
    const copies = this.prng.next() < this.config.duplicateRate ? 2 : 1;
    for (let i = 0; i < copies; i++) {
      this.packets.push({ atMs: this.nowMs + 1 + this.prng.nextInt(this.config.delayMaxMs), order: this.prng.nextU32(), from, to, type, payload });
    }
  }

  private member(id: string): SimMember | undefined {
    return this.members.find((m) => m.id === id);
  }

  private deliver(): void {
    const due = this.packets.filter((p) => p.atMs <= this.nowMs).sort((a, b) => a.atMs - b.atMs || a.order - b.order);
    this.packets = this.packets.filter((p) => p.atMs > this.nowMs);
    for (const p of due) {
      const to = this.member(p.to);
      const from = this.member(p.from);
      const cut = this.cuts.has(`${p.from}>${p.to}`);
      if (p.snapshot !== undefined) {
        const ok = !cut && to?.node != null && to.transferHooks !== null && to.snapshots !== null && this.prng.next() >= this.config.lossRate;
        if (ok && to?.snapshots != null && to.transferHooks !== null) {
          to.snapshots.file(p.snapshot.record, p.snapshot.image);
          to.transferHooks.started(p.snapshot.message.snapshot);
          to.transferHooks.received(p.snapshot.message, p.snapshot.record.clusterId);
          this.note(`${p.to} received snapshot ${p.snapshot.record.index} from ${p.from}`);
          this.counts.snapshotsSent++;
        }
        if (from?.node != null) from.transferHooks?.sent(p.to, ok);
        continue;
      }
      if (cut) continue;
      if (to?.node == null) {
        // The real transport's dial to a member that is down is refused: its sender hears so.
        if (to !== undefined && !to.retired) from?.node?.onPeerUnreachable(p.to);
        continue;
      }
      // Now and then a report that is stale by the time it arrives (the member came back).
      if (this.prng.next() < staleUnreachableRate) from?.node?.onPeerUnreachable(p.to);
      to.node.onPeerMessage(p.from, p.type, p.payload);
    }
  }

  private crash(m: SimMember, downMs: number): void {
    if (m.node === null || m.log === null || m.snapshots === null) return;
    m.disk = { log: m.log.crashImage(), snapshots: [...m.snapshots.all()], walCleared: false };
    m.clock?.reset();
    m.node = null;
    m.core = null;
    m.clock = null;
    m.log = null;
    m.snapshots = null;
    m.transferHooks = null;
    m.downUntilMs = this.nowMs + downMs;
    // A stream to a node that went down fails; its sender hears so (the real sender's stall timeout).
    for (const p of this.packets) {
      if (p.snapshot !== undefined && p.to === m.id) this.member(p.from)?.transferHooks?.sent(m.id, false);
    }
    this.packets = this.packets.filter((p) => p.to !== m.id && p.from !== m.id);
    this.note(`${m.id} crashed (durable log up to ${m.disk.log.offset + m.disk.log.entries.length})`);
  }

  private leader(): SimMember | undefined {
    let best: SimMember | undefined;
    let bestTerm = -1;
    for (const m of this.members) {
      const s = m.node?.status();
      if (s !== undefined && s.role === "leader" && s.term > bestTerm) {
        best = m;
        bestTerm = s.term;
      }
    }
    return best;
  }

  private up(): SimMember[] {
    return this.members.filter((m) => m.node !== null);
  }

  private write(target: SimMember): void {
    const id = ++this.writeSeq;
    const node = target.node;
    if (node === null) return;
    node.execute([
      "CREATE TABLE IF NOT EXISTS kv (id INTEGER PRIMARY KEY, v TEXT)",
      { sql: "INSERT INTO kv (id, v) VALUES (?, ?)", params: [id, `w${id}`] },
    ].map((s) => (typeof s === "string" ? { sql: s, params: [] } : s))).then(
      (r) => {
        this.acked.set(id, r.index);
        this.note(`write ${id} acked at ${r.index} by ${target.id}`);
      },
      () => undefined,
    );
  }

  private read(target: SimMember): void {
    const node = target.node;
    if (node === null) return;
    const ackedBefore = [...this.acked.keys()];
    node.query("SELECT id FROM kv", [], "linearizable").then(
      (r) => {
        const seen = new Set(r.rows.map((row) => Number(row[0])));
        for (const id of ackedBefore) {
          if (!seen.has(id)) throw new NodeSimViolation(`linearizability: a read on ${target.id} missed write ${id}, acknowledged before the read began`);
        }
        this.readsChecked++;
      },
      (e: unknown) => {
        if (e instanceof NodeSimViolation) throw e;
        // "no such table" before the first write, NOT_LEADER, timeouts: no answer, nothing to check.
      },
    );
  }

  private faults(): void {
    const c = this.config;
    const up = this.up();
    if (up.length > 0 && this.prng.next() < c.crashPerMs) {
      const m = up[this.prng.nextInt(up.length)];
      if (m !== undefined) {
        this.crash(m, 20 + this.prng.nextInt(400));
        this.counts.crashes++;
      }
    }
    if (up.length > 1 && this.prng.next() < c.powerLossPerMs) {
      this.note("power loss: every member goes down");
      this.counts.powerLosses++;
      for (const m of up) this.crash(m, 5 + this.prng.nextInt(300));
    }
    // One member at a time: a majority that lost its logs cannot elect anyone (by design, SPEC §4.6).
    // And only with three voters or more: the others must still make a majority without it. In
    // every member's view, not the leader's alone: its newest configuration may be one it has
    // not yet made durable anywhere (seed 92746: a promotion proposed on a full disk, then the
    // leader's WAL emptied, left two voters of which one had lost its log).
    const voters = this.leader()?.node?.status().membership.voters.length ?? 0;
    // (Members that know no configuration yet, spares not added, have no say.)
    const fewestVoters = Math.min(...up.map((m) => m.node?.status().membership.voters.length ?? 0).filter((n) => n > 0));
    if (up.length > 2 && voters >= 3 && this.prng.next() < c.walLossPerMs && fewestVoters >= 3 && this.members.every((m) => m.retired || m.node?.recoveryState === "healthy")) {
      const m = up[this.prng.nextInt(up.length)];
      if (m !== undefined) {
        this.crash(m, 20 + this.prng.nextInt(200));
        m.disk = { ...m.disk, walCleared: true };
        this.counts.walLosses++;
        this.note(`${m.id}: raft/wal/ emptied while down`);
      }
    }
    if (this.prng.next() < c.membershipPerMs) this.membershipChange();
    if (this.prng.next() < c.transferPerMs) this.transfer();
    if (up.length > 0 && this.prng.next() < c.diskFullPerMs) {
      const m = up[this.prng.nextInt(up.length)];
      if (m !== undefined) {
        m.diskFullUntilMs = this.nowMs + 20 + this.prng.nextInt(400);
        this.counts.diskFulls++;
        this.note(`${m.id}: disk full until ${m.diskFullUntilMs}`);
      }
    }
    if (up.length > 0 && this.prng.next() < c.fsyncErrorPerMs) {
      const m = up[this.prng.nextInt(up.length)];
      if (m?.log != null) {
        m.log.failNextSync(new Error("EIO: fsync failed (simulated)"));
        this.counts.fsyncErrors++;
        this.note(`${m.id}: next fsync fails`);
      }
    }
    if (this.partitionEndsAtMs >= 0 && this.nowMs >= this.partitionEndsAtMs) {
      this.cuts.clear();
      this.partitionEndsAtMs = -1;
      this.note("partition healed");
    } else if (this.partitionEndsAtMs < 0 && this.prng.next() < c.partitionPerMs) {
      const ids = this.members.map((m) => m.id);
      const side = new Set(ids.filter(() => this.prng.next() < 0.5));
      const oneWay = this.prng.next() < 0.2;
      for (const a of ids) for (const b of ids) if (side.has(a) && !side.has(b)) this.cuts.add(`${a}>${b}`);
      if (!oneWay) for (const a of ids) for (const b of ids) if (!side.has(a) && side.has(b)) this.cuts.add(`${a}>${b}`);
      this.partitionEndsAtMs = this.nowMs + 50 + this.prng.nextInt(500);
      this.note(`${oneWay ? "one-way cut from" : "partition"} {${[...side].join(",")}} | rest`);
    }
  }

  /** A membership change through the real admin path, on the leader, one at a time. */
  private membershipChange(): void {
    const leader = this.leader();
    if (this.adminInFlight || leader?.node == null) return;
    const m = leader.node.status().membership;
    const options: { kind: "add" | "add_learner" | "promote" | "remove"; id: string }[] = [];
    for (const member of this.members) {
      if (member.retired || m.voters.includes(member.id) || m.learners.includes(member.id)) continue;
      options.push({ kind: "add", id: member.id }, { kind: "add_learner", id: member.id });
    }
    for (const id of m.learners) options.push({ kind: "promote", id }, { kind: "remove", id });
    // No voter is removed while a member is recovering (it may be one whose WAL was emptied and
    // does not vote yet), or is down with its WAL emptied (it will be): the rest could be left
    // without a majority that can elect (two voters, one of which lost its log).
    const recovering = this.members.some((x) => !x.retired && (x.node === null ? x.disk.walCleared : x.node.recoveryState !== "healthy"));
    if (m.voters.length > 2 && !recovering) for (const id of m.voters) options.push({ kind: "remove", id });
    const change = options[this.prng.nextInt(options.length)];
    if (change === undefined) return;
    const address = this.memberConfig.find((a) => a.id === change.id);
    if (address === undefined) return;
    this.adminInFlight = true;
    const node = leader.node;
    const work = change.kind === "remove" ? node.removeMember(change.id)
      : change.kind === "promote" ? node.promoteMember(change.id)
      : node.addMember({ id: change.id, peer: address.peer.raw, client: address.client.raw, admin: address.admin.raw }, { learner: change.kind === "add_learner", catchUpTimeoutMs: 2000 });
    this.note(`${leader.id}: ${change.kind} ${change.id}`);
    work.then(
      () => {
        this.counts.membershipChanges++;
        this.note(`${leader.id}: ${change.kind} ${change.id} done`);
      },
      (e: unknown) => this.note(`${leader.id}: ${change.kind} ${change.id} failed: ${e instanceof Error ? e.message : String(e)}`),
    ).finally(() => {
      this.adminInFlight = false;
    });
  }

  private transfer(): void {
    const leader = this.leader();
    if (this.adminInFlight || leader?.node == null) return;
    const voters = leader.node.status().membership.voters.filter((v) => v !== leader.id);
    const to = voters[this.prng.nextInt(voters.length)];
    if (to === undefined) return;
    this.adminInFlight = true;
    this.note(`${leader.id}: transfer leadership to ${to}`);
    leader.node.transferLeader(to, 1000).then(() => {
      this.counts.transfers++;
    }, () => undefined).finally(() => {
      this.adminInFlight = false;
    });
  }

  /** Log matching: two logs holding an entry of the same index and term hold the same entry. */
  private checkLogMatching(id: string, entries: readonly Entry[]): void {
    for (const e of entries) {
      const key = `${e.index}/${e.term}`;
      const hash = Number(Bun.hash(e.data) & 0xffffffffn) ^ (e.kind === "config" ? 1 : 0);
      const seen = this.entryAt.get(key);
      if (seen === undefined) this.entryAt.set(key, hash);
      else if (seen !== hash) throw new NodeSimViolation(`log matching: ${id} synced a different entry at index ${e.index}, term ${e.term}`);
    }
  }

  /** Run every node's due timers and event-loop turns until all are quiet at this instant. */
  private async drain(): Promise<void> {
    for (const m of this.up()) m.clock?.advanceTo(1_700_000_000_000 + this.nowMs);
    for (let round = 0; round < 1000; round++) {
      let ran = 0;
      for (const m of this.up()) ran += m.clock?.runSoon() ?? 0;
      // Every promise the nodes chained settles before the next macrotask: nothing else runs.
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (ran === 0 && !this.up().some((m) => m.clock?.hasSoon === true)) return;
    }
    throw new NodeSimViolation("a node's event loop did not go quiet within 1,000 turns at one instant");
  }

  private restartDue(): void {
    for (const m of this.members) {
      if (m.node === null && !m.retired && m.downUntilMs <= this.nowMs) this.start(m);
      // A node that stopped on a storage failure is restarted by its supervisor, as systemd does.
      else if (m.node?.fatal != null) this.crash(m, 10);
    }
  }

  /**
   * A member that believes a refusal said it was removed must be right: every member that holds
   * the index it was named, committed, has a configuration there that leaves it out. And it
   * campaigns no more.
   */
  private checkRemovalNotices(): void {
    for (const x of this.up()) {
      const notice = x.core?.removalNotice() ?? null;
      if (notice === null || x.node === null) continue;
      const key = `${x.id}@${notice.configIndex}`;
      if (!this.noticesSeen.has(key)) {
        this.noticesSeen.add(key);
        this.counts.removalNotices++;
        this.note(`${x.id} learned from ${notice.by} that the configuration committed at ${notice.configIndex} leaves it out`);
      }
      const role = x.core?.status().role;
      if (role !== "follower") throw new NodeSimViolation(`${x.id} holds a removal notice but is ${role}`);
      for (const y of this.up()) {
        const status = y.core?.status();
        if (y.core == null || status === undefined || status.commit < notice.configIndex || status.snapshotIndex > notice.configIndex) continue;
        const m = y.core.membershipAt(notice.configIndex);
        if (isMember(m, x.id)) throw new NodeSimViolation(`${x.id} believes it was removed at ${notice.configIndex} (said ${notice.by}), but ${y.id}'s committed configuration there names it: ${JSON.stringify(m)}`);
      }
    }
  }

  private check(): void {
    this.checkRemovalNotices();
    for (const m of this.up()) {
      const node = m.node;
      if (node === null) continue;
      const status = node.status();
      if (status.role === "leader") {
        const other = this.leaderOfTerm.get(status.term);
        if (other !== undefined && other !== m.id) throw new NodeSimViolation(`election safety: ${other} and ${m.id} both lead term ${status.term}`);
        if (other === undefined) this.counts.elections++;
        this.leaderOfTerm.set(status.term, m.id);
      }
      const applied = status.appliedIndex;
      // No acknowledged write is missing from a member that applied past it, and members that
      // applied the same index hold the same rows. Sampled: every member every 50 ms. every 50 ms of simulated time.
      if (this.nowMs % 50 !== 0) continue;
      const content = storeContent(node);
      const seen = new Set(content === "" ? [] : content.split(",").map(Number));
      for (const [id, index] of this.acked) {
        if (index <= applied && !seen.has(id)) throw new NodeSimViolation(`durability: ${m.id} applied ${applied} but lacks write ${id}, acknowledged at ${index}`);
      }
      const other = this.contentAt.get(applied);
      if (other === undefined) this.contentAt.set(applied, content);
      else if (other !== content) throw new NodeSimViolation(`divergence: at applied index ${applied} ${m.id} holds rows [${content}] where another member held [${other}]`);
    }
  }

  async step(withFaults: boolean): Promise<void> {
    this.nowMs++;
    this.restartDue();
    this.deliver();
    const c = this.config;
    const up = this.up();
    if (up.length > 0 && this.prng.next() < c.writePerMs) {
      const leader = this.leader();
      const target = leader !== undefined && this.prng.next() < 0.8 ? leader : up[this.prng.nextInt(up.length)];
      if (target !== undefined) this.write(target);
    }
    if (up.length > 0 && this.prng.next() < c.readPerMs) {
      const target = up[this.prng.nextInt(up.length)];
      if (target !== undefined) this.read(target);
    }
    if (withFaults) this.faults();
    await this.drain();
    this.check();
  }

  async run(): Promise<NodeSimStats> {
    for (let i = 0; i < this.config.stepsMs; i++) await this.step(true);
    // Faults stop: heal, restart everyone, and a last write must reach every member.
    this.cuts.clear();
    for (const m of this.members) if (m.node === null) m.downUntilMs = this.nowMs;
    const deadlineMs = this.nowMs + settleMsMax;
    const finalId = 1_000_000_000 + this.config.seed;
    let finalIndex = 0;
    let proposedTerm = -1;
    const last: { attempt: "none" | "in_flight" | "failed" } = { attempt: "none" };
    while (this.nowMs < deadlineMs) {
      await this.stepSettling();
      const leader = this.leader();
      if (leader?.node == null) continue;
      const term = leader.node.status().term;
      // A last write goes to each new leader, and again whenever one was refused (a full disk,
      // a change in progress): an unacknowledged write may be lost when leadership changes.
      if (finalIndex === 0 && (term !== proposedTerm || last.attempt === "failed")) {
        proposedTerm = term;
        last.attempt = "in_flight";
        leader.node.execute([
          // The table too: a node stalled (a full disk) through every fault may never have committed one.
          { sql: "CREATE TABLE IF NOT EXISTS kv (id INTEGER PRIMARY KEY, v TEXT)", params: [] },
          { sql: "INSERT OR IGNORE INTO kv (id, v) VALUES (?, 'final')", params: [finalId] },
        ]).then((r) => {
          finalIndex = r.index;
          this.acked.set(finalId, r.index);
          last.attempt = "none";
        }, () => {
          last.attempt = "failed";
        });
        continue;
      }
      const status = leader.node.status();
      const members = new Set([...status.membership.voters, ...status.membership.learners]);
      this.retireNonMembers(members, status.commitIndex >= status.lastLogIndex);
      const current = this.members.filter((m) => members.has(m.id));
      if (finalIndex > 0 && current.every((m) => m.node !== null && m.node.status().appliedIndex >= finalIndex && m.node.recoveryState === "healthy")) {
        const contents = current.map((m) => storeContent(m.node as SvcNode));
        if (new Set(contents).size !== 1) throw new NodeSimViolation(`divergence at the end: ${contents.join(" / ")}`);
        for (const id of this.acked.keys()) if (!contents[0]?.split(",").includes(String(id))) throw new NodeSimViolation(`durability: acknowledged write ${id} is missing at the end`);
        for (const m of this.members) await m.node?.stop();
        return { seed: this.config.seed, acked: this.acked.size, readsChecked: this.readsChecked, finalIndex, ...this.counts };
      }
    }
    const states = this.members.map((m) => `${m.id}: ${m.node === null ? "down" : JSON.stringify(m.node.status())}`);
    throw new NodeSimViolation(`liveness: no last write reached every member within ${settleMsMax} ms after faults stopped (final index ${finalIndex})\n${states.join("\n")}`);
  }

  /** Members a committed change removed are shut down, as an operator would; one added back comes back. */
  private retireNonMembers(members: ReadonlySet<string>, allCommitted: boolean): void {
    for (const m of this.members) {
      if (!members.has(m.id) && !m.retired && allCommitted) {
        this.crash(m, 0);
        m.retired = true;
        this.note(`${m.id} retired`);
      } else if (members.has(m.id) && m.retired) {
        m.retired = false;
        m.downUntilMs = this.nowMs;
      }
    }
  }

  private async stepSettling(): Promise<void> {
    this.nowMs++;
    this.restartDue();
    this.deliver();
    await this.drain();
    this.check();
  }
}

/** The ids of the rows a member holds, in order ("" before the table exists). */
function storeContent(node: SvcNode): string {
  try {
    return node.queryLocal("SELECT id FROM kv ORDER BY id", []).rows.map((r) => String(r[0])).join(",");
  } catch {
    return "";
  }
}

function addr(raw: string): { host: string; port: number; raw: string } {
  const [host, port] = raw.split(":");
  return { host: host ?? "", port: Number(port), raw };
}

export type NodeSimStats = { seed: number; acked: number; readsChecked: number; finalIndex: number } & NodeSimulation["counts"];

export async function runNodeSeed(seed: number, logger?: Logger): Promise<NodeSimStats> {
  const sim = new NodeSimulation(nodeSimConfigForSeed(seed), logger);
  try {
    return await sim.run();
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    throw new Error(`node simulation seed ${seed} failed at ${sim.nowMs} ms: ${why}\nreplay: NODE_SEED=${seed} bun test test/sim/node-sim.test.ts\nconfig: ${JSON.stringify(sim.config)}\nlast events:\n${sim.trace.slice(-60).join("\n")}`, { cause: e });
  }
}
