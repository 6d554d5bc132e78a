// A tiny synchronous cluster for unit tests of the Raft core: each node has an in-memory
// "disk" that receives exactly what Ready says to persist, and messages are delivered by
// hand (deliverAll) so a test can drop, hold or reorder them.

import { createPrng, silentLogger } from "../../src/util/index.ts";
import { RaftCore } from "../../src/raft/index.ts";
import type { Entry, HardState, LogFetch, Membership, Message, NodeId, RaftOptions, RaftState, ReadState, SnapshotMeta } from "../../src/raft/index.ts";
import { encodeMembership } from "../../src/raft/index.ts";

export function options(id: NodeId, overrides: Partial<RaftOptions> = {}): RaftOptions {
  return {
    id,
    electionTimeoutTicks: 10,
    heartbeatTicks: 1,
    prng: createPrng(id.length * 7919 + id.charCodeAt(id.length - 1)),
    logger: silentLogger,
    preVote: false,
    checkQuorum: false,
    maxInflightAppends: 4,
    maxEntriesPerAppend: 64,
    maxBytesPerAppend: 1 << 20,
    maxPendingProposals: 1000,
    ...overrides,
  };
}

export function configEntry(index: number, term: number, m: Membership): Entry {
  return { index, term, kind: "config", timestampMs: 0, data: encodeMembership(m) };
}

export function bytes(s: string): Uint8Array {
  return new TextEncoder().encode(s);
}

export function text(e: Entry): string {
  return new TextDecoder().decode(e.data);
}

/** What the node made durable. */
export interface Disk {
  hardState: HardState;
  snapshot: SnapshotMeta | null;
  entries: Entry[];
}

export class TestNode {
  core: RaftCore;
  disk: Disk;
  applied: Entry[] = [];
  appliedIndex = 0;
  readStates: ReadState[] = [];
  outbox: Message[] = [];
  /** Reads of the log store the core asked for (Ready.fetches), not yet answered. */
  fetches: LogFetch[] = [];
  /** The log store (the WAL): every entry persisted, compaction of the core's memory or not. */
  logStore: Entry[] = [];
  /** The log store no longer holds entries at or below this (segments removed behind an image). */
  logStoreRemovedThrough = 0;

  constructor(readonly id: NodeId, readonly opts: Partial<RaftOptions>, state: RaftState) {
    this.disk = { hardState: state.hardState, snapshot: state.snapshot, entries: [...state.entries] };
    this.logStore = [...state.entries];
    this.core = new RaftCore(options(id, opts), state);
  }

  /** Runs every pending Ready through the disk, outbox and state machine. */
  process(): void {
    while (this.core.hasReady()) {
      const rd = this.core.ready();
      if (rd.snapshot !== null) {
        this.disk.snapshot = rd.snapshot;
        this.disk.entries = [];
        this.appliedIndex = rd.snapshot.index;
      }
      if (rd.entries.length > 0) {
        const first = rd.entries[0]!.index;
        const base = (this.disk.snapshot?.index ?? 0) + 1;
        this.disk.entries = this.disk.entries.slice(0, first - base).concat(rd.entries);
        this.logStore = this.logStore.filter((e) => e.index < first).concat(rd.entries);
      }
      this.fetches.push(...rd.fetches);
      if (rd.hardState !== null) this.disk.hardState = rd.hardState;
      this.outbox.push(...rd.messages);
      for (const e of rd.committed) {
        if (e.index !== this.appliedIndex + 1) throw new Error(`${this.id} applies ${e.index} after ${this.appliedIndex}`);
        this.applied.push(e);
        this.appliedIndex = e.index;
      }
      this.readStates.push(...rd.readStates);
      this.core.advance(rd);
    }
  }

  /** What a log store holding logStore answers to a read: from..through, bytesMax after the first. */
  readLogStore(f: LogFetch): Entry[] | null {
    if (f.from <= this.logStoreRemovedThrough) return null;
    const out: Entry[] = [];
    let bytes = 0;
    for (const e of this.logStore) {
      if (e.index < f.from || e.index > f.through) continue;
      if (out.length > 1 && bytes >= f.bytesMax) break;
      out.push(e);
      if (out.length > 1) bytes += e.data.length;
    }
    return out[0]?.index === f.from ? out : null;
  }

  /** Answer every pending read from the log store; returns how many were answered. */
  answerFetches(): number {
    const pending = this.fetches.splice(0);
    for (const f of pending) this.core.fetched(f, this.readLogStore(f));
    return pending.length;
  }

  /** Takes a local snapshot at index (<= applied) and compacts the log behind it. */
  compactTo(index: number): SnapshotMeta {
    const base = (this.disk.snapshot?.index ?? 0) + 1;
    const e = this.disk.entries[index - base];
    if (e === undefined) throw new Error(`no entry ${index} on ${this.id}'s disk`);
    const meta: SnapshotMeta = { index, term: e.term, membership: this.core.membershipAt(index) };
    this.core.compact(meta);
    this.disk.snapshot = meta;
    this.disk.entries = this.disk.entries.slice(index - base + 1);
    return meta;
  }

  /** A crash and restart from what is on disk. */
  restart(): void {
    this.outbox = [];
    this.fetches = [];
    this.core = new RaftCore(options(this.id, this.opts), {
      hardState: this.disk.hardState,
      snapshot: this.disk.snapshot,
      entries: [...this.disk.entries],
      appliedIndex: this.appliedIndex,
    });
  }

  appliedTexts(): string[] {
    return this.applied.filter((e) => e.kind === "normal").map(text);
  }
}

export class TestCluster {
  readonly nodes = new Map<NodeId, TestNode>();
  /** Messages between these pairs (either direction) are dropped. */
  readonly cut = new Set<string>();

  constructor(ids: NodeId[], opts: Partial<RaftOptions> = {}, membership: Membership = { voters: ids, learners: [] }) {
    for (const id of ids) {
      this.nodes.set(id, new TestNode(id, opts, { hardState: { term: 1, vote: null, commit: 1 }, snapshot: null, entries: [configEntry(1, 1, membership)] }));
    }
  }

  /**
   * A cluster whose nodes start with given logs: entry 1 is the membership of all ids, then
   * one normal entry per listed term. hardState.term is the highest term in any log.
   */
  static withLogs(logs: Record<NodeId, number[]>, opts: Partial<RaftOptions> = {}): TestCluster {
    const ids = Object.keys(logs);
    const c = new TestCluster([], opts);
    const maxTerm = Math.max(1, ...Object.values(logs).flat());
    for (const id of ids) {
      const entries: Entry[] = [configEntry(1, 1, { voters: ids, learners: [] })];
      (logs[id] ?? []).forEach((term, i) => entries.push({ index: i + 2, term, kind: "normal", timestampMs: 0, data: bytes(`${i + 2}@${term}`) }));
      c.nodes.set(id, new TestNode(id, opts, { hardState: { term: maxTerm, vote: null, commit: 1 }, snapshot: null, entries }));
    }
    return c;
  }

  add(id: NodeId, opts: Partial<RaftOptions> = {}): TestNode {
    const n = new TestNode(id, opts, { hardState: { term: 0, vote: null, commit: 0 }, snapshot: null, entries: [] });
    this.nodes.set(id, n);
    return n;
  }

  node(id: NodeId): TestNode {
    const n = this.nodes.get(id);
    if (n === undefined) throw new Error(`no node ${id}`);
    return n;
  }

  isolate(id: NodeId): void {
    for (const other of this.nodes.keys()) if (other !== id) this.cut.add(pairKey(id, other));
  }

  heal(): void {
    this.cut.clear();
  }

  /** Process readies and deliver messages until the cluster is quiet. */
  deliverAll(maxRounds = 1000): void {
    for (let round = 0; round < maxRounds; round++) {
      let moved = false;
      for (const n of this.nodes.values()) n.process();
      for (const n of this.nodes.values()) {
        const out = n.outbox;
        n.outbox = [];
        for (const m of out) {
          moved = true;
          if (this.cut.has(pairKey(m.from, m.to))) continue;
          this.nodes.get(m.to)?.core.step(m);
        }
      }
      if (!moved && [...this.nodes.values()].every((n) => !n.core.hasReady())) return;
    }
    throw new Error("cluster did not settle");
  }

  /** deliverAll, answering every read of a log store as it is asked, until nothing moves. */
  deliverAllWithLogStore(maxRounds = 1000): void {
    for (let round = 0; round < maxRounds; round++) {
      this.deliverAll();
      let answered = 0;
      for (const n of this.nodes.values()) answered += n.answerFetches();
      if (answered === 0) return;
    }
    throw new Error("cluster did not settle");
  }

  tickAll(times = 1): void {
    for (let i = 0; i < times; i++) {
      for (const n of this.nodes.values()) n.core.tick();
      this.deliverAll();
    }
  }

  /** Elect id by calling campaign() and delivering. */
  elect(id: NodeId): TestNode {
    const n = this.node(id);
    n.core.campaign();
    this.deliverAll();
    if (n.core.status().role !== "leader") throw new Error(`${id} did not become leader`);
    return n;
  }

  /**
   * Elect id by delivering its vote requests and the answers only: it leads, and the appends
   * of its term are still unsent (nothing of the term is committed yet).
   */
  electWithoutAppends(id: NodeId): TestNode {
    const n = this.node(id);
    n.core.campaign();
    n.process();
    for (const m of n.outbox.splice(0)) this.node(m.to).core.step(m);
    for (const voter of this.nodes.values()) {
      if (voter === n) continue;
      voter.process();
      for (const m of voter.outbox.splice(0)) n.core.step(m);
    }
    if (n.core.status().role !== "leader") throw new Error(`${id} did not become leader`);
    return n;
  }

  leaders(): TestNode[] {
    return [...this.nodes.values()].filter((n) => n.core.status().role === "leader");
  }
}

function pairKey(a: NodeId, b: NodeId): string {
  return a < b ? `${a}|${b}` : `${b}|${a}`;
}
