// Streaming a snapshot from the leader to a follower that needs entries the leader has
// compacted. The leader sends state.db in CRC-checked chunks on the transport's bulk lane,
// at most a window ahead of what the follower acknowledged (backpressure). The follower
// writes chunks in order to a `.recv-` directory that survives restarts, so a stream cut
// by a dropped connection resumes where it stopped: every ack carries the bytes held, and
// the leader continues from there. Once all bytes are in and the SHA-256 matches, the
// follower files it as a snapshot and hands the Raft core the snapshot message.

import type { Clock, PeerNetwork } from "../io/index.ts";
import type { SnapshotMeta } from "../raft/types.ts";
import type { SnapshotStore } from "../storage/index.ts";
import type { Logger } from "../util/logger.ts";
import type { SnapshotMessage, TransferMetrics } from "./_snapshot-wire.ts";
import { SnapshotReceiver } from "./snapshot-receiver.ts";
import { SnapshotSender, type SenderGarbage } from "./snapshot-sender.ts";

export type { SnapshotMessage, TransferMetrics } from "./_snapshot-wire.ts";

/**
 * Moving snapshots between members, as the effect loop uses it. Production: the chunked,
 * resumable streams below (fileSnapshotTransfer). The simulator has a twin that moves a
 * filed image in one message over its network.
 */
export interface SnapshotTransfer {
  /** The core asked to send a snapshot to m.to. */
  send(m: SnapshotMessage): Promise<void>;
  onChunk(from: string, payload: Uint8Array): void;
  onAck(from: string, payload: Uint8Array): void;
  /** On every tick: abandon outgoing transfers that stopped making progress. */
  checkStalls(nowMs: number): void;
  /** A snapshot is arriving or being verified (see SnapshotReceiver.busy). */
  busy(appliedIndex: number): boolean;
  stop(): void;
}

export interface SnapshotTransferHooks {
  /** An outgoing transfer ended (the core is told: reportSnapshot). */
  sent(peer: string, ok: boolean): void;
  /** A snapshot arrived, verified and filed: step `message` into the core. */
  received(message: SnapshotMessage, clusterId: string): void;
  /** The first chunk of a snapshot arrived. */
  started(meta: SnapshotMeta): void;
  appliedIndex(): number;
}

/** The production transfer: snapshot directories streamed over the peer transport's bulk lane. */
export function fileSnapshotTransfer(
  network: PeerNetwork, dirs: SnapshotStore, storePath: string, logger: Logger, metrics: TransferMetrics, hooks: SnapshotTransferHooks, clock: Clock,
  garbage: SenderGarbage | null = null,
): SnapshotTransfer {
  const sender = new SnapshotSender(network, dirs, logger, metrics, hooks.sent, () => clock.nowMs(), garbage);
  const receiver = new SnapshotReceiver(network, dirs, storePath, logger, metrics, hooks.received, hooks.started, hooks.appliedIndex, clock);
  return {
    send: (m) => sender.start(m),
    onChunk: (from, payload) => receiver.onChunk(from, payload),
    onAck: (from, payload) => sender.onAck(from, payload),
    checkStalls: (nowMs) => sender.checkStalls(nowMs),
    busy: (appliedIndex) => receiver.busy(appliedIndex),
    stop: () => sender.stop(),
  };
}
