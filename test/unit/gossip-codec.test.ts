// The gossip packet: authenticated to the cluster (cluster id and HMAC), bounded, and every
// stray packet dropped with a reason the driver counts. With shared keys, the body is
// encrypted (AES-256-GCM, a fresh nonce each packet) and the header bound to it.

import { describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { clusterDerivedKey, decodePacket, encodePacket, hmacKey, incarnationMax, sharedKey, type GossipMessage } from "../../src/gossip/index.ts";

const ping: GossipMessage = {
  type: "ping", seq: 7, from: "node1", updates: [{ id: "node2", state: "suspect", incarnation: 3 }],
  facts: [{
    id: "node1", incarnation: 5, seq: 2, view: { node2: "suspect" },
    facts: {
      role: "leader", term: 4, leader: "node1", commitIndex: 10, appliedIndex: 9, version: "1.0.0", recovery: "healthy", diskFull: true,
      addresses: { peer: "127.0.0.1:7879", client: "127.0.0.1:7878", admin: "127.0.0.1:9090" }, raftLinks: { node2: false },
      archive: { archivedThrough: 8, lastArchivedSegment: "0000000000000001-0000000000000001.wal", failing: false, segmentsWaiting: 1 },
    },
  }],
};
const key = clusterDerivedKey("cluster-a");

describe("gossip packets", () => {
  test("a packet of this cluster decodes to the message sent", () => {
    const decoded = decodePacket(encodePacket(ping, "cluster-a", key), "cluster-a", key, 1400);
    expect(decoded).toEqual({ ok: true, message: ping });
  });

  test("a cluster id that begins with U+FEFF is read as sent: a packet of \\ufeffcluster-a is not one of cluster-a", () => {
    const bom = encodePacket(ping, "\ufeffcluster-a", clusterDerivedKey("\ufeffcluster-a"));
    expect(decodePacket(bom, "cluster-a", key, 1400)).toEqual({ ok: false, reason: "other_cluster" });
    expect(decodePacket(bom, "\ufeffcluster-a", clusterDerivedKey("\ufeffcluster-a"), 1400)).toEqual({ ok: true, message: ping });
  });

  test("a packet of another cluster is dropped as other_cluster", () => {
    const other = encodePacket(ping, "cluster-b", clusterDerivedKey("cluster-b"));
    expect(decodePacket(other, "cluster-a", key, 1400)).toEqual({ ok: false, reason: "other_cluster" });
  });

  test("a packet naming this cluster without its key is dropped as bad_mac", () => {
    const forged = encodePacket(ping, "cluster-a", hmacKey(new TextEncoder().encode("guess")));
    expect(decodePacket(forged, "cluster-a", key, 1400)).toEqual({ ok: false, reason: "bad_mac" });
    const tampered = encodePacket(ping, "cluster-a", key);
    tampered[20] = (tampered[20] ?? 0) ^ 1;
    expect(decodePacket(tampered, "cluster-a", key, 1400)).toEqual({ ok: false, reason: "bad_mac" });
  });

  test("an incarnation no member could reach is malformed: refuting it would give one no member accepts", () => {
    const forged: GossipMessage = { ...ping, updates: [{ id: "node3", state: "dead", incarnation: Number.MAX_SAFE_INTEGER }] };
    expect(decodePacket(encodePacket(forged, "cluster-a", key), "cluster-a", key, 1400)).toEqual({ ok: false, reason: "malformed" });
    const atBound: GossipMessage = { ...ping, updates: [{ id: "node3", state: "alive", incarnation: incarnationMax }] };
    expect(decodePacket(encodePacket(atBound, "cluster-a", key), "cluster-a", key, 1400)).toEqual({ ok: true, message: atBound });
  });

  test("garbage and truncated packets are dropped as malformed", () => {
    expect(decodePacket(new TextEncoder().encode("hello, is anyone there?"), "cluster-a", key, 1400)).toEqual({ ok: false, reason: "malformed" });
    expect(decodePacket(new Uint8Array(3), "cluster-a", key, 1400)).toEqual({ ok: false, reason: "malformed" });
    const packet = encodePacket(ping, "cluster-a", key);
    expect(decodePacket(packet.subarray(0, 10), "cluster-a", key, 1400).ok).toBe(false);
  });

  test("an authenticated body of the wrong shape is dropped as malformed", () => {
    const bad = encodePacket({ ...ping, updates: [{ id: "node2", state: "zombie", incarnation: 1 }] } as unknown as GossipMessage, "cluster-a", key);
    expect(decodePacket(bad, "cluster-a", key, 1400)).toEqual({ ok: false, reason: "malformed" });
  });

  test("a member's lost log is carried; a packet of a member that does not say decodes as well", () => {
    const facts = ping.facts[0]!;
    const lost: GossipMessage = { ...ping, facts: [{ ...facts, facts: { ...facts.facts, lostLog: true } }] };
    expect(decodePacket(encodePacket(lost, "cluster-a", key), "cluster-a", key, 1400)).toEqual({ ok: true, message: lost });
    expect(decodePacket(encodePacket(ping, "cluster-a", key), "cluster-a", key, 1400)).toEqual({ ok: true, message: ping });
    const bad = { ...ping, facts: [{ ...facts, facts: { ...facts.facts, lostLog: "yes" } }] } as unknown as GossipMessage;
    expect(decodePacket(encodePacket(bad, "cluster-a", key), "cluster-a", key, 1400)).toEqual({ ok: false, reason: "malformed" });
  });

  test("a fact this version does not know (one a newer member adds) is no reason to drop the packet: a rolling upgrade keeps gossip", () => {
    const facts = ping.facts[0]!;
    const newer = { ...ping, facts: [{ ...facts, facts: { ...facts.facts, aFactOfLater: 3 } }] } as unknown as GossipMessage;
    expect(decodePacket(encodePacket(newer, "cluster-a", key), "cluster-a", key, 1400).ok).toBe(true);
  });

  test("a packet over the size bound is dropped as too_large", () => {
    expect(decodePacket(new Uint8Array(1401), "cluster-a", key, 1400)).toEqual({ ok: false, reason: "too_large" });
  });
});

describe("gossip packets under a shared key", () => {
  const k1 = new Uint8Array(randomBytes(32));
  const k2 = new Uint8Array(randomBytes(32));
  const shared = sharedKey(() => [k1]);

  test("the body is encrypted: its text does not appear, two packets of one message differ, and it decodes to the message", () => {
    const p1 = encodePacket(ping, "cluster-a", shared);
    const p2 = encodePacket(ping, "cluster-a", shared);
    expect(Buffer.from(p1).toString("latin1")).not.toContain("node2");
    expect(Buffer.from(p1).equals(Buffer.from(p2))).toBe(false);
    expect(decodePacket(p1, "cluster-a", shared, 1400)).toEqual({ ok: true, message: ping });
  });

  test("a packet under another key is dropped as decrypt_failed; one sealed the other way as key_mismatch", () => {
    const other = encodePacket(ping, "cluster-a", sharedKey(() => [k2]));
    expect(decodePacket(other, "cluster-a", shared, 1400)).toEqual({ ok: false, reason: "decrypt_failed" });
    expect(decodePacket(encodePacket(ping, "cluster-a", key), "cluster-a", shared, 1400)).toEqual({ ok: false, reason: "key_mismatch" });
    expect(decodePacket(encodePacket(ping, "cluster-a", shared), "cluster-a", key, 1400)).toEqual({ ok: false, reason: "key_mismatch" });
  });

  test("the cluster id is bound: a packet moved to another cluster's id does not decrypt", () => {
    const packet = encodePacket(ping, "cluster-a", shared);
    const moved = new Uint8Array(packet);
    moved[13] = "b".charCodeAt(0);
    expect(decodePacket(moved, "cluster-b", shared, 1400)).toEqual({ ok: false, reason: "decrypt_failed" });
    const tampered = new Uint8Array(packet);
    tampered[40] = (tampered[40] ?? 0) ^ 1;
    expect(decodePacket(tampered, "cluster-a", shared, 1400)).toEqual({ ok: false, reason: "decrypt_failed" });
  });

  test("during a rotation both keys open, and the first one seals", () => {
    const rotating = sharedKey(() => [k2, k1]);
    expect(decodePacket(encodePacket(ping, "cluster-a", shared), "cluster-a", rotating, 1400).ok).toBe(true);
    const sent = encodePacket(ping, "cluster-a", rotating);
    expect(decodePacket(sent, "cluster-a", sharedKey(() => [k2]), 1400).ok).toBe(true);
    expect(decodePacket(sent, "cluster-a", shared, 1400)).toEqual({ ok: false, reason: "decrypt_failed" });
  });
});
