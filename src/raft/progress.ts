// What the leader knows about each member's log, and how it sends to it (after etcd-io/raft):
//   probe:     next is a guess; one append at a time until a response shows where logs match.
//   replicate: logs match up to match; appends are pipelined, at most maxInflight unacknowledged.
//   snapshot:  the member needs a snapshot; nothing is sent until reportSnapshot or its response.

import { assert } from "../util/index.ts";

export type ProgressState = "probe" | "replicate" | "snapshot";

/**
 * A bounded FIFO of in-flight appends: their last indices and sizes. Full at `capacity`
 * appends or at `bytesMax` bytes, whichever comes first: the bytes bound is what keeps one
 * turn of the leader's loop from encoding hundreds of megabytes for a member far behind.
 */
export class Inflights {
  private readonly indices: number[] = [];
  private readonly sizes: number[] = [];
  private bytes = 0;
  constructor(readonly capacity: number, readonly bytesMax = Number.POSITIVE_INFINITY) {
    assert(capacity >= 1, "at least one append may be in flight");
    assert(bytesMax >= 1, "an append of some bytes may be in flight");
  }
  add(lastIndex: number, sizeBytes = 0): void {
    assert(!this.full(), "no append is sent while the in-flight window is full");
    this.indices.push(lastIndex);
    this.sizes.push(sizeBytes);
    this.bytes += sizeBytes;
  }
  /** An acknowledgement up to index frees every append that ended at or before it. */
  freeLE(index: number): void {
    let n = 0;
    while (n < this.indices.length && this.indices[n]! <= index) n++;
    if (n > 0) this.drop(n);
  }
  /** Frees the oldest slot: lets the leader send again when every append in flight may have been lost. */
  freeFirstOne(): void {
    if (this.indices.length > 0) this.drop(1);
  }
  /** Bytes that may still go out before the window is full (at least 0). */
  bytesFree(): number {
    return Math.max(0, this.bytesMax - this.bytes);
  }
  slotsFree(): number {
    return Math.max(0, this.capacity - this.indices.length);
  }
  full(): boolean {
    return this.indices.length >= this.capacity || this.bytes >= this.bytesMax;
  }
  count(): number {
    return this.indices.length;
  }
  reset(): void {
    this.indices.length = 0;
    this.sizes.length = 0;
    this.bytes = 0;
  }
  private drop(n: number): void {
    this.indices.splice(0, n);
    for (const size of this.sizes.splice(0, n)) this.bytes -= size;
  }
}

export class Progress {
  /** Highest index known to be replicated on the member. Invariant: match < next. */
  match = 0;
  next: number;
  state: ProgressState = "probe";
  /** probe: an append is out and unanswered, so wait (a heartbeat response also unblocks). */
  probeSent = false;
  /** probe: the leader's tick when the append out was sent (see probeIsFresh). */
  probeSentAtTick = 0;
  /** snapshot: the index of the snapshot being sent. */
  pendingSnapshot = 0;
  /**
   * The seq of the log-store read out for this member (0: none). While one is out nothing
   * else is sent: the answer continues from next. Any change of state forgets it, so an
   * answer that arrives after one is ignored.
   */
  fetching = 0;
  /** Heard from since the last check-quorum round. */
  recentActive = false;
  /** The leader's tick count when this member last answered (strict reconfiguration). */
  heardAtTick = Number.NEGATIVE_INFINITY;
  /**
   * The member said its disk is full (heartbeat_response.diskFull): it drops appends, so
   * none are sent until it answers without the flag, and it counts toward no write quorum.
   */
  diskFull = false;
  readonly inflights: Inflights;

  constructor(next: number, maxInflight: number, maxInflightBytes = Number.POSITIVE_INFINITY) {
    this.next = next;
    this.inflights = new Inflights(maxInflight, maxInflightBytes);
  }

  becomeProbe(): void {
    this.fetching = 0;
    // After a snapshot, continue from the snapshot; otherwise from what is known to match.
    if (this.state === "snapshot") {
      this.next = Math.max(this.match + 1, this.pendingSnapshot + 1);
    } else {
      this.next = this.match + 1;
    }
    this.state = "probe";
    this.probeSent = false;
    this.pendingSnapshot = 0;
    this.inflights.reset();
  }

  becomeReplicate(): void {
    this.fetching = 0;
    this.state = "replicate";
    this.next = this.match + 1;
    this.probeSent = false;
    this.pendingSnapshot = 0;
    this.inflights.reset();
  }

  becomeSnapshot(snapshotIndex: number): void {
    this.fetching = 0;
    this.state = "snapshot";
    this.pendingSnapshot = snapshotIndex;
    this.probeSent = false;
    this.inflights.reset();
  }

  /** An accepted append up to index. Returns whether it told us something new. */
  maybeUpdate(index: number): boolean {
    let updated = false;
    if (index > this.match) {
      this.match = index;
      updated = true;
      this.probeSent = false;
    }
    this.next = Math.max(this.next, index + 1);
    return updated;
  }

  /**
   * A rejected append at rejectedIndex; nextProbe is where the hints say to try next.
   * Returns false for a stale rejection (one that answers an append we already moved past).
   */
  maybeDecrTo(rejectedIndex: number, nextProbe: number): boolean {
    if (this.state === "replicate") {
      if (rejectedIndex <= this.match) return false;
      this.next = this.match + 1;
      return true;
    }
    if (this.next - 1 !== rejectedIndex) return false;
    this.next = Math.max(Math.min(rejectedIndex, nextProbe + 1), this.match + 1);
    this.probeSent = false;
    return true;
  }

  /**
   * probe: the member rejected a probe at match: it no longer holds what it acknowledged (its
   * log was emptied or rebuilt). Nothing is known to match any more; probe after lastIndex,
   * the last index the member says it holds.
   */
  forgetMatch(lastIndex: number): void {
    assert(this.state === "probe", "a lost log is established by a probe");
    assert(lastIndex < this.match, "the member holds less than it matched");
    this.match = 0;
    this.next = Math.max(lastIndex, 0) + 1;
    this.probeSent = false;
  }

  /** Whether the leader must hold back appends to this member for now. */
  isPaused(): boolean {
    if (this.fetching !== 0 || this.diskFull) return true;
    switch (this.state) {
      case "probe":
        return this.probeSent;
      case "replicate":
        return this.inflights.full();
      case "snapshot":
        return true;
    }
  }

  /** Book-keeping after sending, at tick `atTick`, an append whose last entry is lastIndex (entryCount may be 0). */
  sentAppend(entryCount: number, lastIndex: number, sizeBytes: number, atTick: number): void {
    if (this.state === "replicate") {
      if (entryCount > 0) {
        this.next = lastIndex + 1;
        this.inflights.add(lastIndex, sizeBytes);
      }
    } else if (this.state === "probe") {
      this.probeSent = true;
      this.probeSentAtTick = atTick;
    }
  }

  /**
   * probe: the append out was sent less than a heartbeat (`heartbeatTicks`) before `nowTick`,
   * so its answer may still come. A heartbeat response does not send it again then: the
   * heartbeats queued while a member was unreachable reach it together when it comes back,
   * and each answer would send the same appends again.
   */
  probeIsFresh(nowTick: number, heartbeatTicks: number): boolean {
    return this.state === "probe" && this.probeSent && nowTick - this.probeSentAtTick < heartbeatTicks;
  }
}
