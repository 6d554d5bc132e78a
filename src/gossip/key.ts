// The key that authenticates gossip packets to the cluster. Until a configured key exists it
// is derived from the cluster id: that keeps another cluster's and a stray sender's packets
// out, though not a sender that knows the cluster id. A configured secret plugs in through
// the same interface (GossipKey), with nothing else changed.

import { createHmac, timingSafeEqual } from "node:crypto";

export interface GossipKey {
  /** The 32-byte MAC of `data`. */
  sign(data: Uint8Array): Uint8Array;
  verify(data: Uint8Array, mac: Uint8Array): boolean;
}

/** HMAC-SHA256 under `secret`. */
export function hmacKey(secret: Uint8Array): GossipKey {
  const sign = (data: Uint8Array): Uint8Array => new Uint8Array(createHmac("sha256", secret).update(data).digest());
  return {
    sign,
    verify: (data, mac) => mac.length === 32 && timingSafeEqual(sign(data), mac),
  };
}

/** The key every member of a cluster derives from its cluster id alone. */
export function clusterDerivedKey(clusterId: string): GossipKey {
  return hmacKey(new Uint8Array(createHmac("sha256", "svc gossip key v1").update(clusterId).digest()));
}
