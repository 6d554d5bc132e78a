// The bounded outgoing queue of one peer, in two lanes. The control lane carries Raft messages as
// whole frames; the bulk lane carries large messages (snapshot chunks) cut into fragments. When
// both lanes have work they share the connection byte for byte (control first, then one fragment
// per fragment's worth of control bytes), so a small message waits behind at most one fragment and
// a snapshot transfer still progresses under heavy Raft traffic. A full lane refuses new
// messages: Raft retransmits.

import { encodeFrame, FRAME_HEADER_BYTES, FrameType, frameAround } from "./_frame.ts";
import { FRAGMENT_HEADER_BYTES, fragmentHeader } from "./_fragment.ts";

export interface LaneBounds {
  readonly messagesMax: number;
  readonly bytesMax: number;
}

interface BulkMessage {
  readonly type: number;
  /** Not copied: the caller hands it over and must not change it afterwards. */
  readonly payload: Uint8Array;
  /** Bytes of payload already cut into fragments. */
  sentBytes: number;
}

/**
 * A FIFO with O(1) shift that compacts its backing array now and then. A shifted slot is
 * cleared at once: compaction waits for 1,024 shifted items, and until then the array held
 * every message sent (snapshot chunks of 1 MiB: a leader sending a 410 MB image held all of it).
 */
class Fifo<T> {
  #items: (T | undefined)[] = [];
  #head = 0;
  get length(): number {
    return this.#items.length - this.#head;
  }
  push(item: T): void {
    this.#items.push(item);
  }
  peek(): T | undefined {
    return this.#items[this.#head];
  }
  shift(): T | undefined {
    const item = this.#items[this.#head];
    if (item === undefined) return undefined;
    this.#items[this.#head] = undefined;
    this.#head++;
    if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return item;
  }
  clear(): void {
    this.#items = [];
    this.#head = 0;
  }
}

export interface Batch {
  readonly bytes: Uint8Array;
  readonly frames: number;
}

export class SendQueue {
  readonly #controlBounds: LaneBounds;
  readonly #bulkBounds: LaneBounds;
  /** Payload bytes of one fragment frame, its header included: no frame exceeds this. */
  readonly #fragmentBytes: number;
  /** Encoded frames. Invariant: #controlBytes is the sum of their lengths. */
  readonly #control = new Fifo<Uint8Array>();
  #controlBytes = 0;
  /** Invariant: #bulkBytes is the sum of the not yet fragmented bytes of these messages. */
  readonly #bulk = new Fifo<BulkMessage>();
  #bulkBytes = 0;
  /** Control bytes taken since the last bulk fragment: the control lane's share of the turn. */
  #controlBytesSinceBulk = 0;

  constructor(control: LaneBounds, bulk: LaneBounds, fragmentBytes: number) {
    this.#controlBounds = control;
    this.#bulkBounds = bulk;
    this.#fragmentBytes = fragmentBytes;
  }

  get messages(): number {
    return this.#control.length + this.#bulk.length;
  }

  get bytes(): number {
    return this.#controlBytes + this.#bulkBytes;
  }

  /**
   * False when the control lane is full; the message is then dropped. `headroom`: the payload
   * comes with room for the frame header before it (frameAround), and is not copied.
   */
  pushControl(type: number, payload: Uint8Array, headroom = false): boolean {
    if (this.#control.length + 1 > this.#controlBounds.messagesMax) return false;
    if (this.#controlBytes + FRAME_HEADER_BYTES + payload.byteLength > this.#controlBounds.bytesMax) return false;
    const frame = headroom ? frameAround(type, payload) : encodeFrame(type, payload);
    this.#control.push(frame);
    this.#controlBytes += frame.byteLength;
    return true;
  }

  /** False when the bulk lane is full; the message is then dropped. */
  pushBulk(type: number, payload: Uint8Array): boolean {
    if (this.#bulk.length + 1 > this.#bulkBounds.messagesMax) return false;
    if (this.#bulkBytes + payload.byteLength > this.#bulkBounds.bytesMax) return false;
    this.#bulk.push({ type, payload, sentBytes: 0 });
    this.#bulkBytes += payload.byteLength;
    return true;
  }

  /** Frames worth at least batchBytesMin (or all there is), as one buffer for one write. */
  takeBatch(batchBytesMin: number): Batch | null {
    const frames: Uint8Array[] = [];
    let size = 0;
    while (size < batchBytesMin) {
      const frame = this.#takeFrame();
      if (frame === null) break;
      frames.push(frame);
      size += frame.byteLength;
    }
    const [first] = frames;
    if (first === undefined) return null;
    if (frames.length === 1) return { bytes: first, frames: 1 };
    const bytes = new Uint8Array(size);
    let offset = 0;
    for (const frame of frames) {
      bytes.set(frame, offset);
      offset += frame.byteLength;
    }
    return { bytes, frames: frames.length };
  }

  /** Drop the control lane's frames (the bulk lane keeps its place in a message); returns how many. */
  clearControl(): number {
    const dropped = this.#control.length;
    this.#control.clear();
    this.#controlBytes = 0;
    this.#controlBytesSinceBulk = 0;
    return dropped;
  }

  clear(): void {
    this.#control.clear();
    this.#bulk.clear();
    this.#controlBytes = 0;
    this.#bulkBytes = 0;
  }

  #takeFrame(): Uint8Array | null {
    const haveControl = this.#control.length > 0;
    const haveBulk = this.#bulk.length > 0;
    if (haveControl && (!haveBulk || this.#controlBytesSinceBulk < this.#fragmentBytes)) {
      const frame = this.#control.shift();
      if (frame === undefined) return null;
      this.#controlBytes -= frame.byteLength;
      this.#controlBytesSinceBulk += frame.byteLength;
      return frame;
    }
    if (haveBulk) {
      this.#controlBytesSinceBulk = 0;
      return this.#takeBulkFrame();
    }
    return null;
  }

  #takeBulkFrame(): Uint8Array | null {
    const message = this.#bulk.peek();
    if (message === undefined) return null;
    const { type, payload } = message;
    // A message that fits one fragment goes as a plain frame: no reassembly needed.
    if (payload.byteLength <= this.#fragmentBytes) {
      this.#bulk.shift();
      this.#bulkBytes -= payload.byteLength;
      return encodeFrame(type, payload);
    }
    const offset = message.sentBytes;
    const end = Math.min(payload.byteLength, offset + this.#fragmentBytes - FRAGMENT_HEADER_BYTES);
    const frame = encodeFrame(FrameType.fragment, fragmentHeader(type, payload.byteLength, offset), payload.subarray(offset, end));
    message.sentBytes = end;
    this.#bulkBytes -= end - offset;
    if (end === payload.byteLength) this.#bulk.shift();
    return frame;
  }
}
