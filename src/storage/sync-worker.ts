// Runs in a Worker: the WAL's fdatasync calls, one at a time, on a thread of their own.
// Through Bun's shared I/O pool each call cost about twice the CPU of the fdatasync itself
// (some 100-200 µs more, measured), and there a WAL sync can wait behind other file work (a
// snapshot's hashing, the next segment's zeros).
//
// Requests arrive through shared memory, not messages: the thread sleeps in Atomics.wait on
// the request slot and the writer wakes it with Atomics.notify, which costs the writing
// thread a few microseconds where a postMessage cost tens (see syncer.ts). Replies go back
// as messages, since only a message wakes the writer's event loop.

import { fdatasyncSync } from "node:fs";
import { SyncSlot, type SyncReply } from "./_sync-protocol.ts";

declare const self: Worker;

self.onmessage = (event: MessageEvent<SharedArrayBuffer>) => {
  const slots = new Int32Array(event.data);
  let seen = 0;
  for (;;) {
    Atomics.wait(slots, SyncSlot.request, seen);
    if (Atomics.load(slots, SyncSlot.stop) !== 0) return;
    const seq = Atomics.load(slots, SyncSlot.request);
    if (seq === seen) continue;
    seen = seq;
    const fd = Atomics.load(slots, SyncSlot.fd);
    let reply: SyncReply;
    try {
      fdatasyncSync(fd);
      reply = { seq, error: null };
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      reply = { seq, error: { message: e instanceof Error ? e.message : String(e), code: code ?? null } };
    }
    postMessage(reply);
  }
};
