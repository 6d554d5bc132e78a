// Messages to and from the other members: Raft messages stepped into the core (after checks
// the core cannot make: addressing, and the lost-log vote gate), snapshot chunks and acks to the
// transfer, and the core's outgoing messages onto the network — a snapshot message becomes an
// image streamed by the transfer (the newest image at or past what the core names, made for
// the follower when there is none) — and the core's requests to read compacted entries back
// out of the log store for a member behind the in-memory log (one read at a time per member,
// answered into the core).

import { decodeMessage, encodeMessage, type Entry, type LogFetch, type Message } from "../raft/index.ts";
import { MessageType } from "../transport/index.ts";
import { errorMessage } from "../util/errors.ts";
import type { NodeContext } from "./context.ts";
import type { SnapshotPolicy } from "./snapshot-policy.ts";
import type { SnapshotTransfer } from "./snapshot-transfer.ts";

export class PeerMessages {
  /** The log-store read in progress for each member: the next one waits for it (the reader is sequential). */
  private readonly reading = new Map<string, Promise<void>>();

  constructor(
    private readonly ctx: NodeContext,
    private readonly snapshots: SnapshotPolicy,
    private readonly transfer: () => SnapshotTransfer | null,
    private readonly schedule: () => void,
  ) {}

  /** A message from a peer (the network has checked framing, CRC and cluster id). */
  receive(from: string, type: number, payload: Uint8Array): void {
    const { ctx } = this;
    if (ctx.stopped || ctx.fatalError !== null) return;
    switch (type) {
      case MessageType.raft: {
        const decoded = decodeMessage(payload);
        if (!decoded.ok) {
          ctx.metrics.peerMessagesDropped.labels("malformed").inc();
          ctx.logger.debug("dropped a malformed raft message", { from, error: decoded.error.code });
          return;
        }
        const m = decoded.message;
        if (m.from !== from || m.to !== ctx.config.nodeId) {
          ctx.metrics.peerMessagesDropped.labels("misaddressed").inc();
          return;
        }
        if ((m.type === "vote" || m.type === "pre_vote") && ctx.lostLog) {
          ctx.metrics.peerMessagesDropped.labels("vote_while_recovering").inc();
          return;
        }
        if (m.type === "append" || m.type === "heartbeat") ctx.leaderCommitSeen = Math.max(ctx.leaderCommitSeen, m.commit);
        ctx.core.step(m);
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
    const { ctx } = this;
    for (const m of messages) {
      if (m.type === "snapshot") {
        const transfer = this.transfer();
        if (transfer === null) {
          ctx.core.reportSnapshot(m.to, false);
          continue;
        }
        // The core names the point its in-memory log starts after; the follower is sent the
        // newest image at or past it (made now when there is none: see snapshot-policy.ts).
        this.snapshots.imageAtLeast(m.snapshot.index)
          .then((snapshot) => transfer.send({ ...m, snapshot }))
          .catch((e: unknown) => {
            ctx.logger.error("cannot send snapshot", { peer: m.to, error: errorMessage(e) });
            ctx.core.reportSnapshot(m.to, false);
            this.schedule();
          });
        continue;
      }
      if (!ctx.io.network.send(m.to, MessageType.raft, encodeMessage(m)) && m.type === "append") ctx.core.reportUnreachable(m.to);
    }
  }
}
