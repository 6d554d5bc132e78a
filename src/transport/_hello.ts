// The handshake each side sends first on a peer connection, and the rules for accepting one.
// Payload: `u32 magic | u16 version | (u8 length | UTF-8) × [clusterId, senderId, targetId]`.
// An empty cluster id means "not in a cluster yet" (a new node waiting for its first snapshot).
// A node without a cluster id accepts members of any cluster; a node with one accepts only
// members that send the same id. The accepting side also requires the sender to be a member.

/** "SVCP": tells a peer connection apart from a stray client or a port scanner. */
export const PROTOCOL_MAGIC = 0x53564350;
export const PROTOCOL_VERSION = 1;
/** Ids longer than this cannot be framed in one length byte. */
export const ID_BYTES_MAX = 255;
/** Bound on any frame before the peer has identified itself: a handshake or a refusal. */
export const HELLO_FRAME_BYTES_MAX = 4096;
/** A refusal's reason is cut to this many characters so that it always fits one such frame. */
export const REJECT_REASON_CHARS_MAX = 512;

export interface Hello {
  readonly version: number;
  readonly clusterId: string;
  readonly senderId: string;
  readonly targetId: string;
}

const utf8Encoder = new TextEncoder();
// ignoreBOM: a leading U+FEFF is part of the id, not a mark to drop ("\ufeffn1" is not "n1").
const utf8Decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

export function idBytes(id: string): number {
  return utf8Encoder.encode(id).byteLength;
}

export function encodeHello(hello: Omit<Hello, "version">): Uint8Array {
  const fields = [hello.clusterId, hello.senderId, hello.targetId].map((s) => utf8Encoder.encode(s));
  let size = 6;
  for (const f of fields) size += 1 + f.byteLength;
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  view.setUint32(0, PROTOCOL_MAGIC);
  view.setUint16(4, PROTOCOL_VERSION);
  let offset = 6;
  for (const f of fields) {
    // Callers validate id lengths when the transport is created; this guards the framing.
    if (f.byteLength > ID_BYTES_MAX) throw new RangeError(`id of ${f.byteLength} bytes does not fit a handshake`);
    out[offset] = f.byteLength;
    out.set(f, offset + 1);
    offset += 1 + f.byteLength;
  }
  return out;
}

/** The handshake, or why it is not one. Never throws on a peer's bytes. */
export function decodeHello(payload: Uint8Array): Hello | { readonly error: string } {
  if (payload.byteLength < 6) return { error: `handshake of ${payload.byteLength} bytes is too short` };
  const view = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
  const magic = view.getUint32(0);
  if (magic !== PROTOCOL_MAGIC) return { error: `bad protocol magic 0x${magic.toString(16).padStart(8, "0")}` };
  const version = view.getUint16(4);
  if (version !== PROTOCOL_VERSION) {
    return { error: `peer protocol version ${version} is not supported (this node speaks version ${PROTOCOL_VERSION})` };
  }
  const fields: string[] = [];
  let offset = 6;
  for (let i = 0; i < 3; i++) {
    const length = payload[offset];
    if (length === undefined || offset + 1 + length > payload.byteLength) return { error: "handshake is truncated" };
    try {
      fields.push(utf8Decoder.decode(payload.subarray(offset + 1, offset + 1 + length)));
    } catch {
      return { error: "handshake holds an id that is not UTF-8" };
    }
    offset += 1 + length;
  }
  if (offset !== payload.byteLength) return { error: "handshake has trailing bytes" };
  const [clusterId, senderId, targetId] = fields as [string, string, string];
  if (senderId === "") return { error: "handshake has an empty sender id" };
  return { version, clusterId, senderId, targetId };
}

/** The words of a refusal that says the acceptor belongs to another cluster than the dialler (see clusterMismatch). */
export const OF_ANOTHER_CLUSTER = ", and this node to another, ";

/** `peerId`: the node that spoke for the other side. */
function clusterMismatch(local: string, remote: string, peerId: string): string | null {
  if (local === "" || remote === "" || local === remote) return null;
  return `peer ${JSON.stringify(peerId)} belongs to cluster ${JSON.stringify(remote)}${OF_ANOTHER_CLUSTER}${JSON.stringify(local)}: ` +
    "one of the two holds another cluster's data (restored from another cluster's backup, or made anew by init-cluster --bootstrap), " +
    "and they never exchange entries; `svc admin cluster-info` on each names its cluster";
}

/**
 * The words of a refusal that says the acceptor is in a cluster (without naming it: see
 * InboundServer's refusal): a node about to bootstrap a new cluster learns from them that a
 * member already belongs to one, even when that member no longer counts it a member (it was
 * removed, and comes back empty) and so never dials back.
 */
export const BELONGS_TO_A_CLUSTER = "and this node belongs to cluster";

/** What the accepting side knows of its members. */
export type Membership = "unknown" | { readonly has: (peerId: string) => boolean };

/**
 * Why the accepting side refuses a dialer's handshake, or null to accept it. A connection is
 * accepted only from a member, and, once this node has a cluster id, only with that id: what
 * arrives over it is trusted as the member's Raft messages.
 */
export function refuseAsAcceptor(hello: Hello, localNodeId: string, localClusterId: string, members: Membership): string | null {
  const cluster = clusterMismatch(localClusterId, hello.clusterId, hello.senderId);
  if (cluster !== null) return cluster;
  if (localClusterId !== "" && hello.clusterId === "") {
    return `peer ${JSON.stringify(hello.senderId)} sent no cluster id, ${BELONGS_TO_A_CLUSTER} ${JSON.stringify(localClusterId)}`;
  }
  if (hello.targetId !== localNodeId) {
    return `peer ${JSON.stringify(hello.senderId)} dialed node ${JSON.stringify(hello.targetId)}, but this is node ${JSON.stringify(localNodeId)}`;
  }
  if (hello.senderId === localNodeId) return `peer claims this node's own id ${JSON.stringify(localNodeId)}`;
  if (members === "unknown") return "this node is starting and does not know its members yet";
  if (!members.has(hello.senderId)) return `node ${JSON.stringify(hello.senderId)} is not a member of this node's cluster`;
  return null;
}

/** Why the dialing side refuses the acceptor's answer, or null to accept it. */
export function refuseAsDialer(hello: Hello, localNodeId: string, localClusterId: string, expectedPeerId: string): string | null {
  const cluster = clusterMismatch(localClusterId, hello.clusterId, expectedPeerId);
  if (cluster !== null) return cluster;
  if (hello.senderId !== expectedPeerId) {
    return `the address of peer ${JSON.stringify(expectedPeerId)} answered as node ${JSON.stringify(hello.senderId)}`;
  }
  if (hello.targetId !== localNodeId) return `peer answered to node ${JSON.stringify(hello.targetId)}, not to this node`;
  return null;
}
