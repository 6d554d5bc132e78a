// Message types the node sends over the transport. The transport carries any type in
// 0x10–0xff without looking inside; these are the ones svc assigns.

export const MessageType = {
  /** A Raft message, encoded by the Raft codec. */
  raft: 0x10,
  /** A piece of a snapshot being streamed to a follower (send with { bulk: true }). */
  snapshotChunk: 0x11,
  /** The follower's acknowledgement of snapshot chunks, for flow control. */
  snapshotAck: 0x12,
} as const;

export type MessageType = (typeof MessageType)[keyof typeof MessageType];
