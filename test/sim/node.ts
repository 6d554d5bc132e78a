// One simulated svc node: the real RaftCore, a disk that holds only what a Ready said to
// persist (and loses an unsynced hard state on a crash), a key-value state machine that is
// rebuilt from the snapshot on restart, and the node's side of client reads and writes.
// Persisting a Ready takes simulated time; steps and ticks continue meanwhile, as in the
// real node whose fsync is asynchronous.

import { RaftCore } from "../../src/raft/index.ts";
import type { Entry, HardState, Message, NodeId, RaftOptions, Ready, SnapshotMeta } from "../../src/raft/index.ts";
import type { Prng } from "../../src/util/index.ts";

export interface Cell {
  readonly value: string;
  /** The log index of the write that set it. */
  readonly index: number;
}

export interface SnapshotData {
  readonly meta: SnapshotMeta;
  readonly kv: ReadonlyMap<string, Cell>;
  /** Prefix hash of the log up to meta.index (see prefixHash). */
  readonly hash: number;
}

export interface Disk {
  hardState: HardState;
  /** Written without fsync (commit-only change): survives a crash only by luck. */
  unsyncedHardState: HardState | null;
  snapshot: SnapshotData | null;
  entries: Entry[];
  /** hashes[i] is the prefix hash up to entries[i]. */
  hashes: number[];
}

export interface PendingRead {
  readonly requestId: number;
  readonly key: string;
  /** Index of the latest write to key applied anywhere when the read began. */
  readonly minIndex: number;
  readonly startedAt: number;
  index: number | null;
}

/** What the node reports to the simulation, which checks it. */
export interface NodeHooks {
  send(from: SimNode, msg: Message): void;
  persisted(node: SimNode, entries: readonly Entry[], hashes: readonly number[]): void;
  applied(node: SimNode, e: Entry): void;
  readDone(node: SimNode, read: PendingRead, cell: Cell | undefined): void;
  writeAcked(node: SimNode, index: number): void;
}

export function entryKey(e: Entry): string {
  return `${e.kind}:${new TextDecoder().decode(e.data)}`;
}

/** A rolling hash of the log prefix: equal (index, term) must mean equal prefixes (log matching). */
export function prefixHash(prev: number, e: Entry): number {
  let h = prev ^ Math.imul(e.term, 0x9e3779b1);
  const s = entryKey(e);
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return Math.imul(h ^ e.index, 0x85ebca6b) >>> 0;
}

export class SimNode {
  core: RaftCore | null = null;
  readonly disk: Disk;
  kv = new Map<string, Cell>();
  applied = 0;
  /** The Ready being persisted and when that completes. */
  private persisting: { rd: Ready; doneAt: number; sent: readonly Message[] } | null = null;
  /** Snapshot data that arrived from a leader, by index, until Ready.snapshot installs it. */
  readonly receivedSnapshots = new Map<number, SnapshotData>();
  readonly reads = new Map<number, PendingRead>();
  private readonly writes = new Map<number, { term: number }>();
  downUntil = 0;
  /** Crashed for good (removed from the cluster at the end of a run). */
  retired = false;

  constructor(
    readonly id: NodeId,
    private readonly options: () => RaftOptions,
    private readonly hooks: NodeHooks,
    private readonly prng: Prng,
    private readonly persistDelayMaxUnits: number,
    private readonly compactEveryEntries: number,
    /** Send all but append responses before the entries are durable (see Ready.messages). */
    private readonly earlySend: boolean,
    initial: { entries: Entry[]; commit: number },
  ) {
    const hashes: number[] = [];
    let h = 0;
    for (const e of initial.entries) hashes.push((h = prefixHash(h, e)));
    this.disk = { hardState: { term: initial.entries.at(-1)?.term ?? 0, vote: null, commit: initial.commit }, unsyncedHardState: null, snapshot: null, entries: [...initial.entries], hashes };
  }

  get up(): boolean {
    return this.core !== null;
  }

  start(): void {
    const d = this.disk;
    this.kv = new Map(d.snapshot?.kv ?? []);
    this.applied = d.snapshot?.meta.index ?? 0;
    this.core = new RaftCore(this.options(), { hardState: d.hardState, snapshot: d.snapshot?.meta ?? null, entries: [...d.entries], appliedIndex: this.applied });
    this.hooks.persisted(this, d.entries, d.hashes);
  }

  crash(now: number, downUnits: number): void {
    this.core = null;
    this.persisting = null; // never reached the disk
    if (this.disk.unsyncedHardState !== null && this.prng.next() < 0.5) this.disk.hardState = this.disk.unsyncedHardState;
    this.disk.unsyncedHardState = null;
    this.receivedSnapshots.clear();
    this.reads.clear();
    this.writes.clear();
    this.downUntil = now + downUnits;
  }

  /** Moves the node's Ready pipeline forward. */
  run(now: number): void {
    const core = this.core;
    if (core === null) return;
    if (this.persisting !== null && this.persisting.doneAt <= now) {
      const { rd, sent } = this.persisting;
      this.persisting = null;
      this.complete(core, rd, sent);
    }
    if (this.persisting === null && core.hasReady()) {
      const rd = core.ready();
      const delay = rd.mustSync ? this.prng.nextInt(this.persistDelayMaxUnits + 1) : 0;
      if (delay === 0) {
        this.complete(core, rd, []);
      } else if (this.earlySend) {
        // The shortcut Ready allows: term and vote made durable at once (commit not yet:
        // the entries it covers are still being written), then everything but the append
        // responses leaves while the entries sync.
        if (rd.hardState !== null && (rd.hardState.term !== this.disk.hardState.term || rd.hardState.vote !== this.disk.hardState.vote)) {
          this.disk.hardState = { ...rd.hardState, commit: this.disk.hardState.commit };
        }
        const sent = rd.messages.filter((m) => m.type !== "append_response");
        for (const m of sent) this.hooks.send(this, m);
        this.persisting = { rd, doneAt: now + delay, sent };
      } else {
        this.persisting = { rd, doneAt: now + delay, sent: [] };
      }
    }
    this.serveReads();
  }

  private complete(core: RaftCore, rd: Ready, alreadySent: readonly Message[]): void {
    this.persist(rd);
    for (const m of rd.messages) if (!alreadySent.includes(m)) this.hooks.send(this, m);
    for (const e of rd.committed) this.apply(e);
    for (const rs of rd.readStates) {
      const read = this.reads.get(rs.requestId);
      if (read !== undefined && read.index === null) read.index = rs.index;
    }
    core.advance(rd);
    this.maybeCompact(core);
  }

  private persist(rd: Ready): void {
    const d = this.disk;
    if (rd.snapshot !== null) {
      const data = this.receivedSnapshots.get(rd.snapshot.index);
      if (data === undefined) throw new Error(`${this.id}: Ready.snapshot at ${rd.snapshot.index} without received data`);
      for (const index of this.receivedSnapshots.keys()) if (index <= data.meta.index) this.receivedSnapshots.delete(index);
      d.snapshot = data;
      d.entries = [];
      d.hashes = [];
      this.kv = new Map(data.kv);
      this.applied = data.meta.index;
    }
    if (rd.entries.length > 0) {
      const first = rd.entries[0]!.index;
      const base = (d.snapshot?.meta.index ?? 0) + 1;
      if (first < base) throw new Error(`${this.id}: Ready entries from ${first} overwrite the snapshot ending at ${base - 1}`);
      if (first > base + d.entries.length) throw new Error(`${this.id}: Ready entries from ${first} leave a gap after ${base + d.entries.length - 1}`);
      d.entries.length = first - base;
      d.hashes.length = first - base;
      let h = d.hashes.at(-1) ?? d.snapshot?.hash ?? 0;
      for (const e of rd.entries) {
        d.entries.push(e);
        d.hashes.push((h = prefixHash(h, e)));
      }
      this.hooks.persisted(this, rd.entries, d.hashes.slice(-rd.entries.length));
    }
    if (rd.mustSync) {
      d.hardState = rd.hardState ?? d.unsyncedHardState ?? d.hardState;
      d.unsyncedHardState = null;
    } else if (rd.hardState !== null) {
      d.unsyncedHardState = rd.hardState;
    }
  }

  private apply(e: Entry): void {
    if (e.index !== this.applied + 1) throw new Error(`${this.id}: applies ${e.index} after ${this.applied}`);
    this.hooks.applied(this, e);
    this.applied = e.index;
    if (e.kind === "normal") {
      const [key, value] = new TextDecoder().decode(e.data).split("=") as [string, string];
      this.kv.set(key, { value, index: e.index });
    }
    const w = this.writes.get(e.index);
    if (w !== undefined) {
      this.writes.delete(e.index);
      if (w.term === e.term) this.hooks.writeAcked(this, e.index);
    }
  }

  private maybeCompact(core: RaftCore): void {
    const d = this.disk;
    const snapIndex = d.snapshot?.meta.index ?? 0;
    if (this.applied - snapIndex < this.compactEveryEntries) return;
    const at = this.applied - snapIndex - 1;
    const e = d.entries[at];
    const hash = d.hashes[at];
    if (e === undefined || hash === undefined) throw new Error(`${this.id}: applied entry ${this.applied} is not on disk`);
    const meta: SnapshotMeta = { index: this.applied, term: e.term, membership: core.membershipAt(this.applied) };
    core.compact(meta);
    d.snapshot = { meta, kv: new Map(this.kv), hash };
    d.entries = d.entries.slice(at + 1);
    d.hashes = d.hashes.slice(at + 1);
  }

  propose(key: string, value: string, now: number): ReturnType<RaftCore["propose"]> | null {
    if (this.core === null) return null;
    const r = this.core.propose(new TextEncoder().encode(`${key}=${value}`), now);
    if (r.ok) this.writes.set(r.index, { term: r.term });
    return r;
  }

  startRead(requestId: number, key: string, minIndex: number, now: number): boolean {
    if (this.core === null) return false;
    const r = this.core.readIndex(requestId);
    if (!r.ok) return false;
    this.reads.set(requestId, { requestId, key, minIndex, startedAt: now, index: null });
    return true;
  }

  private serveReads(): void {
    for (const [id, read] of this.reads) {
      if (read.index === null || this.applied < read.index) continue;
      this.reads.delete(id);
      this.hooks.readDone(this, read, this.kv.get(read.key));
    }
  }

  /** Reads whose answer was lost (message loss, leader change) time out, as the node's would. */
  expireReads(now: number, timeoutUnits: number): void {
    for (const [id, read] of this.reads) if (now - read.startedAt > timeoutUnits) this.reads.delete(id);
  }

  snapshotData(index: number): SnapshotData | undefined {
    const s = this.disk.snapshot;
    return s !== null && s.meta.index === index ? s : undefined;
  }
}
