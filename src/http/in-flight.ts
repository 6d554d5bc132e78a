// Write admission on the client port (POST /v1/execute): the bytes of request bodies admitted and not yet answered
// (a write waiting to commit, or one a follower relays to the leader, holds its body, its parsed
// statements and its log entry meanwhile) stay within their share of max_memory_mb. A request
// past the share is answered 503 MEMORY_BACKPRESSURE with Retry-After before its body is read.
// A body is counted by its Content-Length when it arrives, or chunk by chunk when chunked, until
// its answer is written. A request is always admitted when no other body is in flight, so a
// body of any allowed size goes through on a quiet node: the share bounds concurrency, not size.
// The node's own RSS counts too: past its share (nodeBytesMax) only a lone request is admitted
// until garbage collection brings it back. The bodies of reads (POST /v1/query) are held to a
// share of their own (memory-budget.ts), so that many large ones at once are refused as writes
// are; a read is never refused for the writes in flight nor for the node's RSS: its body is
// small as a rule, and its answer is bounded on its own.

import type { Counter, MetricsRegistry } from "../metrics/index.ts";
import { SvcError } from "../util/errors.ts";

export interface InFlightSettings {
  /** The paths whose requests are admitted here (the write path); others pass uncounted. */
  readonly paths: readonly string[];
  /** Paths whose bodies are held to readBytesMax of their own, never refused for the node's RSS (reads). */
  readonly readPaths?: readonly string[];
  /** Read body bytes in flight beyond a lone read (default: bytesMax). */
  readonly readBytesMax?: number;
  /** Body bytes in flight beyond a lone request. */
  readonly bytesMax: number;
  /** The node's RSS past which only a lone request is admitted; 0 turns the check off. */
  readonly rssBytesMax: number;
  /** For messages: the setting the shares come from. */
  readonly maxMemoryMb: number;
  /**
   * Bodies answered since the last collection past which the garbage they left is collected
   * (0: never). The collector sizes its heap against the machine, not max_memory_mb, and counts
   * little of the buffers a body leaves behind: left alone it let a node at 128 MB grow past
   * 600 MB under a burst of large writes.
   */
  readonly collectEveryBytes: number;
}

/** Retry-After for a refused request: in-flight writes are answered within about that. */
const retryAfterS = 1;

/**
 * Forced collections are spaced by what the last one took: nine times that (and 50 ms at least),
 * a tenth of the node's time, while its memory is within its share; once past it, the same
 * again (and 10 ms), half its time, to come back under. Counting the bodies of refused requests,
 * unspaced, a burst of clients retrying every few milliseconds made the node collect back to
 * back and stop answering anything (/health in 3 s, no write applied).
 */
const collectGap = { withinShare: { minMs: 50, timesTaken: 9 }, pastShare: { minMs: 10, timesTaken: 1 } };

/** One request's claim on the bytes in flight; release() when its answer is written. */
export interface Admission {
  /** Count `bytes` more (a chunk); the error to answer instead when they pass the share. */
  grow(bytes: number): SvcError | null;
  release(): void;
}

export class InFlightBytes {
  #bytes = 0;
  #requests = 0;
  /** Bytes of read bodies admitted and not yet answered (their own share). */
  #readBytes = 0;
  #answeredSinceCollect = 0;
  /** When the next forced collection may run (collectGap). */
  #collectNotBeforeMs = -Infinity;
  /** Counted once registerMetrics was called. */
  #metrics: { refused: Counter; collections: Counter } | null = null;

  constructor(
    private readonly settings: InFlightSettings,
    private readonly rssBytes: () => number = recentRss,
    private readonly collect: () => void = () => Bun.gc(true),
    private readonly nowMs: () => number = () => performance.now(),
  ) {}

  /** Bytes of bodies admitted and not yet answered. */
  get bytes(): number {
    return this.#bytes;
  }

  /** Requests admitted and not yet answered. */
  get requests(): number {
    return this.#requests;
  }

  /** tensor_chain_write_admission_*: what is held now, what was refused and why. */
  registerMetrics(registry: MetricsRegistry): void {
    registry.gaugeFn("tensor_chain_write_admission_inflight_bytes", "Bytes of write request bodies admitted and not yet answered", () => this.#bytes);
    registry.gaugeFn("tensor_chain_write_admission_inflight_bytes_max", "The share of max_memory_mb those bodies may hold (beyond a lone request)", () => this.settings.bytesMax);
    this.#metrics = {
      refused: registry.counter("tensor_chain_write_admission_refused_total", "Requests answered 503 MEMORY_BACKPRESSURE, by reason (bytes: writes past the in-flight share; rss: writes past the node's memory share; read_bytes: reads past their share)", ["reason"]),
      collections: registry.counter("tensor_chain_write_admission_collections_total", "Full garbage collections forced after a share's worth of bodies"),
    };
  }

  /** How requests to `url` (path and query) are admitted here: as writes, as reads, or not (null). */
  counts(url: string): "write" | "read" | null {
    const path = url.split("?", 1)[0] ?? "";
    if (this.settings.paths.includes(path)) return "write";
    return this.settings.readPaths?.includes(path) === true ? "read" : null;
  }

  /**
   * Admit a request announcing `bytes` (0 when chunked or bodiless), or the error to answer.
   * A read (`as` "read") is refused only past the share of read bodies, never for the writes'
   * bytes or the node's RSS.
   */
  admit(bytes: number, as: "write" | "read" = "write"): Admission | SvcError {
    const refused = as === "write" ? this.#refusal(bytes, 0) : this.#readRefusal(bytes, 0);
    if (refused !== null) {
      // Its body arrives all the same, and is garbage once the answer is out.
      this.#spent(bytes);
      return refused;
    }
    const add = (n: number): void => {
      if (as === "write") this.#bytes += n;
      else this.#readBytes += n;
    };
    add(bytes);
    if (as === "write") this.#requests++;
    let held = bytes;
    let released = false;
    return {
      grow: (more) => {
        const error = as === "write" ? this.#refusal(more, held) : this.#readRefusal(more, held);
        if (error !== null) return error;
        held += more;
        add(more);
        return null;
      },
      release: () => {
        if (released) return;
        released = true;
        add(-held);
        if (as === "write") this.#requests--;
        this.#spent(held);
      },
    };
  }

  /** Count bytes of bodies done with; collect the garbage once they pass collectEveryBytes. */
  #spent(bytes: number): void {
    const every = this.settings.collectEveryBytes;
    this.#answeredSinceCollect += bytes;
    if (every <= 0 || this.#answeredSinceCollect < every) return;
    // Not yet: the bytes keep counting, and the first body done with after the gap collects.
    const startMs = this.nowMs();
    if (startMs < this.#collectNotBeforeMs) return;
    this.#answeredSinceCollect = 0;
    // A full collection stops the node for milliseconds: only when its memory is past half its
    // share (always at small settings, where the base alone is past it; rarely at large ones).
    const { rssBytesMax } = this.settings;
    const rss = rssBytesMax > 0 ? this.rssBytes() : 0;
    if (rssBytesMax > 0 && rss <= rssBytesMax / 2) return;
    this.#metrics?.collections.inc();
    this.collect();
    const endMs = this.nowMs();
    const gap = rssBytesMax > 0 && rss > rssBytesMax ? collectGap.pastShare : collectGap.withinShare;
    this.#collectNotBeforeMs = endMs + Math.max(gap.minMs, gap.timesTaken * (endMs - startMs));
  }


  /** A read's refusal: past its share of read bodies, unless alone; `held` as for #refusal. */
  #readRefusal(bytes: number, held: number): SvcError | null {
    if (bytes === 0 || this.#readBytes - held === 0) return null;
    const { bytesMax, readBytesMax = bytesMax, maxMemoryMb } = this.settings;
    if (this.#readBytes + bytes <= readBytesMax) return null;
    this.#metrics?.refused.labels("read_bytes").inc();
    return backpressure(`the node holds ${this.#readBytes} bytes of reads not yet answered; ${bytes} more would pass their share of max_memory_mb (${maxMemoryMb} MB): ${readBytesMax} bytes`);
  }

  /** `held`: what the asking request holds already; with nothing held by others it is alone, and passes. */
  #refusal(bytes: number, held: number): SvcError | null {
    if (bytes === 0 || this.#bytes - held === 0) return null;
    const { bytesMax, rssBytesMax, maxMemoryMb } = this.settings;
    if (this.#bytes + bytes > bytesMax) {
      this.#metrics?.refused.labels("bytes").inc();
      return backpressure(`the node holds ${this.#bytes} bytes of requests not yet answered; ${bytes} more would pass their share of max_memory_mb (${maxMemoryMb} MB): ${bytesMax} bytes`);
    }
    if (rssBytesMax > 0) {
      const rss = this.rssBytes();
      if (rss > rssBytesMax) {
        this.#metrics?.refused.labels("rss").inc();
        return backpressure(`the node's memory (${mib(rss)} MB) is past its share of max_memory_mb (${maxMemoryMb} MB): ${mib(rssBytesMax)} MB`);
      }
    }
    return null;
  }
}

/** Reading the RSS costs a system call: under load, once per 10 ms is recent enough. */
const rssFreshMs = 10;
let rssReadAtMs = -Infinity;
let rssRead = 0;
function recentRss(): number {
  const now = performance.now();
  if (now - rssReadAtMs >= rssFreshMs) {
    rssRead = process.memoryUsage.rss();
    rssReadAtMs = now;
  }
  return rssRead;
}

function mib(bytes: number): number {
  return Math.round(bytes / 2 ** 20);
}

function backpressure(message: string): SvcError {
  return new SvcError("MEMORY_BACKPRESSURE", message, {
    hint: "nothing was applied; retry after Retry-After, send fewer or smaller requests at once, or raise max_memory_mb",
    details: { retryAfterS },
  });
}
