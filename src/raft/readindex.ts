// ReadIndex bookkeeping on the leader (Raft dissertation §6.4). A read records the commit index
// at the time it arrived and a sequence number; the leader sends that sequence number in a
// heartbeat round, and once a majority of voters has answered with it (or a later one), the
// leader knows it was still the leader when the read arrived, so the recorded index is safe.

import { hasQuorum } from "./quorum.ts";
import type { NodeId } from "./types.ts";

export interface PendingRead {
  readonly requestId: number;
  /** The node that asked: the leader itself, or a follower that forwarded it. */
  readonly from: NodeId;
  readonly index: number;
  readonly seq: number;
}

export class ReadIndexTracker {
  private lastSeq = 0;
  /** By increasing seq. */
  private pending: PendingRead[] = [];
  /** Highest seq each peer has answered in this term. */
  private ackedSeq = new Map<NodeId, number>();

  size(): number {
    return this.pending.length;
  }

  /** The sequence number heartbeats should carry now. */
  currentSeq(): number {
    return this.lastSeq;
  }

  add(requestId: number, from: NodeId, index: number): number {
    this.lastSeq++;
    this.pending.push({ requestId, from, index, seq: this.lastSeq });
    return this.lastSeq;
  }

  /** Records that peer answered a heartbeat carrying seq; returns the reads now confirmed, in order. */
  ack(self: NodeId, peer: NodeId, seq: number, voters: readonly NodeId[]): PendingRead[] {
    if (seq > (this.ackedSeq.get(peer) ?? 0)) this.ackedSeq.set(peer, seq);
    let n = 0;
    for (const read of this.pending) {
      const confirmed = hasQuorum(voters, (id) => id === self || (this.ackedSeq.get(id) ?? 0) >= read.seq);
      if (!confirmed) break;
      n++;
    }
    return this.pending.splice(0, n);
  }

  /** A single-voter leader needs no round: everything pending is confirmed. */
  releaseAll(): PendingRead[] {
    return this.pending.splice(0);
  }

  /** Leadership ended: the pending reads can no longer be confirmed here. */
  clear(): PendingRead[] {
    this.ackedSeq.clear();
    return this.pending.splice(0);
  }
}
