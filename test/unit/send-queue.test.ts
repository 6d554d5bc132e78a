import { describe, expect, test } from "bun:test";
import { SendQueue } from "../../src/transport/_send-queue.ts";

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
});
