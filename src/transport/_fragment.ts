// Bulk messages (snapshot chunks) travel as a run of fragment frames so that small Raft messages
// can be written between two fragments instead of waiting behind tens of megabytes.
// Fragment payload: `u8 callerType | u32 totalBytes | u32 offset | data`. Fragments of one
// message are sent in order and never interleaved with fragments of another (one bulk lane per
// connection), so the receiver needs only one message under assembly at a time.

export const FRAGMENT_HEADER_BYTES = 9;

export function fragmentHeader(callerType: number, totalBytes: number, offset: number): Uint8Array {
  const header = new Uint8Array(FRAGMENT_HEADER_BYTES);
  const view = new DataView(header.buffer);
  view.setUint8(0, callerType);
  view.setUint32(1, totalBytes);
  view.setUint32(5, offset);
  return header;
}

export type Reassembled =
  | { readonly kind: "partial" }
  | { readonly kind: "message"; readonly type: number; readonly payload: Uint8Array }
  | { readonly kind: "error"; readonly reason: string };

const PARTIAL: Reassembled = Object.freeze({ kind: "partial" });

export class Reassembler {
  readonly #messageBytesMax: number;
  /** The message under assembly; its size was bounded before the buffer was allocated. */
  #buffer: Uint8Array | null = null;
  #type = 0;
  #filledBytes = 0;

  constructor(messageBytesMax: number) {
    this.#messageBytesMax = messageBytesMax;
  }

  push(fragment: Uint8Array): Reassembled {
    if (fragment.byteLength < FRAGMENT_HEADER_BYTES) return { kind: "error", reason: "fragment shorter than its header" };
    const view = new DataView(fragment.buffer, fragment.byteOffset, fragment.byteLength);
    const type = view.getUint8(0);
    const totalBytes = view.getUint32(1);
    const offset = view.getUint32(5);
    const data = fragment.subarray(FRAGMENT_HEADER_BYTES);

    if (offset === 0) {
      if (this.#buffer !== null) return { kind: "error", reason: "new bulk message started before the previous one ended" };
      if (totalBytes > this.#messageBytesMax) {
        return { kind: "error", reason: `bulk message of ${totalBytes} bytes exceeds the ${this.#messageBytesMax} allowed` };
      }
      this.#buffer = new Uint8Array(totalBytes);
      this.#type = type;
      this.#filledBytes = 0;
    } else if (this.#buffer === null) {
      return { kind: "error", reason: `fragment at offset ${offset} without a message start` };
    }
    const buffer = this.#buffer;
    if (type !== this.#type || totalBytes !== buffer.byteLength || offset !== this.#filledBytes) {
      return { kind: "error", reason: "fragment does not continue the message under assembly" };
    }
    if (data.byteLength > buffer.byteLength - offset) return { kind: "error", reason: "fragment overruns its message" };
    if (data.byteLength === 0 && buffer.byteLength > 0) return { kind: "error", reason: "empty fragment" };
    buffer.set(data, offset);
    this.#filledBytes += data.byteLength;
    if (this.#filledBytes < buffer.byteLength) return PARTIAL;
    this.#buffer = null;
    return { kind: "message", type, payload: buffer };
  }
}
