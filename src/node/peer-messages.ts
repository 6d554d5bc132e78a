// Messages to and from the other members: Raft messages stepped into the core (after checks
// the core cannot make: addressing, and the lost-log vote gate), snapshot chunks and acks to the
// transfer, and the core's outgoing messages onto the network — a snapshot message becomes an
// image streamed by the transfer (the newest image at or past what the core names, made for
// the follower when there is none).

import { decodeMessage, encodeMessage, type Message } from "../raft/index.ts";
import { MessageType } from "../transport/index.ts";
import { errorMessage } from "../util/errors.ts";
import type { NodeContext } from "./context.ts";
import type { SnapshotPolicy } from "./snapshot-policy.ts";
import type { SnapshotTransfer } from "./snapshot-transfer.ts";

export class PeerMessages {
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
