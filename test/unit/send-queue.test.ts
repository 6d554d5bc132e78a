import { describe, expect, test } from "bun:test";
import { SendQueue } from "../../src/transport/_send-queue.ts";
import { FRAME_HEADER_BYTES, FrameDecoder } from "../../src/transport/_frame.ts";

describe("send queue", () => {
  test("a message taken from the queue is no longer held by it (a leader sending an image held every chunk)", async () => {
    const queue = new SendQueue({ messagesMax: 64, bytesMax: 1 << 30 }, { messagesMax: 4, bytesMax: 1 << 30 }, 64 * 1024);
    const refs: WeakRef<Uint8Array>[] = [];
    const sendAll = (): void => {
      for (let round = 0; round < 8; round++) {
        for (let i = 0; i < 4; i++) {
          const payload = new Uint8Array(256 * 1024);
          refs.push(new WeakRef(payload));
          expect(queue.pushBulk(1, payload)).toBe(true);
        }
        while (queue.takeBatch(1 << 20) !== null) {
          // written to the socket
        }
      }
    };
    sendAll();
    expect(queue.messages).toBe(0);
    // A weakly held object stays alive until the current job ends: collect after it.
    await Bun.sleep(1);
    Bun.gc(true);
    expect(refs.filter((r) => r.deref() !== undefined).length).toBe(0);
  });

  test("a message sent with room for its header before it is framed in place, not copied, and decodes as any other", () => {
    const queue = new SendQueue({ messagesMax: 64, bytesMax: 1 << 30 }, { messagesMax: 4, bytesMax: 1 << 30 }, 64 * 1024);
    const buffer = new Uint8Array(FRAME_HEADER_BYTES + 600 * 1024);
    for (let i = FRAME_HEADER_BYTES; i < buffer.length; i++) buffer[i] = i % 251;
    const payload = buffer.subarray(FRAME_HEADER_BYTES);
    expect(queue.pushControl(0x10, payload, true)).toBe(true);
    expect(queue.pushControl(0x11, new TextEncoder().encode("after"))).toBe(true);
    const first = queue.takeBatch(1);
    // The frame is the payload's own buffer, its header written into the room before it.
    expect(first?.bytes.buffer).toBe(buffer.buffer);
    expect(first?.bytes.byteLength).toBe(buffer.byteLength);
    const decoded: { type: number; payload: Uint8Array }[] = [];
    const decoder = new FrameDecoder(1 << 30);
    for (let batch = first; batch !== null; batch = queue.takeBatch(1)) {
      expect(decoder.push(batch.bytes, (type, p) => decoded.push({ type, payload: p }) > 0)).toBeNull();
    }
    expect(decoded.map((d) => d.type)).toEqual([0x10, 0x11]);
    expect(Bun.hash(decoded[0]!.payload)).toBe(Bun.hash(payload));
    expect(new TextDecoder().decode(decoded[1]!.payload)).toBe("after");
  });
});
