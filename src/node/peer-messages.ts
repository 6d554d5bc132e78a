// Messages to and from the other members: Raft messages stepped into the core (after checks
// the core cannot make: addressing, and the lost-log vote gate), snapshot chunks and acks to the
// transfer, and the core's outgoing messages onto the network — a snapshot message becomes an
// image streamed by the transfer (the newest image at or past what the core names, made for
// the follower when there is none) — and the core's requests to read compacted entries back
// out of the log store for a member behind the in-memory log (one read at a time per member,
// answered into the core). Outgoing appends are encoded a bounded number of bytes per turn.
// With RUST_LOG=tensor_chain::raft=trace every message in and out is a trace line.

import { decodeMessage, encodeMessage, type Entry, type LogFetch, type Message } from "../raft/index.ts";
import { FRAME_HEADROOM_BYTES, MessageType } from "../transport/index.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/logger.ts";
import { messageTraceFields } from "./_message-trace.ts";
import type { NodeContext } from "./context.ts";
import type { SnapshotPolicy } from "./snapshot-policy.ts";
import type { SnapshotTransfer } from "./snapshot-transfer.ts";

/**
 * Entry bytes of appends one turn of the event loop encodes: a Ready with more (a member caught
 * up from the WAL or from memory is sent up to its in-flight window at once) sends the rest in
 * the turns that follow, in order, so no turn spends more than a few milliseconds encoding.
 */
export const sendEntryBytesPerTurnMax = 512 * 1024;

export class PeerMessages {
  /** The log-store read in progress for each member: the next one waits for it (the reader is sequential). */
  private readonly reading = new Map<string, Promise<void>>();
  /** Messages waiting for a later turn (see sendEntryBytesPerTurnMax), oldest first; each later message waits behind them. */
  private deferred: Message[] = [];
  private deferredAt = 0;
  /** The raft target's logger when it writes trace lines, else null: decided once, so a node that does not trace pays one test per message. */
  private readonly trace: Logger | null;

  constructor(
    private readonly ctx: NodeContext,
    private readonly snapshots: SnapshotPolicy,
    private readonly transfer: () => SnapshotTransfer | null,
    private readonly schedule: () => void,
    /** The loop holds a Ready that a full disk refused: nothing the core says goes out until it is through. */
    private readonly stalled: () => boolean,
  ) {
    this.trace = ctx.raftLogger.enabled("trace") ? ctx.raftLogger : null;
  }

  /** A message from a peer (the network has checked framing, CRC and cluster id). */
  receive(from: string, type: number, payload: Uint8Array): void {
    const { ctx } = this;
    if (ctx.stopped || ctx.fatalError !== null) return;
    switch (type) {
      case MessageType.raft: {
        // The transport allocates every message's payload and never touches it again.
        const decoded = decodeMessage(payload, { owned: true });
        if (!decoded.ok) {
          ctx.metrics.peerMessagesDropped.labels("malformed").inc();
          ctx.logger.debug("dropped a malformed raft message", { from, error: decoded.error.code });
          return;
        }
        const m = decoded.message;
        if (this.trace !== null) this.trace.trace("message received", messageTraceFields(m, "from"));
        if (m.from !== from || m.to !== ctx.config.nodeId) {
          ctx.metrics.peerMessagesDropped.labels("misaddressed").inc();
          if (this.trace !== null) this.trace.trace("message ignored: not sent by the peer it came from, or not to this node", { type: m.type, from: m.from, to: m.to, peer: from });
          return;
        }
        // (A node rebuilt from nothing votes in a new cluster's first election, and in a cluster
        // other than the one it belonged to: restored onto this host, where it held nothing.)
        if ((m.type === "vote" || m.type === "pre_vote") && ctx.lostLog && !firstElection(m, ctx.core.status().lastTerm) && !ctx.ofAnotherCluster(from)) {
          ctx.metrics.peerMessagesDropped.labels("vote_while_recovering").inc();
          if (this.trace !== null) this.trace.trace("vote request ignored: this node lost log entries and does not vote until a leader caught it up", { type: m.type, from: m.from, term: m.term });
          return;
        }
        // A leader whose disk is full hands leadership over; one whose own disk is full too
        // would take it only to hand it back (every voter's disk full: a transfer every 10 s,
        // the term rising each time). It stays where it is: the leader keeps serving reads.
        if (m.type === "timeout_now" && ctx.diskFull !== null) {
          ctx.metrics.peerMessagesDropped.labels("transfer_while_disk_full").inc();
          if (this.trace !== null) this.trace.trace("leadership transfer ignored: this node's disk is full", { from: m.from, term: m.term });
          return;
        }
        if (m.type === "append" || m.type === "heartbeat") ctx.leaderCommitSeen = Math.max(ctx.leaderCommitSeen, m.commit);
        if (this.stalled() && this.answerWhileStalled(m)) return;
        ctx.core.step(m);
        // A member's refusal may have told it that it was removed: said and recorded at once.
        if (m.type === "not_member") ctx.syncRemoval();
        // Heard from the leader it follows (a learner, or a member that does not campaign, keeps
        // naming a leader it no longer hears: see leaderlessMs).
        if ((m.type === "append" || m.type === "heartbeat" || m.type === "snapshot") && ctx.core.status().leaderId === m.from) ctx.leaderHeardAtMs = ctx.clock.monotonicMs();
        this.schedule();
        return;
      }
      case MessageType.snapshotChunk:
        this.transfer()?.onChunk(from, payload);
        return;
      case MessageType.snapshotAck:
        this.transfer()?.onAck(from, payload);
        return;
      default:
        ctx.metrics.peerMessagesDropped.labels("unknown_type").inc();
    }
  }

  /**
   * A follower whose disk is full cannot take entries, and the core's answers wait behind the
   * Ready it could not persist. Left so, the leader would hear nothing, step down for want of
   * a quorum, and no one could be elected until space is freed (a leader with room, two
   * followers full: no reads, no writes). So the node answers its leader's heartbeats itself,
   * saying its disk is full: the leader stays, confirms reads, sends it no appends and refuses
   * writes a majority cannot persist (507 DISK_FULL). Appends are dropped: kept in memory
   * they would grow without bound; the leader sends them again once the disk has room.
   * An acknowledgement of a leader persists nothing, so answering it from memory is safe: a
   * vote, which must be durable, is never answered here. Returns true when m was handled.
   */
  private answerWhileStalled(m: Message): boolean {
    const { ctx } = this;
    if (m.type !== "heartbeat" && m.type !== "append") return false;
    const status = ctx.core.status();
    if (status.role === "leader" || m.term !== status.term || status.leaderId !== m.from) return false;
    ctx.leaderHeardAtMs = ctx.clock.monotonicMs();
    if (m.type === "append") {
      ctx.metrics.peerMessagesDropped.labels("append_while_disk_full").inc();
      if (this.trace !== null) this.trace.trace("append dropped: this node's disk is full", { from: m.from, term: m.term, prevIndex: m.prevIndex, entries: m.entries.length });
      return true;
    }
    const answer: Message = { type: "heartbeat_response", from: ctx.config.nodeId, to: m.from, term: m.term, readSeq: m.readSeq, diskFull: true };
    if (this.trace !== null) this.trace.trace("message sent", messageTraceFields(answer, "to"));
    ctx.io.network.send(m.from, MessageType.raft, encodeMessage(answer));
    return true;
  }

  /** Read what the core asks for out of the log store, off the loop's turn, and hand it back. */
  fetch(fetches: readonly LogFetch[]): void {
    for (const f of fetches) {
      const done = (this.reading.get(f.to) ?? Promise.resolve()).then(() => this.readFor(f));
      this.reading.set(f.to, done);
      void done.finally(() => {
        if (this.reading.get(f.to) === done) this.reading.delete(f.to);
      });
    }
  }

  private async readFor(f: LogFetch): Promise<void> {
    const { ctx } = this;
    let entries: Entry[] | null;
    try {
      entries = await ctx.io.log.readCommitted(f.to, f.from, f.through, f.bytesMax);
    } catch (e) {
      ctx.logger.warn("could not read entries back from the WAL for a member; it is sent a snapshot", { peer: f.to, from: f.from, error: errorMessage(e) });
      entries = null;
    }
    if (ctx.stopped || ctx.fatalError !== null) return;
    if (entries === null) {
      ctx.metrics.catchUpLogReads.labels("not_held").inc();
    } else {
      ctx.metrics.catchUpLogReads.labels("ok").inc();
      ctx.metrics.catchUpLogEntries.inc(entries.length);
    }
    ctx.core.fetched(f, entries);
    this.schedule();
  }

  send(messages: readonly Message[]): void {
    if (messages.length === 0) return;
    if (this.deferred.length > this.deferredAt) {
      for (const m of messages) this.deferred.push(m);
      return;
    }
    this.sendSome(messages, 0);
  }

  /** Send messages[from…] until a turn's worth of entry bytes went out; defer the rest to the next turn. */
  private sendSome(messages: readonly Message[], from: number): void {
    let entryBytes = 0;
    let i = from;
    for (; i < messages.length; i++) {
      if (entryBytes >= sendEntryBytesPerTurnMax) break;
      const m = messages[i]!;
      if (m.type === "append") for (const e of m.entries) entryBytes += e.data.length;
      this.sendOne(m);
    }
    if (i === messages.length) {
      this.deferred = [];
      this.deferredAt = 0;
      return;
    }
    if (messages === this.deferred) {
      this.deferredAt = i;
    } else {
      this.deferred = messages.slice(i);
      this.deferredAt = 0;
    }
    this.ctx.clock.soon(() => {
      if (this.ctx.stopped || this.ctx.fatalError !== null) return;
      this.sendSome(this.deferred, this.deferredAt);
      // A send may have told the core something (a member unreachable, a snapshot refused).
      this.schedule();
    });
  }

  private sendOne(m: Message): void {
    const { ctx } = this;
    if (m.type === "snapshot") {
      const transfer = this.transfer();
      if (transfer === null) {
        ctx.core.reportSnapshot(m.to, false);
        return;
      }
      // The follower is sent the newest image at or past the core's floor (made now when there
      // is none: see snapshot-policy.ts). With entries read back from the WAL that is any image
      // the WAL continues (it keeps everything after the newest), so a learner or a member far
      // behind gets the image already on disk, not one made for it; the log after it follows.
      const floor = Math.min(m.snapshot.index, ctx.core.snapshotFloor());
      this.snapshots.imageAtLeast(floor)
        .then((snapshot) => {
          ctx.core.snapshotChosen(m.to, snapshot.index);
          const offer = { ...m, snapshot };
          if (this.trace !== null) this.trace.trace("message sent", messageTraceFields(offer, "to"));
          return transfer.send(offer);
        })
        .catch((e: unknown) => {
          ctx.logger.error("cannot send snapshot", { peer: m.to, error: errorMessage(e) });
          ctx.core.reportSnapshot(m.to, false);
          this.schedule();
        });
      return;
    }
    // Encoded with room for the frame header before it: the transport frames it in place.
    const queued = ctx.io.network.send(m.to, MessageType.raft, encodeMessage(m, FRAME_HEADROOM_BYTES), { headroom: true });
    if (this.trace !== null) {
      if (queued) this.trace.trace("message sent", messageTraceFields(m, "to"));
      else this.trace.trace("message not sent: the peer's send queue refused it (full, or the peer is unknown)", messageTraceFields(m, "to"));
    }
    if (!queued && m.type === "append") ctx.core.reportUnreachable(m.to);
  }
}

/**
 * A new cluster's first election: the candidate holds nothing but what bootstrap wrote (term 1),
 * and neither does this node. Its members have no state yet and vote in it; nothing was
 * acknowledged that a vote could lose (every leader's entries are of term 2 or later).
 */
function firstElection(m: { lastTerm: number }, ownLastTerm: number): boolean {
  return m.lastTerm <= 1 && ownLastTerm <= 1;
}

