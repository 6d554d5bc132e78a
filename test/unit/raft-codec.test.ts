import { describe, expect, test } from "bun:test";
import { decodeMessage, encodeMessage } from "../../src/raft/index.ts";
import type { Message } from "../../src/raft/index.ts";
import { createPrng } from "../../src/util/index.ts";

const env = { from: "node1", to: "nöde-2", term: 7 };
const entry = (index: number, kind: "normal" | "config" | "noop", data: number[]) => ({
  index,
  term: 7,
  kind,
  timestampMs: 1_700_000_000_123,
  data: new Uint8Array(data),
});

const samples: Message[] = [
  { ...env, type: "pre_vote", lastIndex: 10, lastTerm: 6 },
  { ...env, type: "vote", lastIndex: 2 ** 53 - 1, lastTerm: 6, transfer: true },
  { ...env, type: "pre_vote_response", reject: true },
  { ...env, type: "vote_response", reject: false },
  { ...env, type: "append", prevIndex: 4, prevTerm: 6, commit: 3, entries: [] },
  { ...env, type: "append", prevIndex: 4, prevTerm: 6, commit: 3, entries: [entry(5, "normal", [1, 2, 3]), entry(6, "noop", []), entry(7, "config", [123])] },
  { ...env, type: "append_response", reject: true, index: 9, hintIndex: 5, hintTerm: 4 },
  { ...env, type: "heartbeat", commit: 100, readSeq: 42 },
  { ...env, type: "heartbeat_response", readSeq: 42 },
  { ...env, type: "snapshot", snapshot: { index: 1000, term: 5, membership: { voters: ["a", "b", "c"], learners: ["d"] } } },
  { ...env, type: "timeout_now" },
  { ...env, type: "read_index", requestId: 77 },
  { ...env, type: "read_index_response", requestId: 77, index: 1234 },
  { ...env, type: "not_member", configIndex: 4321 },
];

describe("raft message codec", () => {
  test("encoded with headroom, a message leaves that many bytes free before it and is the same bytes", () => {
    for (const m of samples) {
      const plain = encodeMessage(m);
      const roomy = encodeMessage(m, 9);
      expect(roomy.byteOffset).toBe(9);
      expect([...roomy]).toEqual([...plain]);
      expect(decodeMessage(roomy)).toEqual({ ok: true, message: m });
    }
  });

  test("every message type survives an encode/decode round trip", () => {
    for (const m of samples) {
      const r = decodeMessage(encodeMessage(m));
      expect(r.ok).toBe(true);
      if (r.ok) expect(r.message).toEqual(m);
    }
  });

  test("a heartbeat response carries diskFull only when set: one without it is byte for byte what a node without the flag sends and reads", () => {
    const plain = { ...env, type: "heartbeat_response", readSeq: 42 } as const;
    const full = { ...plain, diskFull: true } as const;
    const plainBytes = encodeMessage(plain);
    expect(encodeMessage({ ...plain, diskFull: false })).toEqual(plainBytes);
    const fullBytes = encodeMessage(full);
    expect(fullBytes.length).toBe(plainBytes.length + 1);
    expect(fullBytes.subarray(0, plainBytes.length)).toEqual(plainBytes);
    const r = decodeMessage(fullBytes);
    expect(r.ok && r.message).toEqual(full);
    for (const byte of [0, 7]) {
      const bad = fullBytes.slice();
      bad[bad.length - 1] = byte;
      expect(decodeMessage(bad).ok).toBe(false);
    }
  });

  test("entry data are copies, unless the buffer is handed over (owned): then views into it", () => {
    const m = samples[5]!;
    const copied = decodeMessage(encodeMessage(m));
    const ownedBuf = encodeMessage(m);
    const owned = decodeMessage(ownedBuf, { owned: true });
    expect(owned.ok && owned.message).toEqual(m);
    if (!copied.ok || !owned.ok || copied.message.type !== "append" || owned.message.type !== "append") throw new Error("append expected");
    expect(copied.message.entries[0]!.data.buffer).not.toBe(ownedBuf.buffer);
    expect(owned.message.entries[0]!.data.buffer).toBe(ownedBuf.buffer);
  });

  test("decoding a buffer that is a view into a larger one reads only the view", () => {
    const enc = encodeMessage(samples[5]!);
    const big = new Uint8Array(enc.length + 20);
    big.set(enc, 10);
    const r = decodeMessage(big.subarray(10, 10 + enc.length));
    expect(r.ok && r.message).toEqual(samples[5]!);
  });

  test("every truncation of a valid message is reported as TRUNCATED", () => {
    for (const m of samples) {
      const enc = encodeMessage(m);
      for (let n = 0; n < enc.length; n++) {
        const r = decodeMessage(enc.subarray(0, n));
        expect(r.ok).toBe(false);
        if (!r.ok) expect(r.error.code).toBe("TRUNCATED");
      }
    }
  });

  test("trailing bytes after a message are refused", () => {
    const enc = encodeMessage(samples[0]!);
    const r = decodeMessage(new Uint8Array([...enc, 0]));
    expect(!r.ok && r.error.code).toBe("TRAILING_BYTES");
  });

  test("an unknown version or type code is refused", () => {
    const enc = encodeMessage(samples[0]!);
    const badVersion = enc.slice();
    badVersion[0] = 99;
    expect(decodeMessage(badVersion)).toMatchObject({ ok: false, error: { code: "BAD_VERSION" } });
    const badType = enc.slice();
    badType[1] = 200;
    expect(decodeMessage(badType)).toMatchObject({ ok: false, error: { code: "UNKNOWN_TYPE" } });
  });

  test("a not_member refusal is a type code nodes before it do not know: they refuse it as UNKNOWN_TYPE, nothing else", () => {
    const enc = encodeMessage({ ...env, type: "not_member", configIndex: 9 });
    expect(enc[1]).toBe(13);
    // What a node that knows codes 1..12 only does with it: the type byte is all it reads past the version.
    const knownBefore = new Set(Array.from({ length: 12 }, (_, i) => i + 1));
    expect(knownBefore.has(enc[1]!)).toBe(false);
    const unknownToUs = enc.slice();
    unknownToUs[1] = 14;
    expect(decodeMessage(unknownToUs)).toMatchObject({ ok: false, error: { code: "UNKNOWN_TYPE" } });
  });

  test("an entry count larger than the remaining bytes could hold is refused before allocating", () => {
    const enc = encodeMessage({ ...env, type: "append", prevIndex: 0, prevTerm: 0, commit: 0, entries: [] });
    const view = new DataView(enc.buffer, enc.byteOffset);
    view.setUint32(enc.length - 4, 0xffff_ffff);
    expect(decodeMessage(enc)).toMatchObject({ ok: false, error: { code: "TRUNCATED" } });
  });

  test("a 64-bit number beyond 2^53 is refused", () => {
    const enc = encodeMessage(samples[0]!);
    const termOffset = 2 + 2 + 5 + 2 + new TextEncoder().encode("nöde-2").length;
    enc[termOffset] = 0xff;
    expect(decodeMessage(enc)).toMatchObject({ ok: false, error: { code: "BAD_VALUE" } });
  });

  test("a boolean byte other than 0 or 1 is refused", () => {
    const enc = encodeMessage(samples[2]!);
    enc[enc.length - 1] = 2;
    expect(decodeMessage(enc)).toMatchObject({ ok: false, error: { code: "BAD_VALUE" } });
  });

  test("random garbage never throws and never decodes into an unbounded allocation", () => {
    const prng = createPrng(12345);
    for (let i = 0; i < 20_000; i++) {
      const len = prng.nextInt(200);
      const buf = new Uint8Array(len);
      for (let j = 0; j < len; j++) buf[j] = prng.nextInt(256);
      // Half of the cases start with a valid version and type to get past the header.
      if (len >= 2 && i % 2 === 0) {
        buf[0] = 1;
        buf[1] = 1 + prng.nextInt(13);
      }
      expect(() => decodeMessage(buf)).not.toThrow();
    }
  });

  test("valid messages with random bytes flipped never throw", () => {
    const prng = createPrng(777);
    for (let i = 0; i < 20_000; i++) {
      const enc = encodeMessage(samples[prng.nextInt(samples.length)]!);
      const flips = 1 + prng.nextInt(4);
      for (let f = 0; f < flips; f++) enc[prng.nextInt(enc.length)] = prng.nextInt(256);
      const r = decodeMessage(enc);
      if (r.ok) expect(encodeMessage(r.message)).toEqual(enc);
    }
  });
});
