// The gossip packet on the wire (UDP, the peer port):
//   "SVG" u8 version | u8 cluster-id length | cluster id (UTF-8) | body (JSON) | HMAC-SHA256 (32 bytes)
// The MAC covers everything before it, under a key the cluster shares (key.ts: derived from
// the cluster id until a configured key exists). A packet from another cluster, with a bad
// MAC, too large or malformed is dropped with a reason the driver counts; decoding bounds
// every length before it reads.

import { memberStates, type FactsRecord, type GossipMessage, type MemberFacts, type StateUpdate } from "./types.ts";
import type { GossipKey } from "./key.ts";

export const GOSSIP_WIRE_VERSION = 1;
const magic = [0x53, 0x56, 0x47] as const; // "SVG"
const macBytes = 32;
const clusterIdBytesMax = 128;
const idBytesMax = 128;
const updatesMax = 64;
const recordsMax = 32;

export type DropReason = "malformed" | "too_large" | "other_cluster" | "bad_mac" | "unknown_member" | "no_cluster_id" | "send_failed";

export const dropReasons: readonly DropReason[] = ["malformed", "too_large", "other_cluster", "bad_mac", "unknown_member", "no_cluster_id", "send_failed"];

const encoder = new TextEncoder();
// ignoreBOM: a leading U+FEFF is part of the text (a cluster id may begin with one), not a byte order mark to drop.
const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** The bytes a packet spends around its body (header and MAC), for the core's body bound. */
export function packetOverheadBytes(clusterId: string): number {
  return 5 + encoder.encode(clusterId).length + macBytes;
}

export function encodePacket(message: GossipMessage, clusterId: string, key: GossipKey): Uint8Array {
  const cid = encoder.encode(clusterId);
  if (cid.length > clusterIdBytesMax) throw new Error(`cluster id longer than ${clusterIdBytesMax} bytes`);
  const body = encoder.encode(JSON.stringify(message));
  const out = new Uint8Array(5 + cid.length + body.length + macBytes);
  out.set(magic, 0);
  out[3] = GOSSIP_WIRE_VERSION;
  out[4] = cid.length;
  out.set(cid, 5);
  out.set(body, 5 + cid.length);
  const signed = out.subarray(0, out.length - macBytes);
  out.set(key.sign(signed), out.length - macBytes);
  return out;
}

export type Decoded = { ok: true; message: GossipMessage } | { ok: false; reason: DropReason };

export function decodePacket(packet: Uint8Array, clusterId: string, key: GossipKey, packetBytesMax: number): Decoded {
  if (packet.length > packetBytesMax) return { ok: false, reason: "too_large" };
  if (packet.length < 5 + macBytes + 2) return { ok: false, reason: "malformed" };
  if (packet[0] !== magic[0] || packet[1] !== magic[1] || packet[2] !== magic[2] || packet[3] !== GOSSIP_WIRE_VERSION) return { ok: false, reason: "malformed" };
  const cidLength = packet[4] ?? 0;
  const bodyStart = 5 + cidLength;
  if (bodyStart + macBytes > packet.length) return { ok: false, reason: "malformed" };
  let cid: string;
  try {
    cid = decoder.decode(packet.subarray(5, bodyStart));
  } catch {
    return { ok: false, reason: "malformed" };
  }
  if (cid !== clusterId) return { ok: false, reason: "other_cluster" };
  const macAt = packet.length - macBytes;
  if (!key.verify(packet.subarray(0, macAt), packet.subarray(macAt))) return { ok: false, reason: "bad_mac" };
  try {
    const message = checkMessage(JSON.parse(decoder.decode(packet.subarray(bodyStart, macAt))));
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
  return isObject(v) && isId(v["id"]) && isCount(v["incarnation"]) && memberStates.includes(v["state"] as never);
}

function isRecord(v: unknown): v is FactsRecord {
  if (!isObject(v) || !isId(v["id"]) || !isCount(v["incarnation"]) || !isCount(v["seq"]) || !isFacts(v["facts"])) return false;
  const view = v["view"];
  return isObject(view) && Object.entries(view).every(([k, s]) => isId(k) && memberStates.includes(s as never));
}

function isFacts(v: unknown): v is MemberFacts {
  if (!isObject(v)) return false;
  const a = v["addresses"];
  const links = v["raftLinks"];
  const archive = v["archive"];
  return isText(v["role"]) && isCount(v["term"]) && (v["leader"] === null || isId(v["leader"])) && isCount(v["commitIndex"]) && isCount(v["appliedIndex"])
    && isText(v["version"]) && isText(v["recovery"])
    && isObject(a) && isText(a["peer"]) && isText(a["client"]) && isText(a["admin"])
    && isObject(links) && Object.entries(links).every(([k, up]) => isId(k) && typeof up === "boolean")
    && (archive === null || (isObject(archive) && isCount(archive["archivedThrough"]) && (archive["lastArchivedSegment"] === null || isText(archive["lastArchivedSegment"]))
      && typeof archive["failing"] === "boolean" && isCount(archive["segmentsWaiting"])));
}
