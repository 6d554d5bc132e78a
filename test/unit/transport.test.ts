// The peer transport over real sockets on 127.0.0.1. No timing assertions: every wait polls a
// condition with a deadline.

import { afterEach, describe, expect, test } from "bun:test";
import type { Socket } from "bun";
import { createTransport, FRAME_HEADROOM_BYTES, MessageType, type Transport, type TransportOptions } from "../../src/transport/index.ts";
import { refuseAsAcceptor, refuseAsDialer } from "../../src/transport/_hello.ts";
import { createPrng, type Logger } from "../../src/util/index.ts";

const HOST = "127.0.0.1";
const te = new TextEncoder();
const td = new TextDecoder();

interface Received {
  readonly from: string;
  readonly type: number;
  readonly payload: Uint8Array;
}

interface Node {
  readonly id: string;
  readonly transport: Transport;
  readonly received: Received[];
  readonly warnings: string[];
  readonly address: string;
}

const cleanups: (() => void)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) cleanup();
  // Let close callbacks run before the next test binds sockets.
  await Bun.sleep(10);
});

function capturingLogger(warnings: string[]): Logger {
  const logger: Logger = {
    error: (m) => warnings.push(`error: ${m}`),
    warn: (m) => warnings.push(m),
    info() {},
    debug() {},
    trace() {},
    enabled: () => true,
    child: () => logger,
  };
  return logger;
}

function startNode(id: string, clusterId = "c1", options: Partial<TransportOptions> = {}): Node {
  const received: Received[] = [];
  const warnings: string[] = [];
  const transport = createTransport({
    nodeId: id,
    clusterId,
    listen: { hostname: HOST, port: 0 },
    onMessage: (from, type, payload) => received.push({ from, type, payload }),
    logger: capturingLogger(warnings),
    reconnectDelayMsMin: 10,
    reconnectDelayMsMax: 100,
    ...options,
  });
  cleanups.push(() => transport.close());
  const port = transport.start();
  return { id, transport, received, warnings, address: `${HOST}:${port}` };
}

function connect(...nodes: Node[]): void {
  const peers = Object.fromEntries(nodes.map((n) => [n.id, n.address]));
  for (const n of nodes) n.transport.setPeers(peers);
}

/** a, connected to b, then b gone: a waits 40 s before it dials again, so only b's return can bring them together sooner. */
async function peerLostWithLongBackoff(): Promise<{ a: Node; port: number }> {
  const a = startNode("a", "c1", { reconnectDelayMsMin: 40_000, reconnectDelayMsMax: 40_000 });
  const b = startNode("b");
  const port = b.transport.port;
  connect(a, b);
  await waitFor("a connected to b", () => a.transport.stats().peers.b?.connected === true);
  b.transport.close();
  await waitFor("a noticed the loss", () => a.transport.stats().peers.b?.connected === false);
  return { a, port };
}

async function waitFor(what: string, condition: () => boolean, deadlineMs = 15_000): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await Bun.sleep(5);
  }
}

function text(r: Received | undefined): string {
  return r === undefined ? "<none>" : td.decode(r.payload);
}

async function freePort(): Promise<number> {
  const listener = Bun.listen({ hostname: HOST, port: 0, socket: { data() {} } });
  const port = listener.port;
  listener.stop(true);
  return port;
}

// A frame built by hand from the documented wire format, so the tests also pin the format.
function frame(type: number, payload: Uint8Array, options: { crcDelta?: number; lengthBytes?: number } = {}): Uint8Array {
  const out = new Uint8Array(9 + payload.byteLength);
  const view = new DataView(out.buffer);
  const crc = Bun.hash.crc32(payload, Bun.hash.crc32(Uint8Array.of(type)));
  view.setUint32(0, options.lengthBytes ?? payload.byteLength);
  view.setUint32(4, (crc + (options.crcDelta ?? 0)) >>> 0);
  view.setUint8(8, type);
  out.set(payload, 9);
  return out;
}

function helloPayload(clusterId: string, senderId: string, targetId: string, magic = 0x53564350, version = 1): Uint8Array {
  const fields = [clusterId, senderId, targetId].map((s) => te.encode(s));
  const out = new Uint8Array(6 + fields.reduce((n, f) => n + 1 + f.byteLength, 0));
  const view = new DataView(out.buffer);
  view.setUint32(0, magic);
  view.setUint16(4, version);
  let offset = 6;
  for (const f of fields) {
    out[offset] = f.byteLength;
    out.set(f, offset + 1);
    offset += 1 + f.byteLength;
  }
  return out;
}

interface RawPeer {
  readonly socket: Socket<undefined>;
  readonly received: Uint8Array[];
  closed: boolean;
}

async function rawConnect(node: Node): Promise<RawPeer> {
  const raw: { socket?: Socket<undefined>; received: Uint8Array[]; closed: boolean } = { received: [], closed: false };
  const socket = await Bun.connect({
    hostname: HOST,
    port: node.transport.port,
    socket: {
      binaryType: "uint8array",
      data: (_s, chunk) => void raw.received.push(chunk),
      close: () => void (raw.closed = true),
      error: () => void (raw.closed = true),
    },
  });
  cleanups.push(() => socket.terminate());
  raw.socket = socket;
  return raw as RawPeer;
}

/** Makes `peerId` a member of `node`, at an address nothing listens on (the test dials in by hand). */
async function admitRaw(node: Node, peerId: string): Promise<void> {
  node.transport.setPeers({ [peerId]: `${HOST}:${await freePort()}` });
}

/** The frame types the raw peer has received, assuming whole frames (they are small). */
function frameTypes(raw: RawPeer): number[] {
  const bytes = new Uint8Array(raw.received.reduce<number[]>((all, chunk) => [...all, ...chunk], []));
  const view = new DataView(bytes.buffer);
  const types: number[] = [];
  for (let offset = 0; offset + 9 <= bytes.byteLength; offset += 9 + view.getUint32(offset)) types.push(bytes[offset + 8] ?? -1);
  return types;
}

function randomBytes(seed: number, size: number): Uint8Array {
  const prng = createPrng(seed);
  const out = new Uint8Array(size);
  const words = new Uint32Array(out.buffer, 0, Math.floor(size / 4));
  for (let i = 0; i < words.length; i++) words[i] = prng.nextU32();
  return out;
}

describe("peer transport", () => {
  test("two nodes exchange messages both ways, in order", async () => {
    const a = startNode("a");
    const b = startNode("b");
    connect(a, b);
    for (let i = 0; i < 100; i++) {
      expect(a.transport.send("b", MessageType.raft, te.encode(`a→b ${i}`))).toBe(true);
      expect(b.transport.send("a", MessageType.raft, te.encode(`b→a ${i}`))).toBe(true);
    }
    await waitFor("100 messages arrived each way", () => a.received.length === 100 && b.received.length === 100);
    expect(b.received.map(text)).toEqual(Array.from({ length: 100 }, (_, i) => `a→b ${i}`));
    expect(a.received.map(text)).toEqual(Array.from({ length: 100 }, (_, i) => `b→a ${i}`));
    expect(b.received.every((r) => r.from === "a" && r.type === MessageType.raft)).toBe(true);
    expect(a.received.every((r) => r.from === "b")).toBe(true);
    const stats = a.transport.stats();
    expect(stats.peers.b?.connected).toBe(true);
    expect(stats.peers.b?.inboundConnected).toBe(true);
    expect(stats.peers.b?.framesOut).toBeGreaterThanOrEqual(101);
    expect(stats.peers.b?.framesIn).toBeGreaterThanOrEqual(101);
    expect(stats.totals.badFrames).toBe(0);
  });

  test("a 20 MB bulk payload arrives intact", async () => {
    const a = startNode("a");
    const b = startNode("b");
    connect(a, b);
    const big = randomBytes(1, 20 * 1024 * 1024 + 7);
    expect(a.transport.send("b", MessageType.snapshotChunk, big, { bulk: true })).toBe(true);
    await waitFor("the bulk message arrived", () => b.received.length === 1);
    const got = b.received[0]!;
    expect(got.type).toBe(MessageType.snapshotChunk);
    expect(got.payload.byteLength).toBe(big.byteLength);
    expect(Bun.hash(got.payload)).toBe(Bun.hash(big));
  });

  test("a 20 MB control payload arrives intact", async () => {
    const a = startNode("a");
    const b = startNode("b");
    connect(a, b);
    const big = randomBytes(2, 20 * 1024 * 1024);
    expect(a.transport.send("b", MessageType.raft, big)).toBe(true);
    expect(a.transport.send("b", MessageType.raft, te.encode("after"))).toBe(true);
    await waitFor("both messages arrived", () => b.received.length === 2);
    expect(Bun.hash(b.received[0]!.payload)).toBe(Bun.hash(big));
    expect(text(b.received[1])).toBe("after");
  });

  test("messages encoded with room for the frame header before them arrive intact, in order with the others; one without the room is copied", async () => {
    const a = startNode("a");
    const b = startNode("b");
    connect(a, b);
    const big = randomBytes(3, 700 * 1024);
    const withRoom = new Uint8Array(FRAME_HEADROOM_BYTES + big.byteLength);
    withRoom.set(big, FRAME_HEADROOM_BYTES);
    expect(a.transport.send("b", MessageType.raft, withRoom.subarray(FRAME_HEADROOM_BYTES), { headroom: true })).toBe(true);
    expect(a.transport.send("b", MessageType.raft, te.encode("plain"))).toBe(true);
    // Said to have room it does not have (a view at the start of its buffer): framed as a copy.
    expect(a.transport.send("b", MessageType.raft, te.encode("no room"), { headroom: true })).toBe(true);
    await waitFor("three messages arrived", () => b.received.length === 3);
    expect(Bun.hash(b.received[0]!.payload)).toBe(Bun.hash(big));
    expect(b.received.slice(1).map(text)).toEqual(["plain", "no room"]);
  });

  test("small messages are not held behind a bulk transfer", async () => {
    const a = startNode("a", "c1", { fragmentBytes: 64 * 1024 });
    const b = startNode("b");
    connect(a, b);
    await waitFor("connected", () => a.transport.stats().peers.b?.connected === true);
    const big = randomBytes(3, 16 * 1024 * 1024);
    expect(a.transport.send("b", MessageType.snapshotChunk, big, { bulk: true })).toBe(true);
    expect(a.transport.send("b", MessageType.raft, te.encode("heartbeat"))).toBe(true);
    await waitFor("both arrived", () => b.received.length === 2);
    expect(text(b.received[0])).toBe("heartbeat");
    expect(Bun.hash(b.received[1]!.payload)).toBe(Bun.hash(big));
  });

  test("a peer of another cluster is refused, logged and counted on both sides", async () => {
    const a = startNode("a", "c1");
    const b = startNode("b", "c2");
    connect(a, b);
    b.transport.send("a", MessageType.raft, te.encode("must not arrive"));
    // Each side refuses the other's dial and is refused its own: the counts may come from the
    // first two, so the dialer's warning is waited for too.
    await waitFor("both sides counted a refusal, and b was told its own dial was refused", () =>
      (a.transport.stats().peers.b?.handshakeRejects ?? 0) >= 1 && (b.transport.stats().peers.a?.handshakeRejects ?? 0) >= 1 &&
      b.warnings.some((w) => w.includes("refused the handshake")));
    expect(a.warnings.some((w) => w.includes("cluster") && w.includes("127.0.0.1:"))).toBe(true);
    // The dialer is not told the id of the cluster that refused it (a gossip key can be made of it).
    expect(b.warnings.filter((w) => w.includes("refused the handshake")).every((w) => !w.includes('"c1"'))).toBe(true);
    expect(a.received).toEqual([]);
    expect(b.received).toEqual([]);
    expect(a.transport.stats().peers.b?.inboundConnected).toBe(false);
    // Why the link fails stays readable (add-node's time-out names it).
    await waitFor("a's last failure with b is the refusal", () => (a.transport.stats().peers.b?.lastFailure ?? "").includes("refus"));
  });

  test("a node without a cluster id yet talks to any cluster, and adopting one reconnects", async () => {
    const a = startNode("a", "c1");
    const fresh = startNode("b", "");
    connect(a, fresh);
    a.transport.send("b", MessageType.raft, te.encode("welcome"));
    await waitFor("the new node got the message", () => fresh.received.length === 1);
    fresh.transport.setClusterId("c1");
    await waitFor("reconnected after adopting the id", () => fresh.transport.stats().peers.a?.connected === true);
    fresh.transport.send("a", MessageType.raft, te.encode("joined"));
    await waitFor("the old node got the answer", () => a.received.length >= 1);
    expect(text(a.received[0])).toBe("joined");
  });

  test("a peer dialing the wrong node id is refused", async () => {
    const a = startNode("a");
    const b = startNode("b");
    a.transport.setPeers({ b: b.address });
    b.transport.setPeers({ x: a.address });
    await waitFor("refusal counted", () => a.transport.stats().totals.handshakeRejects >= 1);
    expect(a.warnings.some((w) => w.includes('dialed node "x"'))).toBe(true);
  });

  test("garbage bytes close the connection and are counted; good peers still work", async () => {
    const a = startNode("a");
    const b = startNode("b");
    connect(a, b);
    const raw = await rawConnect(a);
    raw.socket.write(te.encode("GET / HTTP/1.1\r\nHost: example\r\n\r\n"));
    await waitFor("garbage connection closed", () => raw.closed);
    expect(a.transport.stats().totals.badFrames).toBe(1);
    expect(a.warnings.some((w) => w.includes("127.0.0.1:") && w.includes("payload bytes"))).toBe(true);
    b.transport.send("a", MessageType.raft, te.encode("still fine"));
    await waitFor("a good peer's message arrived", () => a.received.length === 1);
    expect(text(a.received[0])).toBe("still fine");
  });

  test("a frame with a bad CRC closes the connection and is counted", async () => {
    const a = startNode("a");
    const raw = await rawConnect(a);
    raw.socket.write(frame(0x01, helloPayload("c1", "r", "a"), { crcDelta: 1 }));
    await waitFor("closed", () => raw.closed);
    expect(a.transport.stats().totals.badFrames).toBe(1);
    expect(a.warnings.some((w) => w.includes("CRC"))).toBe(true);
  });

  test("an oversized frame is refused from its header, before and after the handshake", async () => {
    const a = startNode("a", "c1", { frameBytesMax: 64 * 1024 });
    const before = await rawConnect(a);
    before.socket.write(frame(0x01, new Uint8Array(8), { lengthBytes: 100_000 }));
    await waitFor("closed before the handshake", () => before.closed);
    expect(a.transport.stats().totals.badFrames).toBe(1);

    await admitRaw(a, "r");
    const after = await rawConnect(a);
    after.socket.write(frame(0x01, helloPayload("c1", "r", "a")));
    await waitFor("handshake answered", () => after.received.length > 0);
    // Only the header: the transport must refuse without waiting for the payload.
    after.socket.write(frame(MessageType.raft, new Uint8Array(0), { lengthBytes: 64 * 1024 + 1 }));
    await waitFor("closed after the handshake", () => after.closed);
    expect(a.transport.stats().totals.badFrames).toBe(2);
  });

  test("a handshake with a wrong magic or version is refused and counted", async () => {
    const a = startNode("a");
    const b = startNode("b");
    const magic = await rawConnect(a);
    magic.socket.write(frame(0x01, helloPayload("c1", "r", "a", 0x12345678)));
    const version = await rawConnect(b);
    version.socket.write(frame(0x01, helloPayload("c1", "r", "b", 0x53564350, 99)));
    await waitFor("both closed", () => magic.closed && version.closed);
    expect(a.transport.stats().totals.handshakeRejects).toBe(1);
    expect(b.transport.stats().totals.handshakeRejects).toBe(1);
    expect(a.warnings.some((w) => w.includes("magic"))).toBe(true);
    expect(b.warnings.some((w) => w.includes("version 99"))).toBe(true);
  });

  test("a message frame before the handshake closes the connection", async () => {
    const a = startNode("a");
    const raw = await rawConnect(a);
    raw.socket.write(frame(MessageType.raft, te.encode("sneaky")));
    await waitFor("closed", () => raw.closed);
    expect(a.transport.stats().totals.badFrames).toBe(1);
    expect(a.received).toEqual([]);
  });

  test("frames split at every byte boundary are decoded", async () => {
    const a = startNode("a");
    await admitRaw(a, "r");
    const raw = await rawConnect(a);
    const bytes = new Uint8Array([...frame(0x01, helloPayload("c1", "r", "a")), ...frame(MessageType.raft, te.encode("one byte at a time"))]);
    for (let i = 0; i < bytes.byteLength; i++) {
      raw.socket.write(bytes.subarray(i, i + 1));
      raw.socket.flush();
      await Bun.sleep(0);
    }
    await waitFor("message arrived", () => a.received.length === 1);
    expect(a.received[0]?.from).toBe("r");
    expect(text(a.received[0])).toBe("one byte at a time");
    expect(raw.closed).toBe(false);
  });

  test("a peer that goes down and comes back is reconnected", async () => {
    const reachable: string[] = [];
    const a = startNode("a", "c1", { onPeerReachable: (id) => reachable.push(id) });
    let b = startNode("b");
    const port = b.transport.port;
    connect(a, b);
    a.transport.send("b", MessageType.raft, te.encode("before"));
    await waitFor("first message arrived", () => b.received.length === 1);
    b.transport.close();
    await waitFor("a noticed the loss", () => a.transport.stats().peers.b?.connected === false);

    b = startNode("b", "c1", { listen: { hostname: HOST, port } });
    b.transport.setPeers({ a: a.address });
    // Messages sent while the peer is away may be lost; keep sending until one arrives.
    await waitFor("a message reached the restarted peer", () => {
      if (b.received.length > 0) return true;
      a.transport.send("b", MessageType.raft, te.encode("after"));
      return false;
    });
    expect(text(b.received[0])).toBe("after");
    expect(a.transport.stats().peers.b?.reconnects).toBeGreaterThanOrEqual(1);
    // Told once per connection that came up: the first, and each reconnect.
    expect(reachable.length).toBe(1 + (a.transport.stats().peers.b?.reconnects ?? 0));
    expect(new Set(reachable)).toEqual(new Set(["b"]));
    b.transport.send("a", MessageType.raft, te.encode("back"));
    await waitFor("the restarted peer's message arrived", () => a.received.length === 1);
  });

  test("a peer that comes back and connects to us is redialled at once, not after the backoff grown while it was down", async () => {
    // Only the peer's own connection can make a reconnect within the wait below.
    const { a, port } = await peerLostWithLongBackoff();
    const b = startNode("b", "c1", { listen: { hostname: HOST, port } });
    b.transport.setPeers({ a: a.address });
    await waitFor("a reconnected to the restarted peer", () => a.transport.stats().peers.b?.connected === true, 3_000);
    a.transport.send("b", MessageType.raft, te.encode("after"));
    await waitFor("a message reached the restarted peer", () => b.received.length === 1);
    expect(text(b.received[0])).toBe("after");
  });

  test("a peer that is not a member is heard and answered, but dialled only while something is queued for it", async () => {
    const a = startNode("a");
    let b = startNode("b");
    const port = b.transport.port;
    a.transport.setPeers({ b: b.address }, { onDemand: new Set(["b"]) });
    b.transport.setPeers({ a: a.address });
    // b's connection to a is up, and a has not dialled back (a barrier: b's message went through a).
    b.transport.send("a", MessageType.raft, te.encode("from b"));
    await waitFor("b's message arrived", () => a.received.length === 1);
    expect(a.transport.stats().peers.b?.inboundConnected).toBe(true);
    expect(a.transport.stats().peers.b?.connected).toBe(false);
    expect(a.transport.stats().peers.b?.dialFailures).toBe(0);
    // Something to send: a dials b, and the message arrives.
    a.transport.send("b", MessageType.raft, te.encode("answer"));
    await waitFor("a's answer arrived", () => b.received.length === 1);
    expect(text(b.received[0])).toBe("answer");
    // b goes away: with nothing queued, a does not dial it again (a removed member that stopped).
    b.transport.close();
    await waitFor("a noticed the loss", () => a.transport.stats().peers.b?.connected === false);
    b = startNode("b", "c1", { listen: { hostname: HOST, port } });
    b.transport.setPeers({ a: a.address });
    b.transport.send("a", MessageType.raft, te.encode("b again"));
    await waitFor("the restarted b's message arrived", () => a.received.length === 2);
    expect(a.transport.stats().peers.b?.connected).toBe(false);
    expect(a.transport.stats().peers.b?.dialFailures).toBe(0);
    // Made a member again: dialled at once.
    a.transport.setPeers({ b: b.address });
    await waitFor("a dialled b once it is a member", () => a.transport.stats().peers.b?.connected === true);
  });

  test("a member that becomes a non-member has its idle connection closed and is not redialled", async () => {
    const a = startNode("a");
    const b = startNode("b");
    connect(a, b);
    await waitFor("a connected to b", () => a.transport.stats().peers.b?.connected === true);
    a.transport.setPeers({ b: b.address }, { onDemand: new Set(["b"]) });
    expect(a.transport.stats().peers.b?.connected).toBe(false);
    b.transport.send("a", MessageType.raft, te.encode("still heard"));
    await waitFor("b is still heard", () => a.received.length === 1);
    expect(a.transport.stats().peers.b?.connected).toBe(false);
  });

  test("a member that is down when it becomes a non-member loses what was queued for it: back, it gets only what is sent after", async () => {
    // No failed dial clears the queue before b is back (a removed member restarted at once).
    const { a, port } = await peerLostWithLongBackoff();
    // Sent while b is down (the entry that removes it), then b is no longer a member.
    a.transport.send("b", MessageType.raft, te.encode("stale"));
    a.transport.setPeers({ b: `${HOST}:${port}` }, { onDemand: new Set(["b"]) });
    expect(a.transport.stats().peers.b?.queuedMessages).toBe(0);

    const b = startNode("b", "c1", { listen: { hostname: HOST, port } });
    b.transport.setPeers({ a: a.address });
    b.transport.send("a", MessageType.raft, te.encode("b again"));
    await waitFor("the restarted b's message arrived", () => a.received.length === 1);
    a.transport.send("b", MessageType.raft, te.encode("fresh"));
    await waitFor("a's answer arrived", () => b.received.length >= 1);
    expect(b.received.map(text)).toEqual(["fresh"]);
  });

  test("a full queue drops and counts instead of growing", async () => {
    const port = await freePort();
    const a = startNode("a", "c1", { queueMessagesMax: 5, queueBytesMax: 1_000_000, bulkQueueMessagesMax: 2 });
    a.transport.setPeers({ b: `${HOST}:${port}` });
    const results = Array.from({ length: 8 }, () => a.transport.send("b", MessageType.raft, te.encode("x")));
    expect(results).toEqual([true, true, true, true, true, false, false, false]);
    const bulk = Array.from({ length: 3 }, () => a.transport.send("b", MessageType.snapshotChunk, new Uint8Array(10), { bulk: true }));
    expect(bulk).toEqual([true, true, false]);
    const peer = a.transport.stats().peers.b!;
    expect(peer.queueDrops).toBe(4);
    expect(peer.queuedMessages).toBe(7);
    await waitFor("a dial failed", () => (a.transport.stats().peers.b?.dialFailures ?? 0) >= 1);
    expect(a.transport.stats().peers.b?.connected).toBe(false);
  });

  test("what is queued for a peer that cannot be reached is dropped at each failed dial, not delivered when it is back", async () => {
    const port = await freePort();
    const a = startNode("a", "c1", { reconnectDelayMsMin: 20, reconnectDelayMsMax: 40 });
    a.transport.setPeers({ b: `${HOST}:${port}` });
    for (let i = 0; i < 5; i++) a.transport.send("b", MessageType.raft, te.encode(`stale ${i}`));
    await waitFor("a dial failed", () => (a.transport.stats().peers.b?.dialFailures ?? 0) >= 1);
    await waitFor("the queue emptied", () => a.transport.stats().peers.b?.queuedMessages === 0);
    expect(a.transport.stats().peers.b?.queueDrops).toBeGreaterThanOrEqual(5);

    const b = startNode("b", "c1", { listen: { hostname: HOST, port } });
    b.transport.setPeers({ a: a.address });
    await waitFor("a connected to b", () => a.transport.stats().peers.b?.connected === true);
    a.transport.send("b", MessageType.raft, te.encode("fresh"));
    await waitFor("the fresh message arrived", () => b.received.length >= 1);
    expect(b.received.map(text)).toEqual(["fresh"]);
  });

  test("the byte bound of a queue drops too", async () => {
    const port = await freePort();
    const a = startNode("a", "c1", { queueBytesMax: 1_000 });
    a.transport.setPeers({ b: `${HOST}:${port}` });
    const results = Array.from({ length: 4 }, () => a.transport.send("b", MessageType.raft, new Uint8Array(400)));
    expect(results).toEqual([true, true, false, false]);
    expect(a.transport.stats().peers.b?.queuedBytes).toBeLessThanOrEqual(1_000);
  });

  test("sending to an unknown peer or more than frameBytesMax is refused and counted", () => {
    const a = startNode("a", "c1", { frameBytesMax: 4096 });
    a.transport.setPeers({ b: `${HOST}:1` });
    expect(a.transport.send("nobody", MessageType.raft, te.encode("x"))).toBe(false);
    expect(a.transport.send("b", MessageType.raft, new Uint8Array(4097))).toBe(false);
    expect(a.transport.stats().totals.queueDrops).toBe(2);
  });

  test("a malformed peer address throws and changes nothing", () => {
    const a = startNode("a");
    a.transport.setPeers({ b: `${HOST}:1` });
    expect(() => a.transport.setPeers({ b: `${HOST}:2`, c: "no-port" })).toThrow(/host:port/);
    expect(a.transport.stats().peers.b?.address).toBe(`${HOST}:1`);
    expect(a.transport.stats().peers.c).toBeUndefined();
  });

  test("a message handler that throws does not break the connection", async () => {
    let calls = 0;
    const a = startNode("a", "c1", {
      onMessage: () => {
        calls++;
        if (calls === 1) throw new Error("handler bug");
      },
    });
    const b = startNode("b");
    connect(a, b);
    b.transport.send("a", MessageType.raft, te.encode("1"));
    b.transport.send("a", MessageType.raft, te.encode("2"));
    await waitFor("both delivered", () => calls === 2);
    expect(a.warnings.some((w) => w.includes("handler bug"))).toBe(true);
    expect(b.transport.stats().peers.a?.reconnects).toBe(0);
  });

  test("a peer that stops reading is dropped after the write stall timeout and redialled", async () => {
    let accepted = 0;
    const server = Bun.listen({
      hostname: HOST,
      port: 0,
      socket: {
        binaryType: "uint8array",
        open: () => void accepted++,
        data: (socket) => {
          // Answer the handshake (assumed to come in one chunk), then never read again.
          socket.write(frame(0x01, helloPayload("c1", "b", "a")));
          socket.pause();
        },
      },
    });
    cleanups.push(() => server.stop(true));
    const a = startNode("a", "c1", { writeStallTimeoutMs: 300 });
    a.transport.setPeers({ b: `${HOST}:${server.port}` });
    await waitFor("connected", () => a.transport.stats().peers.b?.connected === true);
    const chunk = new Uint8Array(1024 * 1024);
    for (let i = 0; i < 48; i++) a.transport.send("b", MessageType.raft, chunk);
    await waitFor("the stalled connection was dropped", () => a.warnings.some((w) => w.includes("read nothing for 300 ms")));
    await waitFor("redialled", () => accepted >= 2);
  });

  test("removing a peer disconnects it and drops its queue", async () => {
    const a = startNode("a");
    const b = startNode("b");
    connect(a, b);
    await waitFor("connected", () => b.transport.stats().peers.a?.connected === true);
    a.transport.setPeers({});
    expect(a.transport.stats().peers.b).toBeUndefined();
    expect(a.transport.send("b", MessageType.raft, te.encode("x"))).toBe(false);
  });
});

describe("peer transport: only members are heard", () => {
  const REJECT = 0x02;
  const HELLO = 0x01;

  for (const [what, clusterId] of [["without a cluster id", ""], ["with this node's cluster id", "c1"]] as const) {
    test(`a handshake from a node outside the members ${what} is refused before any message is read`, async () => {
      const a = startNode("a");
      const b = startNode("b");
      connect(a, b);
      const stranger = await rawConnect(a);
      // A forged heartbeat right behind the handshake, in the same write.
      stranger.socket.write(new Uint8Array([...frame(HELLO, helloPayload(clusterId, "stranger", "a")), ...frame(MessageType.raft, te.encode("term 99 heartbeat"))]));
      await waitFor("the stranger was closed", () => stranger.closed);
      expect(frameTypes(stranger)).toEqual([REJECT]);
      expect(a.received).toEqual([]);
      expect(a.transport.stats().totals.nonMemberRejects).toBe(1);
      expect(a.warnings.some((w) => w.includes('"stranger" is not a member') || w.includes('"stranger" sent no cluster id'))).toBe(true);
      b.transport.send("a", MessageType.raft, te.encode("from a member"));
      await waitFor("a member is still heard", () => a.received.length === 1);
      expect(a.received[0]?.from).toBe("b");
    });
  }

  test("a member's handshake without the cluster id is refused once this node has one", async () => {
    const a = startNode("a", "c1");
    await admitRaw(a, "r");
    const raw = await rawConnect(a);
    raw.socket.write(new Uint8Array([...frame(HELLO, helloPayload("", "r", "a")), ...frame(MessageType.raft, te.encode("vote for me"))]));
    await waitFor("closed", () => raw.closed);
    expect(frameTypes(raw)).toEqual([REJECT]);
    expect(a.received).toEqual([]);
    expect(a.warnings.some((w) => w.includes("sent no cluster id"))).toBe(true);
  });

  test("before its members are known a node refuses every handshake", async () => {
    const a = startNode("a", "c1");
    const raw = await rawConnect(a);
    raw.socket.write(new Uint8Array([...frame(HELLO, helloPayload("c1", "r", "a")), ...frame(MessageType.raft, te.encode("early"))]));
    await waitFor("closed", () => raw.closed);
    expect(frameTypes(raw)).toEqual([REJECT]);
    expect(a.received).toEqual([]);
  });

  test("a node without a cluster id accepts a member, learns its id, and its own messages are then accepted", async () => {
    const a = startNode("a", "c1");
    const fresh = startNode("b", "");
    connect(a, fresh);
    a.transport.send("b", MessageType.raft, te.encode("snapshot chunk"));
    await waitFor("the new node got the message", () => fresh.received.length === 1);
    // The answer travels on the new node's own connection, which must now carry "c1".
    fresh.transport.send("a", MessageType.raft, te.encode("ack"));
    await waitFor("the member got the answer", () => a.received.length === 1);
    expect(text(a.received[0])).toBe("ack");
    fresh.transport.setClusterId("c1");
    fresh.transport.send("a", MessageType.raft, te.encode("joined"));
    await waitFor("still connected after adopting the id", () => a.received.length === 2);
    expect(text(a.received[1])).toBe("joined");
  });

  test("a peer removed from the members is disconnected, and its redial is refused", async () => {
    const a = startNode("a");
    await admitRaw(a, "r");
    const raw = await rawConnect(a);
    raw.socket.write(frame(HELLO, helloPayload("c1", "r", "a")));
    await waitFor("handshake answered", () => frameTypes(raw).includes(HELLO));
    a.transport.setPeers({});
    await waitFor("disconnected", () => raw.closed);
    const again = await rawConnect(a);
    again.socket.write(new Uint8Array([...frame(HELLO, helloPayload("c1", "r", "a")), ...frame(MessageType.raft, te.encode("still here"))]));
    await waitFor("refused", () => again.closed);
    expect(frameTypes(again)).toEqual([REJECT]);
    expect(a.received).toEqual([]);
  });

  test("connections that never handshake cannot keep a member out", async () => {
    const a = startNode("a", "c1", { inboundConnectionsMax: 32, handshakeTimeoutMs: 600_000 });
    const b = startNode("b");
    const idle: RawPeer[] = [];
    for (let i = 0; i < 32; i++) idle.push(await rawConnect(a));
    connect(a, b);
    b.transport.send("a", MessageType.raft, te.encode("let me in"));
    await waitFor("the member's message arrived", () => a.received.length === 1, 5_000);
    await waitFor("an idle connection made room", () => idle.some((r) => r.closed));
    expect(a.transport.stats().totals.handshakeTimeouts).toBeGreaterThanOrEqual(1);
  });

  test("a connection that sends no handshake is closed after the default handshake timeout of a few seconds", async () => {
    const a = startNode("a", "c1", { handshakeTimeoutMs: undefined });
    const idle = await rawConnect(a);
    await waitFor("closed for want of a handshake", () => idle.closed, 4_000);
    expect(a.transport.stats().totals.handshakeTimeouts).toBe(1);
  });

  test("refusals from one host are logged once per window, the next line counting the ones left out", async () => {
    const a = startNode("a", "c1", { refusalLogWindowMs: 300 });
    await admitRaw(a, "b");
    const refusals = () => a.warnings.filter((w) => w.includes("refused peer connection"));
    for (let i = 0; i < 20; i++) {
      const raw = await rawConnect(a);
      raw.socket.write(frame(HELLO, helloPayload("c1", "stranger", "a")));
      await waitFor("refused", () => raw.closed);
    }
    expect(a.transport.stats().totals.nonMemberRejects).toBe(20);
    expect(refusals().length).toBeLessThan(20);
    const loggedInFirstBurst = refusals().length;
    await Bun.sleep(350);
    const raw = await rawConnect(a);
    raw.socket.write(frame(HELLO, helloPayload("c1", "stranger", "a")));
    await waitFor("refused", () => raw.closed);
    expect(refusals().length).toBe(loggedInFirstBurst + 1);
    expect(refusals().at(-1)).toMatch(/and \d+ more from 127\.0\.0\.1/);
  });
});

describe("a handshake from another cluster", () => {
  test("is refused naming the peer, both clusters, how that comes about and where to look", () => {
    const hello = { version: 1, clusterId: "c-restored", senderId: "n2", targetId: "n1" };
    const why = refuseAsAcceptor(hello, "n1", "c-live", { has: () => true });
    expect(why).toContain('peer "n2" belongs to cluster "c-restored", and this node to another, "c-live"');
    expect(why).toContain("restored from another cluster's backup");
    expect(why).toContain("svc admin cluster-info");
    expect(refuseAsDialer(hello, "n1", "c-live", "n2")).toContain('peer "n2" belongs to cluster "c-restored"');
  });
});
