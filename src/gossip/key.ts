// The key that protects gossip packets. Without a configured key it is derived from the
// cluster id and only authenticates (HMAC-SHA256): that keeps another cluster's and a stray
// sender's packets out, though not a sender that knows the cluster id, and the body travels
// in clear. With [gossip] key_file the cluster shares secret keys and every packet is
// encrypted and authenticated with AES-256-GCM: the first key seals, every key listed opens
// (two during a rotation). The packet's header (magic, version, cluster id) is authenticated
// as associated data either way, so a packet cannot be moved to another cluster.

import { createCipheriv, createDecipheriv, createHmac, randomBytes, timingSafeEqual } from "node:crypto";

export interface GossipKey {
  /** The wire version of the packets this key seals (codec.ts): 1 HMAC, 2 AES-256-GCM. */
  readonly wireVersion: number;
  /** Bytes seal adds to a body. */
  readonly overheadBytes: number;
  /** The body as it goes on the wire after `header`, bound to it. */
  seal(header: Uint8Array, body: Uint8Array): Uint8Array;
  /** The body back, or null when the bytes were not sealed with (one of) this key's secrets under `header`. */
  open(header: Uint8Array, sealed: Uint8Array): Uint8Array | null;
}

export const GOSSIP_WIRE_VERSION_MAC = 1;
export const GOSSIP_WIRE_VERSION_ENCRYPTED = 2;
/** A shared key is 32 bytes (AES-256). */
export const GOSSIP_SHARED_KEY_BYTES = 32;
/** At most two keys are accepted at once: the one in use and the one being rotated in or out. */
export const GOSSIP_SHARED_KEYS_MAX = 2;

const macBytes = 32;
const nonceBytes = 12;
const tagBytes = 16;

/** HMAC-SHA256 under `secret`: `body | MAC(header | body)`, the body in clear. */
export function hmacKey(secret: Uint8Array): GossipKey {
  const mac = (header: Uint8Array, body: Uint8Array): Uint8Array => new Uint8Array(createHmac("sha256", secret).update(header).update(body).digest());
  return {
    wireVersion: GOSSIP_WIRE_VERSION_MAC,
    overheadBytes: macBytes,
    seal: (header, body) => {
      const out = new Uint8Array(body.length + macBytes);
      out.set(body, 0);
      out.set(mac(header, body), body.length);
      return out;
    },
    open: (header, sealed) => {
      if (sealed.length < macBytes) return null;
      const body = sealed.subarray(0, sealed.length - macBytes);
      return timingSafeEqual(mac(header, body), sealed.subarray(sealed.length - macBytes)) ? body : null;
    },
  };
}

/** The key every member of a cluster derives from its cluster id alone. */
export function clusterDerivedKey(clusterId: string): GossipKey {
  return hmacKey(new Uint8Array(createHmac("sha256", "svc gossip key v1").update(clusterId).digest()));
}

/**
 * AES-256-GCM under shared keys, read at every packet (a reload replaces them between two):
 * `nonce (12 random bytes) | ciphertext | tag (16)`, the header as associated data. The first
 * key seals; opening tries each key. keys() must give 1 or 2 keys of 32 bytes.
 */
export function sharedKey(keys: () => readonly Uint8Array[]): GossipKey {
  const current = (): readonly Uint8Array[] => {
    const k = keys();
    if (k.length < 1 || k.length > GOSSIP_SHARED_KEYS_MAX || k.some((x) => x.length !== GOSSIP_SHARED_KEY_BYTES)) {
      throw new Error(`gossip needs 1 to ${GOSSIP_SHARED_KEYS_MAX} shared keys of ${GOSSIP_SHARED_KEY_BYTES} bytes`);
    }
    return k;
  };
  return {
    wireVersion: GOSSIP_WIRE_VERSION_ENCRYPTED,
    overheadBytes: nonceBytes + tagBytes,
    seal: (header, body) => {
      const [key] = current();
      const nonce = randomBytes(nonceBytes);
      const cipher = createCipheriv("aes-256-gcm", key as Uint8Array, nonce);
      cipher.setAAD(header);
      const ciphertext = Buffer.concat([cipher.update(body), cipher.final()]);
      const out = new Uint8Array(nonceBytes + ciphertext.length + tagBytes);
      out.set(nonce, 0);
      out.set(ciphertext, nonceBytes);
      out.set(cipher.getAuthTag(), nonceBytes + ciphertext.length);
      return out;
    },
    open: (header, sealed) => {
      if (sealed.length < nonceBytes + tagBytes) return null;
      const nonce = sealed.subarray(0, nonceBytes);
      const ciphertext = sealed.subarray(nonceBytes, sealed.length - tagBytes);
      const tag = sealed.subarray(sealed.length - tagBytes);
      for (const key of current()) {
        try {
          const decipher = createDecipheriv("aes-256-gcm", key, nonce);
          decipher.setAAD(header);
          decipher.setAuthTag(tag);
          return new Uint8Array(Buffer.concat([decipher.update(ciphertext), decipher.final()]));
        } catch {
          // Not this key: try the next.
        }
      }
      return null;
    },
  };
}
