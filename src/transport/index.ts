// The peer transport (port 7879, TCP): typed opaque messages between the nodes of one cluster,
// with a handshake that refuses other clusters, bounded per-peer queues, reconnection with
// backoff, and a bulk lane for snapshot chunks that does not hold up Raft traffic.
//
// Wire format, for operators with a packet capture: every frame is
// `u32 length | u32 crc32(type, payload) | u8 type | payload`, big-endian; types below 0x10
// belong to the transport (0x01 handshake, 0x02 refusal, 0x03 bulk fragment).

export { createTransport, FRAME_HEADROOM_BYTES, type SendOptions, type Transport } from "./transport.ts";
export type { MessageHandler, TransportOptions } from "./_options.ts";
export { certificateIds, tlsRefusalReasons, type PeerTls, type TlsRefusalReason } from "./_peer-tls.ts";
export type { PeerStats, TransportCounters, TransportStats } from "./_stats.ts";
export { PROTOCOL_VERSION } from "./_hello.ts";
export { MessageType } from "./message-type.ts";
export type { TransportErrorCode } from "./errors.ts";
