// Gossip membership (SWIM) over UDP on the peer port: who is alive, and what each member
// reports about itself and sees of the others. core.ts is the protocol as a pure state
// machine; udp.ts drives it over a socket; codec.ts and key.ts put packets on the wire and
// authenticate (or, with a shared key, encrypt) them for the cluster. Raft membership stays
// the authority for who votes.

export { GossipCore, type GossipCoreOptions } from "./core.ts";
export { createGossip, type GossipDriverOptions, type GossipService, type GossipSnapshot, type GossipSource, type RefusedSender } from "./udp.ts";
export { decodePacket, encodePacket, incarnationMax, packetOverheadBytes, dropReasons, GOSSIP_WIRE_VERSION, type Decoded, type DropReason } from "./codec.ts";
export {
  clusterDerivedKey, hmacKey, sharedKey, GOSSIP_SHARED_KEY_BYTES, GOSSIP_SHARED_KEYS_MAX, GOSSIP_WIRE_VERSION_ENCRYPTED, type GossipKey,
} from "./key.ts";
export {
  defaultGossipTimings, memberStates,
  type FactsRecord, type GossipCounters, type GossipMessage, type GossipTimings, type MemberFacts, type MemberState, type MemberStatus, type Outgoing, type StateUpdate,
} from "./types.ts";
