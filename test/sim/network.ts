// The simulated network between Raft cores: every message gets a random delay (so messages
// reorder), may be lost or duplicated, and is dropped while a partition cuts its direction.
// Snapshot messages carry the snapshot data captured when they were sent, as the node's
// transport streams it out of band.

import type { Prng } from "../../src/util/index.ts";
import type { Message, NodeId } from "../../src/raft/index.ts";
import type { SnapshotData } from "./node.ts";

export interface NetworkFaults {
  lossRate: number;
  duplicateRate: number;
  delayMinUnits: number;
  delayMaxUnits: number;
  /** Extra delay a snapshot takes to stream. */
  snapshotDelayMaxUnits: number;
  /** Chance that a snapshot stream fails (the sender is told through reportSnapshot). */
  snapshotFailRate: number;
}

export interface InFlight {
  readonly deliverAt: number;
  /** Random tie-break among messages due at the same time. */
  readonly order: number;
  readonly msg: Message;
  readonly snapshot?: SnapshotData;
}

export class SimNetwork {
  private inflight: InFlight[] = [];
  /** Directed cuts "from>to": messages in that direction are dropped at delivery. */
  private readonly cuts = new Set<string>();
  faults: NetworkFaults;

  constructor(private readonly prng: Prng, faults: NetworkFaults) {
    this.faults = faults;
  }

  send(msg: Message, now: number, snapshot?: SnapshotData): void {
    const f = this.faults;
    // A lost snapshot stream is decided at delivery, where the sender is told (reportSnapshot).
    if (snapshot === undefined && this.prng.next() < f.lossRate) return;
    const copies = this.prng.next() < f.duplicateRate ? 2 : 1;
    for (let i = 0; i < copies; i++) {
      let delay = f.delayMinUnits + this.prng.nextInt(f.delayMaxUnits - f.delayMinUnits + 1);
      if (snapshot !== undefined) delay += this.prng.nextInt(f.snapshotDelayMaxUnits + 1);
      const item: InFlight = snapshot === undefined
        ? { deliverAt: now + delay, order: this.prng.nextU32(), msg }
        : { deliverAt: now + delay, order: this.prng.nextU32(), msg, snapshot };
      this.inflight.push(item);
    }
  }

  /**
   * Messages due by now, in delivery order. Plain messages crossing a cut are dropped;
   * snapshots are returned with blocked set, since their sender learns of the failure.
   */
  takeDue(now: number): (InFlight & { blocked: boolean })[] {
    const due: InFlight[] = [];
    const rest: InFlight[] = [];
    for (const m of this.inflight) (m.deliverAt <= now ? due : rest).push(m);
    this.inflight = rest;
    due.sort((a, b) => a.deliverAt - b.deliverAt || a.order - b.order);
    return due
      .map((m) => ({ ...m, blocked: this.isCut(m.msg.from, m.msg.to) }))
      .filter((m) => !m.blocked || m.snapshot !== undefined);
  }

  isCut(from: NodeId, to: NodeId): boolean {
    return this.cuts.has(`${from}>${to}`);
  }

  /** Splits nodes into groups that cannot talk to each other. */
  partition(groups: NodeId[][]): void {
    this.cuts.clear();
    for (const g of groups) {
      for (const h of groups) {
        if (g === h) continue;
        for (const a of g) for (const b of h) this.cuts.add(`${a}>${b}`);
      }
    }
  }

  cutOneWay(from: NodeId, to: NodeId): void {
    this.cuts.add(`${from}>${to}`);
  }

  heal(): void {
    this.cuts.clear();
  }

  hasCuts(): boolean {
    return this.cuts.size > 0;
  }

  pendingCount(): number {
    return this.inflight.length;
  }
}
