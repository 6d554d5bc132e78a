// Fuzz: the peer protocol's decoders (FrameDecoder, decodeHello, Reassembler) and a real
// transport fed bytes over a socket. The decoders never throw: garbage is refused with a code
// or a reason, a frame is delivered only as it was sent, and an accepted handshake is exactly
// the bytes that were sent. A transport given bytes that are not a valid peer stream closes the
// connection and counts it, and its good peer still gets through afterwards.

import { afterAll, expect, test } from "bun:test";
import { FRAME_HEADER_BYTES, FrameDecoder, FrameType, encodeFrame } from "../../src/transport/_frame.ts";
import { FRAGMENT_HEADER_BYTES, Reassembler, fragmentHeader } from "../../src/transport/_fragment.ts";
import { HELLO_FRAME_BYTES_MAX, decodeHello, encodeHello, refuseAsAcceptor, refuseAsDialer, type Hello } from "../../src/transport/_hello.ts";
import { createTransport, MessageType, type Transport } from "../../src/transport/index.ts";
import { silentLogger } from "../../src/util/logger.ts";
import { concat, fuzzPlan, runCases, type Gen } from "./_gen.ts";

const plan = fuzzPlan("peer-frames", 3_000);
const socketPlan = fuzzPlan("peer-frames over a socket", 30);

const te = new TextEncoder();
const hex = (b: Uint8Array): string => Buffer.from(b).toString("hex");

const hellos = [
  encodeHello({ clusterId: "c1", senderId: "r", targetId: "a" }),
  encodeHello({ clusterId: "", senderId: "node-2", targetId: "node-1" }),
  encodeHello({ clusterId: "0f3c-uuid-like-cluster-id", senderId: "ünï", targetId: "x".repeat(255) }),
];
const frames: { type: number; payload: Uint8Array }[] = [
  { type: FrameType.hello, payload: hellos[0] ?? new Uint8Array() },
  { type: MessageType.raft, payload: te.encode("a raft message") },
  { type: MessageType.raft, payload: new Uint8Array() },
  { type: 0xff, payload: new Uint8Array(3000).fill(7) },
  { type: FrameType.fragment, payload: concat(fragmentHeader(MessageType.snapshotChunk, 10, 0), te.encode("0123456789")) },
  { type: FrameType.reject, payload: te.encode("no") },
];
const stream = concat(...frames.map((f) => encodeFrame(f.type, f.payload)));
const payloadBytesMax = 4096;

/** Feeds `bytes` in random pieces; returns the frames decoded and the first error. */
function decodeInPieces(gen: Gen, bytes: Uint8Array): { got: { type: number; payload: Uint8Array }[]; error: string | null } {
  const decoder = new FrameDecoder(payloadBytesMax);
  const got: { type: number; payload: Uint8Array }[] = [];
  let error: string | null = null;
  let at = 0;
  while (at < bytes.length) {
    const piece = bytes.subarray(at, at + 1 + gen.size(bytes.length));
    at += piece.length;
    const e = decoder.push(piece, (type, payload) => {
      if (payload.length > payloadBytesMax) throw new Error(`a ${payload.length}-byte payload passed the ${payloadBytesMax}-byte bound`);
      got.push({ type, payload: payload.slice() });
      return true;
    });
    if (e !== null) {
      if (e.code !== "FRAME_TOO_LARGE" && e.code !== "FRAME_BAD_CRC") throw new Error(`an unknown frame error ${JSON.stringify(e)}`);
      if (error === null) error = e.code;
      // Broken for good: the stream has lost its framing.
      const again = decoder.push(new Uint8Array(FRAME_HEADER_BYTES), () => {
        throw new Error("a frame after the decoder failed");
      });
      if (again?.code !== e.code) throw new Error(`after ${e.code} the decoder said ${JSON.stringify(again)}`);
    }
  }
  return { got, error };
}

function checkHello(bytes: Uint8Array): "accepted" | "refused" {
  const hello = decodeHello(bytes);
  if ("error" in hello) {
    if (typeof hello.error !== "string" || hello.error === "") throw new Error("a handshake refused without a reason");
    return "refused";
  }
  const again = encodeHello(hello);
  if (hex(again) !== hex(bytes)) throw new Error(`handshake ${JSON.stringify(hello)} encodes to ${hex(again)}, not the bytes received`);
  const members = { has: (id: string) => id === "r" || id === "node-2" };
  for (const local of ["", "c1"]) {
    refuseAsAcceptor(hello, "a", local, members);
    refuseAsAcceptor(hello, "a", local, "unknown");
    refuseAsDialer(hello, "a", local, "r");
  }
  return "accepted";
}

/** Fragments of one bulk message, as the sender cuts it. */
function fragmentsOf(type: number, message: Uint8Array, pieceBytes: number): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (let at = 0; at === 0 || at < message.length; at += pieceBytes) {
    out.push(concat(fragmentHeader(type, message.length, at), message.subarray(at, at + pieceBytes)));
  }
  return out;
}

test("frame, handshake and fragment decoders refuse garbage and deliver only what was sent", async () => {
  const counts = { frames: 0, framesRefused: 0, hellosAccepted: 0, fragments: 0 };
  const cases = await runCases(plan, (gen) => {
    const pick = gen.int(3);
    if (pick === 0) {
      const bytes = gen.chance(0.1) ? stream : gen.chance(0.1) ? gen.randomBytes(5000) : gen.mutateBytes(stream);
      gen.note(bytes);
      const { got, error } = decodeInPieces(gen, bytes);
      counts.frames += got.length;
      if (error !== null) counts.framesRefused++;
      for (const f of got) {
        if (!frames.some((o) => o.type === f.type && hex(o.payload) === hex(f.payload))) {
          throw new Error(`delivered a frame never sent: type ${f.type}, ${f.payload.length} bytes`);
        }
      }
      if (bytes === stream && (error !== null || got.length !== frames.length)) throw new Error("a valid stream was not decoded whole");
    } else if (pick === 1) {
      const bytes = gen.chance(0.1) ? gen.randomBytes(300) : gen.mutateBytes(gen.pick(hellos), hellos);
      gen.note(bytes);
      if (checkHello(bytes) === "accepted") counts.hellosAccepted++;
    } else {
      const message = gen.randomBytes(3000);
      const pieces = fragmentsOf(MessageType.snapshotChunk, message, 1 + gen.size(1500));
      const intact = gen.chance(0.2);
      const fed = intact ? pieces : pieces.map((p) => (gen.chance(0.3) ? gen.mutateBytes(p, pieces) : p));
      if (!intact && gen.chance(0.1)) fed.splice(gen.int(fed.length + 1), 0, gen.randomBytes(40));
      gen.note(concat(...fed));
      const reassembler = new Reassembler(4096);
      let delivered: Uint8Array | null = null;
      for (const piece of fed) {
        const r = reassembler.push(piece);
        if (r.kind === "error") {
          if (r.reason === "") throw new Error("a fragment refused without a reason");
          break;
        }
        if (r.kind === "message") {
          if (r.payload.length > 4096) throw new Error(`reassembled ${r.payload.length} bytes past the 4096-byte bound`);
          delivered = r.payload;
          counts.fragments++;
        }
      }
      if (intact && (delivered === null || hex(delivered) !== hex(message))) throw new Error("a message cut as the sender cuts it did not come back whole");
    }
  });
  console.log(`fuzz peer-frames: ${cases} cases ${JSON.stringify(counts)}`);
  expect(cases).toBe(plan.seeds.length);
}, 600_000);

test("a handshake holding ids that start with U+FEFF is read as sent", () => {
  // Found alongside the Raft codec's seed 216: the decoder dropped a leading U+FEFF.
  const hello: Omit<Hello, "version"> = { clusterId: "\ufeffc1", senderId: "\ufeffr", targetId: "a" };
  expect(decodeHello(encodeHello(hello))).toEqual({ version: 1, ...hello });
  expect(checkHello(encodeHello(hello))).toBe("accepted");
});

// ─── a real transport ─────────────────────────────────────────────────────────────────────

const HOST = "127.0.0.1";
const handshakeTimeoutMs = 300;
const frameBytesMax = 64 * 1024;
const transports: Transport[] = [];
afterAll(() => {
  for (const t of transports.splice(0)) t.close();
});

function startTransport(id: string, received: string[]): Transport {
  const t = createTransport({
    nodeId: id, clusterId: "c1", listen: { hostname: HOST, port: 0 }, logger: silentLogger,
    onMessage: (from, _type, payload) => void received.push(`${from}:${new TextDecoder().decode(payload)}`),
    handshakeTimeoutMs, frameBytesMax, reconnectDelayMsMin: 10, reconnectDelayMsMax: 50,
  });
  transports.push(t);
  t.start();
  return t;
}

async function waitFor(what: string, condition: () => boolean, deadlineMs = 10_000): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await Bun.sleep(2);
  }
}

/**
 * What the accepting side must do with these bytes from a dialer, by the protocol's own rules:
 * close it ("close": a bad frame or a refused handshake), close it once the handshake times out
 * ("timeout"), or keep it (a valid handshake as member r, then nothing wrong).
 */
function expectedOutcome(bytes: Uint8Array): "close" | "timeout" | "keep" {
  const decoder = new FrameDecoder(HELLO_FRAME_BYTES_MAX);
  const reassembler = new Reassembler(frameBytesMax);
  let identified = false;
  let bad = false;
  const error = decoder.push(bytes, (type, payload) => {
    if (!identified) {
      const hello = type === FrameType.hello ? decodeHello(payload) : { error: "not a handshake" };
      if ("error" in hello || refuseAsAcceptor(hello, "a", "c1", { has: (id) => id === "b" || id === "r" }) !== null || hello.senderId !== "r") {
        bad = true;
        return false;
      }
      identified = true;
      decoder.payloadBytesMax = frameBytesMax;
      return true;
    }
    if (type === FrameType.fragment) {
      if (reassembler.push(payload).kind === "error") bad = true;
    } else if (type < 0x10) {
      bad = true;
    }
    return !bad;
  });
  if (error !== null || bad) return "close";
  return identified ? "keep" : "timeout";
}

test("a transport fed bytes that are not a peer stream closes the connection and counts it; its good peer still gets through", async () => {
  const receivedA: string[] = [];
  const receivedB: string[] = [];
  const a = startTransport("a", receivedA);
  const b = startTransport("b", receivedB);
  const deadPort = (() => {
    const l = Bun.listen({ hostname: HOST, port: 0, socket: { data() {} } });
    const port = l.port;
    l.stop(true);
    return port;
  })();
  a.setPeers({ b: `${HOST}:${b.port}`, r: `${HOST}:${deadPort}` });
  b.setPeers({ a: `${HOST}:${a.port}` });
  const refusals = (): number => {
    const t = a.stats().totals;
    return t.badFrames + t.handshakeRejects + t.handshakeTimeouts + t.nonMemberRejects;
  };
  const memberHello = encodeFrame(FrameType.hello, encodeHello({ clusterId: "c1", senderId: "r", targetId: "a" }));
  const outcomes = { close: 0, timeout: 0, keep: 0 };
  const cases = await runCases(socketPlan, async (gen) => {
    const afterHandshake = gen.chance(0.4);
    const garbage = gen.chance(0.2) ? gen.randomBytes(2000) : gen.mutateBytes(afterHandshake ? stream.subarray(memberHello.length) : stream, [stream]);
    const bytes = afterHandshake ? concat(memberHello, garbage) : garbage;
    gen.note(bytes);
    const expected = expectedOutcome(bytes);
    outcomes[expected]++;
    const before = refusals();
    let closed = false;
    const socket = await Bun.connect({
      hostname: HOST, port: a.port,
      socket: { data() {}, close: () => void (closed = true), error: () => void (closed = true) },
    });
    try {
      socket.write(bytes);
      if (expected === "keep") return;
      await waitFor(`the transport closed a connection that sent ${expected === "close" ? "a bad stream" : "no whole handshake"}`, () => closed, 5_000);
      await waitFor("the refusal was counted", () => refusals() > before, 5_000);
    } finally {
      socket.terminate();
    }
  }, { caseTimeMsMax: 6_000 });
  // The good peer: a message each way after all that.
  await waitFor("a and b exchanged a message", () => {
    a.send("b", MessageType.raft, te.encode("ping"));
    b.send("a", MessageType.raft, te.encode("pong"));
    return receivedB.includes("a:ping") && receivedA.includes("b:pong");
  }, 15_000);
  console.log(`fuzz peer-frames over a socket: ${cases} connections ${JSON.stringify(outcomes)}, counters ${JSON.stringify(a.stats().totals)}`);
  expect(cases).toBe(socketPlan.seeds.length);
}, 600_000);
