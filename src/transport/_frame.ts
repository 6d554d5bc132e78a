// Wire frames of the peer protocol: `u32 length | u32 crc32 | u8 type | payload`, big-endian.
// length counts payload bytes only; the CRC covers the type byte and the payload, so a flipped
// type is caught as surely as a flipped payload byte. The decoder bounds a frame's length before
// it buffers a single payload byte.

export const FRAME_HEADER_BYTES = 9;

/** Frame types 0x00–0x0f belong to the transport itself; callers use 0x10–0xff. */
export const FrameType = {
  /** Handshake: magic, protocol version, cluster id, sender and target node ids. */
  hello: 0x01,
  /** Handshake refused; the payload is a UTF-8 reason. The sender closes right after. */
  reject: 0x02,
  /** One piece of a bulk message (see _fragment.ts). */
  fragment: 0x03,
} as const;

export const CALLER_TYPE_MIN = 0x10;
export const CALLER_TYPE_MAX = 0xff;

function crcOf(type: number, parts: readonly Uint8Array[]): number {
  let crc = Bun.hash.crc32(Uint8Array.of(type));
  for (const part of parts) crc = Bun.hash.crc32(part, crc);
  return crc >>> 0;
}

/** One frame whose payload is the concatenation of parts (copied: the caller may reuse them). */
export function encodeFrame(type: number, ...parts: Uint8Array[]): Uint8Array {
  let payloadBytes = 0;
  for (const part of parts) payloadBytes += part.byteLength;
  const frame = new Uint8Array(FRAME_HEADER_BYTES + payloadBytes);
  const view = new DataView(frame.buffer);
  view.setUint32(0, payloadBytes);
  view.setUint32(4, crcOf(type, parts));
  view.setUint8(8, type);
  let offset = FRAME_HEADER_BYTES;
  for (const part of parts) {
    frame.set(part, offset);
    offset += part.byteLength;
  }
  return frame;
}

/**
 * The frame of `payload`, made in place: its header is written into the FRAME_HEADER_BYTES of
 * the payload's buffer just before it, which the caller left free and hands over with the
 * payload (SendOptions.headroom). No copy of the payload: a leader sending a member behind
 * appends of half a megabyte each made a new buffer for every one, and filled it.
 */
export function frameAround(type: number, payload: Uint8Array): Uint8Array {
  if (payload.byteOffset < FRAME_HEADER_BYTES) throw new RangeError("no room for a frame header before the payload");
  const frame = new Uint8Array(payload.buffer, payload.byteOffset - FRAME_HEADER_BYTES, FRAME_HEADER_BYTES + payload.byteLength);
  const view = new DataView(frame.buffer, frame.byteOffset, FRAME_HEADER_BYTES);
  view.setUint32(0, payload.byteLength);
  view.setUint32(4, crcOf(type, [payload]));
  view.setUint8(8, type);
  return frame;
}

export type FrameError =
  | { readonly code: "FRAME_TOO_LARGE"; readonly payloadBytes: number; readonly payloadBytesMax: number }
  | { readonly code: "FRAME_BAD_CRC"; readonly type: number; readonly payloadBytes: number };

export function describeFrameError(e: FrameError): string {
  switch (e.code) {
    case "FRAME_TOO_LARGE":
      return `frame announces ${e.payloadBytes} payload bytes, more than the ${e.payloadBytesMax} allowed`;
    case "FRAME_BAD_CRC":
      return `frame of type ${e.type} with ${e.payloadBytes} payload bytes failed its CRC check`;
  }
}

/**
 * Turns arbitrary chunks of a byte stream back into frames. After it reports an error it
 * stays broken: the stream has lost its framing and the connection must be closed.
 */
export class FrameDecoder {
  /** May be raised once the peer has authenticated itself (the handshake is small). */
  payloadBytesMax: number;
  readonly #header = new Uint8Array(FRAME_HEADER_BYTES);
  #headerFill = 0;
  /** Non-null while a payload is being collected; its length was bounded before allocation. */
  #payload: Uint8Array | null = null;
  #payloadFill = 0;
  #type = 0;
  #crc = 0;
  #failed: FrameError | null = null;

  constructor(payloadBytesMax: number) {
    this.payloadBytesMax = payloadBytesMax;
  }

  /**
   * Feeds one chunk. onFrame returns false to stop decoding (the connection is going away);
   * the rest of the chunk is then ignored. Returns the first framing error, if any.
   */
  push(chunk: Uint8Array, onFrame: (type: number, payload: Uint8Array) => boolean): FrameError | null {
    if (this.#failed !== null) return this.#failed;
    let offset = 0;
    while (offset < chunk.byteLength) {
      if (this.#payload === null) {
        const take = Math.min(FRAME_HEADER_BYTES - this.#headerFill, chunk.byteLength - offset);
        this.#header.set(chunk.subarray(offset, offset + take), this.#headerFill);
        this.#headerFill += take;
        offset += take;
        if (this.#headerFill < FRAME_HEADER_BYTES) break;
        const view = new DataView(this.#header.buffer);
        const payloadBytes = view.getUint32(0);
        if (payloadBytes > this.payloadBytesMax) {
          this.#failed = { code: "FRAME_TOO_LARGE", payloadBytes, payloadBytesMax: this.payloadBytesMax };
          return this.#failed;
        }
        this.#crc = view.getUint32(4);
        this.#type = view.getUint8(8);
        // Not zeroed first: every byte is filled before the frame is delivered. A plain
        // Uint8Array over its own memory (entries decoded from the frame are views of it).
        const unfilled = Buffer.allocUnsafeSlow(payloadBytes);
        this.#payload = new Uint8Array(unfilled.buffer, unfilled.byteOffset, payloadBytes);
        this.#payloadFill = 0;
      }
      const take = Math.min(this.#payload.byteLength - this.#payloadFill, chunk.byteLength - offset);
      this.#payload.set(chunk.subarray(offset, offset + take), this.#payloadFill);
      this.#payloadFill += take;
      offset += take;
      if (this.#payloadFill < this.#payload.byteLength) break;

      const payload = this.#payload;
      const type = this.#type;
      this.#payload = null;
      this.#headerFill = 0;
      if (crcOf(type, [payload]) !== this.#crc) {
        this.#failed = { code: "FRAME_BAD_CRC", type, payloadBytes: payload.byteLength };
        return this.#failed;
      }
      if (!onFrame(type, payload)) return null;
    }
    return null;
  }
}
