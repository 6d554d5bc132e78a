// A deterministic simulation of an svc cluster around the real RaftCore. One seed decides
// everything: the cluster's shape and options, the faults (loss, delay, reordering,
// duplication, partitions, crashes that lose unsynced writes), the client load (writes and
// ReadIndex reads) and the admin actions (membership changes, leadership transfers). Every
// step ends with the safety checks of checker.ts; a run ends with a liveness check: once
// the faults stop, a leader is elected and a last write reaches every member.

import { createPrng, silentLogger } from "../../src/util/index.ts";
import type { Logger, Prng } from "../../src/util/index.ts";
import type { Entry, Membership, Message, NodeId, RaftOptions } from "../../src/raft/index.ts";
import { encodeMembership } from "../../src/raft/index.ts";
import { Checker, SafetyViolation } from "./checker.ts";
import { SimNetwork } from "./network.ts";
import type { NetworkFaults } from "./network.ts";
import { SimNode } from "./node.ts";

export interface SimConfig {
  readonly seed: number;
  readonly voterCount: number;
  /** Ids beyond the voters that membership changes may add. */
  readonly spareCount: number;
  /** Only node 1 starts with a membership ({n1}); the rest join through membership changes. */
  readonly bootstrapSingle: boolean;
  readonly preVote: boolean;
  readonly checkQuorum: boolean;
  readonly stepsUnits: number;
  readonly tickUnits: number;
  readonly electionTimeoutTicks: number;
  readonly heartbeatTicks: number;
  readonly maxInflightAppends: number;
  readonly maxEntriesPerAppend: number;
  readonly maxBytesPerAppend: number;
  readonly compactEveryEntries: number;
  readonly persistDelayMaxUnits: number;
  /** Nodes send everything but append responses while their entries are still syncing. */
  readonly earlySend: boolean;
  readonly faults: NetworkFaults;
  readonly crashPerUnit: number;
  readonly partitionPerUnit: number;
  readonly membershipPerUnit: number;
  readonly transferPerUnit: number;
  readonly writePerUnit: number;
  readonly readPerUnit: number;
}

export interface SimStats {
  seed: number;
  elections: number;
  writesAcked: number;
  readsChecked: number;
  snapshotsInstalled: number;
  crashes: number;
  membershipChanges: number;
  transfers: number;
  finalMembers: number;
  messagesSent: number;
}

/** The cluster shape and fault mix for a seed. */
export function configForSeed(seed: number): SimConfig {
  const p = createPrng(seed, 0x5eed);
  const pick = <T>(xs: readonly T[]): T => xs[p.nextInt(xs.length)]!;
  const membership = p.next() < 0.35;
  const bootstrapSingle = membership && p.next() < 0.3;
  const quiet = p.next() < 0.15; // some seeds without message faults
  return {
    seed,
    voterCount: bootstrapSingle ? 3 : pick([1, 3, 3, 3, 5]),
    spareCount: membership ? 2 : 0,
    bootstrapSingle,
    preVote: p.next() < 0.7,
    checkQuorum: p.next() < 0.7,
    stepsUnits: 2500 + p.nextInt(1500),
    tickUnits: 10,
    electionTimeoutTicks: 10,
    heartbeatTicks: pick([1, 2, 3]),
    maxInflightAppends: pick([1, 2, 4, 8]),
    maxEntriesPerAppend: pick([1, 3, 16, 64]),
    maxBytesPerAppend: pick([64, 1024, 1 << 20]),
    compactEveryEntries: pick([5, 10, 20, 50, 1_000_000]),
    persistDelayMaxUnits: pick([0, 2, 5]),
    earlySend: p.next() < 0.5,
    faults: {
      lossRate: quiet ? 0 : pick([0, 0.01, 0.05, 0.15]),
      duplicateRate: quiet ? 0 : pick([0, 0.02, 0.1]),
      delayMinUnits: 1,
      delayMaxUnits: pick([2, 10, 30]),
      snapshotDelayMaxUnits: pick([5, 50]),
      snapshotFailRate: quiet ? 0 : pick([0, 0.2]),
    },
    crashPerUnit: pick([0, 0.0005, 0.002, 0.01]),
    partitionPerUnit: quiet ? 0 : pick([0, 0.001, 0.003]),
    membershipPerUnit: membership ? pick([0.002, 0.005]) : 0,
    transferPerUnit: pick([0, 0, 0.001]),
    writePerUnit: pick([0.05, 0.2, 0.5]),
    readPerUnit: pick([0.02, 0.1, 0.3]),
  };
}

const keys = ["x", "y", "z"];
const readTimeoutUnits = 1000;
/** Long enough for the slowest configurations (one entry per append, one in flight) to drain a full proposal window. */
const settleUnitsMax = 30_000;

export class Simulation {
  readonly prng: Prng;
  readonly net: SimNetwork;
  readonly checker = new Checker();
  readonly nodes: SimNode[] = [];
  now = 0;
  private requestSeq = 0;
  private valueSeq = 0;
  private partitionEndsAt = -1;
  private readonly tickPhase = new Map<NodeId, number>();
  readonly stats: SimStats;
  /** The last events, printed when a check fails. */
  readonly trace: string[] = [];

  constructor(readonly config: SimConfig, private readonly logger: Logger = silentLogger) {
    this.prng = createPrng(config.seed, 1);
    this.net = new SimNetwork(createPrng(config.seed, 2), config.faults);
    this.stats = { seed: config.seed, elections: 0, writesAcked: 0, readsChecked: 0, snapshotsInstalled: 0, crashes: 0, membershipChanges: 0, transfers: 0, finalMembers: 0, messagesSent: 0 };
    const voters = Array.from({ length: config.voterCount }, (_, i) => `n${i + 1}`);
    const spares = Array.from({ length: config.spareCount }, (_, i) => `n${config.voterCount + i + 1}`);
    const initial: Membership = config.bootstrapSingle ? { voters: ["n1"], learners: [] } : { voters, learners: [] };
    const first: Entry = { index: 1, term: 1, kind: "config", timestampMs: 0, data: encodeMembership(initial) };
    for (const [i, id] of [...voters, ...spares].entries()) {
      const holdsState = config.bootstrapSingle ? id === "n1" : voters.includes(id);
      const nodePrng = createPrng(config.seed, 100 + i);
      const options = (): RaftOptions => ({
        id,
        electionTimeoutTicks: config.electionTimeoutTicks,
        heartbeatTicks: config.heartbeatTicks,
        prng: nodePrng,
        logger: this.logger.child(id),
        preVote: config.preVote,
        checkQuorum: config.checkQuorum,
        maxInflightAppends: config.maxInflightAppends,
        maxEntriesPerAppend: config.maxEntriesPerAppend,
        maxBytesPerAppend: config.maxBytesPerAppend,
        maxPendingProposals: 256,
      });
      const node = new SimNode(id, options, this.hooks(), createPrng(config.seed, 200 + i), config.persistDelayMaxUnits, config.compactEveryEntries, config.earlySend, holdsState ? { entries: [first], commit: 1 } : { entries: [], commit: 0 });
      this.nodes.push(node);
    }
    for (const n of this.nodes) {
      this.tickPhase.set(n.id, this.prng.nextInt(config.tickUnits));
      n.start();
    }
  }

  private hooks() {
    return {
      send: (from: SimNode, msg: Message) => this.send(from, msg),
      persisted: (node: SimNode, entries: readonly Entry[], hashes: readonly number[]) => this.checker.onPersisted(node, entries, hashes),
      applied: (node: SimNode, e: Entry) => this.checker.onApplied(node, e),
      readDone: (node: SimNode, read: Parameters<Checker["onReadDone"]>[1], cell: Parameters<Checker["onReadDone"]>[2]) => {
        this.checker.onReadDone(node, read, cell);
        this.note(`${node.id} read ${read.key} -> ${cell?.value ?? "-"}@${cell?.index ?? 0} (min ${read.minIndex}, read index ${read.index})`);
      },
      writeAcked: () => {
        this.stats.writesAcked++;
      },
    };
  }

  private note(s: string): void {
    this.trace.push(`[${this.now}] ${s}`);
    if (this.trace.length > 300) this.trace.splice(0, 100);
  }

  node(id: NodeId): SimNode | undefined {
    return this.nodes.find((n) => n.id === id);
  }

  private send(from: SimNode, msg: Message): void {
    this.stats.messagesSent++;
    if (msg.type === "snapshot") {
      const data = from.snapshotData(msg.snapshot.index);
      if (data === undefined) throw new SafetyViolation(`${from.id} sent a snapshot at ${msg.snapshot.index} it does not hold`);
      this.note(`${from.id} streams snapshot ${msg.snapshot.index}@${msg.snapshot.term} to ${msg.to}`);
      this.net.send(msg, this.now, data);
      return;
    }
    this.net.send(msg, this.now);
  }

  private deliver(): void {
    for (const item of this.net.takeDue(this.now)) {
      const to = this.node(item.msg.to);
      if (item.snapshot !== undefined) {
        // The transport streams the data and tells the sender how it went, success or not.
        const sender = this.node(item.msg.from);
        const f = this.config.faults;
        if (item.blocked || to === undefined || to.core === null || this.prng.next() < f.snapshotFailRate + f.lossRate) {
          sender?.core?.reportSnapshot(item.msg.to, false);
          continue;
        }
        to.receivedSnapshots.set(item.snapshot.meta.index, item.snapshot);
        to.core.step(item.msg);
        sender?.core?.reportSnapshot(item.msg.to, true);
        this.stats.snapshotsInstalled++;
        continue;
      }
      if (to === undefined || to.core === null) continue;
      to.core.step(item.msg);
    }
  }

  private upNodes(): SimNode[] {
    return this.nodes.filter((n) => n.core !== null);
  }

  private leader(): SimNode | undefined {
    let best: SimNode | undefined;
    let bestTerm = -1;
    for (const n of this.upNodes()) {
      const s = n.core!.status();
      if (s.role === "leader" && s.term > bestTerm) {
        best = n;
        bestTerm = s.term;
      }
    }
    return best;
  }

  private randomUp(): SimNode | undefined {
    const up = this.upNodes();
    return up[this.prng.nextInt(up.length)];
  }

  private clientWrite(): void {
    let n = this.randomUp();
    if (n === undefined) return;
    const key = keys[this.prng.nextInt(keys.length)]!;
    const value = `v${++this.valueSeq}`;
    let r = n.propose(key, value, this.now);
    // A follower forwards the write to the leader it knows.
    if (r !== null && !r.ok && r.code === "NOT_LEADER" && r.leaderId !== null) {
      n = this.node(r.leaderId);
      r = n?.propose(key, value, this.now) ?? null;
    }
    if (r?.ok) this.note(`${n!.id} proposed ${key}=${value} at ${r.index}@${r.term}`);
  }

  private clientRead(): void {
    const n = this.randomUp();
    if (n === undefined) return;
    const key = keys[this.prng.nextInt(keys.length)]!;
    const id = ++this.requestSeq;
    const minIndex = this.checker.latestWrite.get(key) ?? 0;
    if (n.startRead(id, key, minIndex, this.now)) this.note(`${n.id} read ${key} started (min ${minIndex})`);
  }

  private membershipChange(): void {
    const l = this.leader();
    if (l === undefined) return;
    const m = l.core!.status().membership;
    const all = this.nodes.map((n) => n.id);
    const outsiders = all.filter((id) => !m.voters.includes(id) && !m.learners.includes(id));
    const options: { kind: "add_voter" | "add_learner" | "promote" | "remove"; id: NodeId }[] = [];
    for (const id of outsiders) options.push({ kind: "add_learner", id }, { kind: "add_voter", id });
    for (const id of m.learners) options.push({ kind: "promote", id }, { kind: "remove", id });
    if (m.voters.length > 2) for (const id of m.voters) options.push({ kind: "remove", id });
    const change = options[this.prng.nextInt(options.length)];
    if (change === undefined) return;
    const r = l.core!.proposeMembership(change, this.now);
    if (r.ok) {
      this.stats.membershipChanges++;
      this.note(`${l.id} proposed ${change.kind} ${change.id} at ${r.index}`);
    }
  }

  private transfer(): void {
    const l = this.leader();
    if (l === undefined) return;
    const voters = l.core!.status().membership.voters.filter((v) => v !== l.id);
    const to = voters[this.prng.nextInt(voters.length)];
    if (to === undefined) return;
    if (l.core!.transferLeadership(to).ok) {
      this.stats.transfers++;
      this.note(`${l.id} transfers leadership to ${to}`);
    }
  }

  private faults(): void {
    const c = this.config;
    if (this.prng.next() < c.crashPerUnit) {
      const n = this.randomUp();
      if (n !== undefined) {
        n.crash(this.now, 20 + this.prng.nextInt(this.prng.next() < 0.5 ? 100 : 600));
        this.stats.crashes++;
        this.note(`${n.id} crashed`);
      }
    }
    if (this.partitionEndsAt >= 0 && this.now >= this.partitionEndsAt) {
      this.net.heal();
      this.partitionEndsAt = -1;
      this.note("partition healed");
    } else if (this.partitionEndsAt < 0 && this.prng.next() < c.partitionPerUnit) {
      const ids = this.nodes.map((n) => n.id);
      if (this.prng.next() < 0.2) {
        const a = ids[this.prng.nextInt(ids.length)]!;
        const b = ids[this.prng.nextInt(ids.length)]!;
        if (a !== b) this.net.cutOneWay(a, b);
        this.note(`one-way cut ${a} -> ${b}`);
      } else {
        const groups: NodeId[][] = [[], []];
        for (const id of ids) groups[this.prng.nextInt(2)]!.push(id);
        this.net.partition(groups);
        this.note(`partition ${groups.map((g) => g.join(",")).join(" | ")}`);
      }
      this.partitionEndsAt = this.now + 100 + this.prng.nextInt(1000);
    }
  }

  private restartDueNodes(): void {
    for (const n of this.nodes) {
      if (n.core === null && !n.retired && n.downUntil <= this.now) {
        n.start();
        this.note(`${n.id} restarted`);
      }
    }
  }

  /** One unit of simulated time. */
  step(withFaults: boolean): void {
    this.now++;
    const c = this.config;
    this.restartDueNodes();
    this.deliver();
    // Each node's clock ticks at its own phase, as real nodes' timers do.
    const ticking = this.upNodes().filter((n) => (this.now + (this.tickPhase.get(n.id) ?? 0)) % c.tickUnits === 0);
    for (const n of this.shuffled(ticking)) n.core!.tick();
    if (this.prng.next() < c.writePerUnit) this.clientWrite();
    if (this.prng.next() < c.readPerUnit) this.clientRead();
    if (withFaults) {
      this.faults();
      if (this.prng.next() < c.membershipPerUnit) this.membershipChange();
      if (this.prng.next() < c.transferPerUnit) this.transfer();
    }
    for (const n of this.shuffled(this.upNodes())) n.run(this.now);
    for (const n of this.upNodes()) {
      n.expireReads(this.now, readTimeoutUnits);
      this.checker.checkNode(n);
    }
  }

  private shuffled<T>(xs: T[]): T[] {
    for (let i = xs.length - 1; i > 0; i--) {
      const j = this.prng.nextInt(i + 1);
      [xs[i], xs[j]] = [xs[j]!, xs[i]!];
    }
    return xs;
  }

  /** Stops the faults and checks that the cluster recovers and commits a last write everywhere. */
  private settle(): void {
    this.net.heal();
    this.net.faults = { ...this.net.faults, lossRate: 0, duplicateRate: 0, snapshotFailRate: 0 };
    for (const n of this.nodes) if (n.core === null) n.downUntil = this.now;
    const deadline = this.now + settleUnitsMax;
    let finalIndex = 0;
    let proposedAt = { term: -1, unit: 0 };
    while (this.now < deadline) {
      this.step(false);
      const leader = this.leader();
      if (leader === undefined) continue;
      const m = leader.core!.status().membership;
      const members = new Set([...m.voters, ...m.learners]);
      this.retireNonMembers(members);
      if (leader.core === null) continue; // a leader that removed itself was shut down
      // An unacknowledged write may be lost when leadership changes: propose again then.
      const term = leader.core!.status().term;
      if (term !== proposedAt.term || this.now - proposedAt.unit > 1000) {
        const r = leader.propose("final", `seed${this.config.seed}`, this.now);
        if (r?.ok) {
          finalIndex = r.index;
          proposedAt = { term, unit: this.now };
        }
        continue;
      }
      const done = [...members].every((id) => this.node(id)?.kv.get("final")?.value === `seed${this.config.seed}`);
      if (done) {
        this.stats.finalMembers = members.size;
        return;
      }
    }
    const states = this.nodes.map((n) => `${n.id}: ${n.core === null ? (n.retired ? "retired" : "down") : JSON.stringify(n.core.status())}`);
    throw new SafetyViolation(`liveness: no leader committed a last write to every member within ${settleUnitsMax} units after faults stopped (final index ${finalIndex})\n${states.join("\n")}`);
  }

  /**
   * Nodes a change removed are shut down, as an operator would, but only once the removal is
   * committed: the leader's latest membership may be an uncommitted change (its own removal,
   * say, which needs the remaining voters to commit), and a stale leader's may be one the
   * cluster has since replaced. So a node retires only when neither the leader's latest
   * membership (`members`) nor the newest committed one names it. A node added back comes back.
   */
  private retireNonMembers(members: ReadonlySet<NodeId>): void {
    const committed = this.committedMembers();
    for (const n of this.nodes) {
      if (!members.has(n.id) && !committed.has(n.id) && !n.retired) {
        if (n.core !== null) n.crash(this.now, 0);
        n.retired = true;
        this.note(`${n.id} retired`);
      } else if (members.has(n.id) && n.retired) {
        n.retired = false;
        n.downUntil = this.now;
      }
    }
  }

  /** The members of the newest committed membership: the one in force at the highest commit index any node holds. */
  private committedMembers(): Set<NodeId> {
    let best: SimNode | undefined;
    for (const n of this.upNodes()) {
      if (best === undefined || n.core!.status().commit > best.core!.status().commit) best = n;
    }
    if (best === undefined) return new Set();
    const m = best.core!.membershipAt(best.core!.status().commit);
    return new Set([...m.voters, ...m.learners]);
  }

  run(): SimStats {
    for (let i = 0; i < this.config.stepsUnits; i++) this.step(true);
    this.settle();
    this.stats.elections = this.checker.leaderCount();
    this.stats.readsChecked = this.checker.readsChecked;
    return this.stats;
  }
}

export function runSeed(seed: number, logger?: Logger): SimStats {
  const sim = new Simulation(configForSeed(seed), logger);
  try {
    return sim.run();
  } catch (e) {
    const trace = sim.trace.slice(-60).join("\n");
    const why = e instanceof Error ? e.message : String(e);
    throw new Error(`seed ${seed} failed at unit ${sim.now}: ${why}\nreplay: SEED=${seed} bun test test/sim\nconfig: ${JSON.stringify(sim.config)}\nlast events:\n${trace}`, { cause: e });
  }
}
