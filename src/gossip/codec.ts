// The gossip packet on the wire (UDP, the peer port):
//   "SVG" u8 version | u8 cluster-id length | cluster id (UTF-8) | sealed body
// The body is JSON, sealed by the cluster's key (key.ts) with the header bound to it:
// version 1 is `body | HMAC-SHA256` (the key derived from the cluster id), version 2 is
// `nonce | AES-256-GCM ciphertext | tag` ([gossip] key_file). A packet from another cluster,
// sealed the other way, that does not open, too large or malformed is dropped with a reason
// the driver counts; decoding bounds every length before it reads.

import { memberStates, type FactsRecord, type GossipMessage, type MemberFacts, type StateUpdate } from "./types.ts";
import { GOSSIP_WIRE_VERSION_ENCRYPTED, GOSSIP_WIRE_VERSION_MAC, type GossipKey } from "./key.ts";

/** The version of packets authenticated by the key derived from the cluster id. */
export const GOSSIP_WIRE_VERSION = GOSSIP_WIRE_VERSION_MAC;
const magic = [0x53, 0x56, 0x47] as const; // "SVG"
/** What a key derived from the cluster id adds (HMAC-SHA256), the most any key adds. */
const sealBytesDefault = 32;
const clusterIdBytesMax = 128;
const idBytesMax = 128;
const updatesMax = 64;
const recordsMax = 32;

/**
 * bad_mac: the MAC does not match (wrong cluster id); key_mismatch: sealed the other way (in
 * clear to a node with a shared key, or encrypted to one without); decrypt_failed: encrypted
 * under a key this node does not hold.
 */
export type DropReason = "malformed" | "too_large" | "other_cluster" | "bad_mac" | "key_mismatch" | "decrypt_failed" | "unknown_member" | "no_cluster_id" | "send_failed";

export const dropReasons: readonly DropReason[] = ["malformed", "too_large", "other_cluster", "bad_mac", "key_mismatch", "decrypt_failed", "unknown_member", "no_cluster_id", "send_failed"];

const encoder = new TextEncoder();
// ignoreBOM: a leading U+FEFF is part of the text (a cluster id may begin with one), not a byte order mark to drop.
const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** The bytes a packet spends around its body (header and seal), for the core's body bound. */
export function packetOverheadBytes(clusterId: string, key?: GossipKey): number {
  return 5 + encoder.encode(clusterId).length + (key?.overheadBytes ?? sealBytesDefault);
}

export function encodePacket(message: GossipMessage, clusterId: string, key: GossipKey): Uint8Array {
  const cid = encoder.encode(clusterId);
  if (cid.length > clusterIdBytesMax) throw new Error(`cluster id longer than ${clusterIdBytesMax} bytes`);
  const header = new Uint8Array(5 + cid.length);
  header.set(magic, 0);
  header[3] = key.wireVersion;
  header[4] = cid.length;
  header.set(cid, 5);
  const sealed = key.seal(header, encoder.encode(JSON.stringify(message)));
  const out = new Uint8Array(header.length + sealed.length);
  out.set(header, 0);
  out.set(sealed, header.length);
  return out;
}

export type Decoded = { ok: true; message: GossipMessage } | { ok: false; reason: DropReason };

export function decodePacket(packet: Uint8Array, clusterId: string, key: GossipKey, packetBytesMax: number): Decoded {
  if (packet.length > packetBytesMax) return { ok: false, reason: "too_large" };
  if (packet.length < 5 + key.overheadBytes + 2) return { ok: false, reason: "malformed" };
  const version = packet[3];
  if (packet[0] !== magic[0] || packet[1] !== magic[1] || packet[2] !== magic[2]) return { ok: false, reason: "malformed" };
  if (version !== GOSSIP_WIRE_VERSION_MAC && version !== GOSSIP_WIRE_VERSION_ENCRYPTED) return { ok: false, reason: "malformed" };
  const cidLength = packet[4] ?? 0;
  const bodyStart = 5 + cidLength;
  if (bodyStart + key.overheadBytes > packet.length) return { ok: false, reason: "malformed" };
  let cid: string;
  try {
    cid = decoder.decode(packet.subarray(5, bodyStart));
  } catch {
    return { ok: false, reason: "malformed" };
  }
  if (cid !== clusterId) return { ok: false, reason: "other_cluster" };
  if (version !== key.wireVersion) return { ok: false, reason: "key_mismatch" };
  const body = key.open(packet.subarray(0, bodyStart), packet.subarray(bodyStart));
  if (body === null) return { ok: false, reason: key.wireVersion === GOSSIP_WIRE_VERSION_MAC ? "bad_mac" : "decrypt_failed" };
  try {
    const message = checkMessage(JSON.parse(decoder.decode(body)));
    return message === null ? { ok: false, reason: "malformed" } : { ok: true, message };
  } catch {
    return { ok: false, reason: "malformed" };
  }
}

// ─── shape checks: an authenticated sender may still run another version ─────────────────

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);
const isId = (v: unknown): v is string => typeof v === "string" && v.length > 0 && v.length <= idBytesMax;
const isCount = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= -1;
/**
 * An incarnation starts at the member's start time (ms since the epoch) and grows by one per
 * refutation: never near this (2^50 ms is 35,000 years). A larger one is forged or damaged (near
 * 2^53 its refutation, one more, would not be a safe integer, and every packet carrying it would
 * be dropped: the member dead to all for good).
 */
export const incarnationMax = 2 ** 50;
const isIncarnation = (v: unknown): v is number => isCount(v) && v <= incarnationMax;
const isText = (v: unknown): v is string => typeof v === "string" && v.length <= 512;

function checkMessage(v: unknown): GossipMessage | null {
  if (!isObject(v) || !isId(v["from"]) || !isCount(v["seq"])) return null;
  const updates = v["updates"];
  const facts = v["facts"];
  if (!Array.isArray(updates) || updates.length > updatesMax || !Array.isArray(facts) || facts.length > recordsMax) return null;
  if (!updates.every(isUpdate) || !facts.every(isRecord)) return null;
  const base = { from: v["from"], seq: v["seq"], updates: updates as StateUpdate[], facts: facts as FactsRecord[] };
  switch (v["type"]) {
    case "ping":
      return { type: "ping", ...base };
    case "ack":
      return { type: "ack", ...base };
    case "ping_req":
      return isId(v["target"]) ? { type: "ping_req", ...base, target: v["target"] } : null;
    default:
      return null;
  }
}

function isUpdate(v: unknown): v is StateUpdate {
  return isObject(v) && isId(v["id"]) && isIncarnation(v["incarnation"]) && memberStates.includes(v["state"] as never);
}

function isRecord(v: unknown): v is FactsRecord {
  if (!isObject(v) || !isId(v["id"]) || !isIncarnation(v["incarnation"]) || !isCount(v["seq"]) || !isFacts(v["facts"])) return false;
  const view = v["view"];
  return isObject(view) && Object.entries(view).every(([k, s]) => isId(k) && memberStates.includes(s as never));
}

function isFacts(v: unknown): v is MemberFacts {
  if (!isObject(v)) return false;
  const a = v["addresses"];
  const links = v["raftLinks"];
  const archive = v["archive"];
  return isText(v["role"]) && isCount(v["term"]) && (v["leader"] === null || isId(v["leader"])) && isCount(v["commitIndex"]) && isCount(v["appliedIndex"])
    && isText(v["version"]) && isText(v["recovery"]) && (v["diskFull"] === undefined || typeof v["diskFull"] === "boolean")
    && (v["lostLog"] === undefined || typeof v["lostLog"] === "boolean")
    && isObject(a) && isText(a["peer"]) && isText(a["client"]) && isText(a["admin"])
    && isObject(links) && Object.entries(links).every(([k, up]) => isId(k) && typeof up === "boolean")
    && (archive === null || (isObject(archive) && isCount(archive["archivedThrough"]) && (archive["lastArchivedSegment"] === null || isText(archive["lastArchivedSegment"]))
      && typeof archive["failing"] === "boolean" && isCount(archive["segmentsWaiting"])));
}
