// The connection this node dials to one peer, and that peer's outgoing queue. It sends its
// handshake, waits for the peer's, then writes queued frames, keeping the unwritten rest of a
// write for the next drain. A lost or refused connection is redialled with backoff; messages stay
// queued (within bounds) meanwhile, and the ones in a write cut short by the loss are gone.
// A peer dialled on demand (one that is not a member as far as this node knows: removed, or
// added by a change this node has not seen yet) is dialled only while something is queued for it.

import type { Socket } from "bun";
import { errorMessage } from "../util/index.ts";
import { reconnectDelayMs } from "./_backoff.ts";
import { guard, type TransportContext } from "./_context.ts";
import { describeFrameError, encodeFrame, FrameDecoder, FrameType } from "./_frame.ts";
import { BELONGS_TO_A_CLUSTER, decodeHello, encodeHello, HELLO_FRAME_BYTES_MAX, OF_ANOTHER_CLUSTER, refuseAsDialer } from "./_hello.ts";
import { parsePeerAddress } from "./_options.ts";
import { connectTls, servedCertificateProblem } from "./_peer-tls.ts";
import { SendQueue } from "./_send-queue.ts";
import { zeroCounters, type TransportCounters } from "./_stats.ts";

type State = "connecting" | "handshaking" | "ready" | "waiting" | "idle" | "closed";

/** One dial. Callbacks of an attempt that is no longer current are ignored. */
interface Attempt {
  socket: Socket<undefined> | null;
  readonly decoder: FrameDecoder;
}

type Timer = ReturnType<typeof setTimeout>;

/** TCP keepalive probes start after this much silence, to notice a peer host that vanished. */
const KEEPALIVE_IDLE_MS = 10_000;

export class OutboundPeer {
  readonly peerId: string;
  readonly counters: TransportCounters = zeroCounters();
  readonly #ctx: TransportContext;
  readonly #queue: SendQueue;
  #address: string;
  #hostname: string;
  #port: number;
  #state: State = "waiting";
  #attempt: Attempt | null = null;
  /** Consecutive failed dials; drives the backoff and quiets repeated warnings. */
  #failuresInRow = 0;
  #everConnected = false;
  /** Bytes handed to write() only in part; the rest goes first on the next drain. */
  #pending: Uint8Array | null = null;
  #pendingOffset = 0;
  #flushScheduled = false;
  /** Connect or handshake deadline, or the reconnect delay: one at a time. */
  #timer: Timer | null = null;
  #stallTimer: Timer | null = null;
  /** Dialled only while messages wait (see setOnDemand). */
  #onDemand = false;
  /** Why the last attempt failed; null once connected. */
  #lastFailure: string | null = null;

  constructor(ctx: TransportContext, peerId: string, address: string) {
    this.#ctx = ctx;
    this.peerId = peerId;
    const { hostname, port } = parsePeerAddress(peerId, address);
    this.#address = address;
    this.#hostname = hostname;
    this.#port = port;
    const o = ctx.options;
    this.#queue = new SendQueue(
      { messagesMax: o.queueMessagesMax, bytesMax: o.queueBytesMax },
      { messagesMax: o.bulkQueueMessagesMax, bytesMax: o.bulkQueueBytesMax },
      o.fragmentBytes,
    );
  }

  get address(): string {
    return this.#address;
  }
  get connected(): boolean {
    return this.#state === "ready";
  }
  get queuedMessages(): number {
    return this.#queue.messages;
  }
  get queuedBytes(): number {
    return this.#queue.bytes;
  }
  get lastFailure(): string | null {
    return this.#state === "ready" ? null : this.#lastFailure;
  }

  start(): void {
    if (this.#onDemand) this.#state = "idle";
    else this.#dial();
  }

  /**
   * On demand: dial only while messages are queued, and once nothing is queued leave a lost
   * connection be. Turned on, an idle connection is closed now, and one that is down loses what
   * was queued for it, as at a failed dial: a removed member that comes back is not sent the
   * entries queued while it was down (it would learn its removal from a stale append some times
   * and from a member's refusal at others). Turned off, a peer left idle is dialled at once.
   */
  setOnDemand(onDemand: boolean): void {
    if (this.#onDemand === onDemand || this.#state === "closed") return;
    this.#onDemand = onDemand;
    if (onDemand) {
      if (this.#state !== "ready" && this.#state !== "idle" && this.#queue.messages > 0) {
        this.#ctx.count(this.counters, "queueDrops", this.#queue.messages);
        this.#queue.clear();
      }
      if (this.#queue.messages === 0 && this.#pending === null && this.#state !== "idle") {
        this.#ctx.logger.info(`peer transport: peer ${this.peerId} is not a member: dialled only when there is something to send to it`, { peer: this.peerId });
        this.#dropAttempt();
        this.#state = "idle";
      }
    } else if (this.#state === "idle") {
      this.#failuresInRow = 0;
      this.#dial();
    }
  }

  /** Enqueues one message; false (and counted) when its lane is full. */
  send(type: number, payload: Uint8Array, bulk: boolean, headroom = false): boolean {
    if (this.#state === "closed") return false;
    const queued = bulk ? this.#queue.pushBulk(type, payload) : this.#queue.pushControl(type, payload, headroom);
    if (!queued) {
      this.#ctx.count(this.counters, "queueDrops");
      return false;
    }
    if (this.#state === "idle") this.#dial();
    this.#scheduleFlush();
    return true;
  }

  /** Points the peer at a new address and redials at once. Throws on a malformed address. */
  setAddress(address: string): void {
    if (address === this.#address) return;
    const { hostname, port } = parsePeerAddress(this.peerId, address);
    this.#address = address;
    this.#hostname = hostname;
    this.#port = port;
    if (this.#state !== "idle") this.redial(`address changed to ${address}`);
  }

  /** Drops the current connection (if any) and dials again now, without backoff. */
  redial(reason: string): void {
    if (this.#state === "closed" || this.#state === "idle") return;
    this.#ctx.logger.info(`peer transport: redialling peer ${this.peerId}: ${reason}`, { peer: this.peerId });
    this.#dropAttempt();
    this.#failuresInRow = 0;
    this.#dial();
  }

  /**
   * The peer showed it is up (it connected to us). A redial waiting out a backoff that grew
   * while the peer was down goes now: a restarted peer is reached at once, not seconds later.
   * A dial in progress or a live connection is left alone.
   */
  peerIsUp(): void {
    if (this.#state !== "waiting") return;
    this.#ctx.logger.debug(`peer transport: peer ${this.peerId} connected to us; dialling it now`, { peer: this.peerId });
    this.#failuresInRow = 0;
    this.#dial();
  }

  close(): void {
    this.#dropAttempt();
    this.#state = "closed";
    this.#queue.clear();
  }

  #dial(): void {
    this.#clearTimer();
    const attempt: Attempt = { socket: null, decoder: new FrameDecoder(HELLO_FRAME_BYTES_MAX) };
    this.#attempt = attempt;
    this.#state = "connecting";
    const { connectTimeoutMs } = this.#ctx.options;
    this.#timer = setTimeout(() => this.#fail(attempt, `not connected within ${connectTimeoutMs} ms`, false), connectTimeoutMs);

    const logger = this.#ctx.logger;
    const current = (socket: Socket<undefined>): boolean => {
      if (this.#attempt === attempt) return true;
      socket.terminate();
      return false;
    };
    const failure = () => this.#fail(attempt, "internal error", false);
    // Read at every dial: a reload of the certificates is used from the next connection on.
    const tls = this.#ctx.tls();
    try {
      Bun.connect({
        hostname: this.#hostname,
        port: this.#port,
        ...(tls === null ? {} : { tls: connectTls(tls) }),
        socket: {
          binaryType: "uint8array",
          open: (socket) => guard(logger, "open", () => current(socket) && this.#onOpen(attempt, socket, tls === null), failure),
          handshake: (socket, success, error) => guard(logger, "TLS handshake", () => current(socket) && this.#onTlsHandshake(attempt, socket, success, error), failure),
          data: (socket, chunk) => guard(logger, "data", () => current(socket) && this.#onData(attempt, chunk), failure),
          drain: (socket) => guard(logger, "drain", () => current(socket) && this.#flush(), failure),
          close: (_socket, error) => guard(logger, "close", () => this.#fail(attempt, error === undefined ? "connection closed" : errorMessage(error), true), () => {}),
          connectError: (_socket, error) =>
            guard(logger, "connectError", () => {
              const current = this.#attempt === attempt;
              this.#fail(attempt, `cannot connect: ${errorMessage(error)}`, true);
              if (current) this.#ctx.peerUnreachable(this.peerId);
            }, () => {}),
          error: (_socket, error) => guard(logger, "error", () => this.#fail(attempt, errorMessage(error), false), () => {}),
        },
      }).catch(() => {
        // Reported through connectError.
      });
    } catch (e) {
      this.#fail(attempt, `cannot connect: ${errorMessage(e)}`, true);
    }
  }

  /** With mutual TLS, the handshake is sent once the TLS handshake has shown whom we reached. */
  #onOpen(attempt: Attempt, socket: Socket<undefined>, sendHello: boolean): void {
    attempt.socket = socket;
    socket.setNoDelay(true);
    socket.setKeepAlive(true, KEEPALIVE_IDLE_MS);
    this.#state = "handshaking";
    this.#clearTimer();
    const { handshakeTimeoutMs } = this.#ctx.options;
    this.#timer = setTimeout(() => this.#fail(attempt, `no handshake within ${handshakeTimeoutMs} ms`, false), handshakeTimeoutMs);
    if (sendHello) this.#sendHello();
  }

  /** The served certificate must come from the cluster CA and name the peer dialled. */
  #onTlsHandshake(attempt: Attempt, socket: Socket<undefined>, success: boolean, error: Error | null): void {
    const problem = !success && error === null ? { text: "the TLS handshake failed", reason: "handshake_failed" as const } : servedCertificateProblem(socket, error, this.peerId);
    if (problem === null) {
      this.#sendHello();
      return;
    }
    this.#ctx.countTlsRefusal(this.counters, problem.reason);
    this.#fail(attempt, `refusing ${this.#address} at the TLS handshake: ${problem.text}`, false, "warn");
  }

  #sendHello(): void {
    const hello = encodeHello({ clusterId: this.#ctx.clusterId(), senderId: this.#ctx.options.nodeId, targetId: this.peerId });
    this.#pending = encodeFrame(FrameType.hello, hello);
    this.#pendingOffset = 0;
    this.#ctx.count(this.counters, "framesOut");
    this.#flush();
  }

  #onData(attempt: Attempt, chunk: Uint8Array): void {
    this.#ctx.count(this.counters, "bytesIn", chunk.byteLength);
    const error = attempt.decoder.push(chunk, (type, payload) => this.#onFrame(attempt, type, payload));
    if (error !== null) {
      this.#ctx.count(this.counters, "badFrames");
      this.#fail(attempt, describeFrameError(error), false, "warn");
    }
  }

  /** The acceptor speaks only once: its handshake or its refusal. */
  #onFrame(attempt: Attempt, type: number, payload: Uint8Array): boolean {
    const { count, logger, options } = this.#ctx;
    count(this.counters, "framesIn");
    if (type === FrameType.reject) {
      count(this.counters, "handshakeRejects");
      const reason = new TextDecoder().decode(payload);
      if (reason.includes(BELONGS_TO_A_CLUSTER)) this.#ctx.heardInACluster(this.peerId);
      // A member that answers for another cluster (its id is not told to a dialler).
      if (reason.includes(OF_ANOTHER_CLUSTER)) this.#ctx.heardOfAnotherCluster(this.peerId);
      this.#fail(attempt, `peer refused the handshake: ${reason}`, false, "warn");
      return false;
    }
    if (type !== FrameType.hello || this.#state !== "handshaking") {
      count(this.counters, "badFrames");
      this.#fail(attempt, `unexpected frame of type ${type} from the accepting side`, false, "warn");
      return false;
    }
    const hello = decodeHello(payload);
    if (!("error" in hello) && hello.senderId === this.peerId) this.#ctx.heard(this.peerId, hello.clusterId);
    const refusal = "error" in hello ? hello.error : refuseAsDialer(hello, options.nodeId, this.#ctx.clusterId(), this.peerId);
    if (refusal !== null) {
      count(this.counters, "handshakeRejects");
      this.#fail(attempt, `refusing the peer's handshake: ${refusal}`, false, "warn");
      return false;
    }
    this.#clearTimer();
    this.#state = "ready";
    if (this.#everConnected) count(this.counters, "reconnects");
    this.#everConnected = true;
    const level = this.#failuresInRow > 0 ? "info" : "debug";
    logger[level](`peer transport: connected to peer ${this.peerId} at ${this.#address}`, { peer: this.peerId, remote: this.#address });
    this.#failuresInRow = 0;
    this.#flush();
    this.#ctx.peerReachable(this.peerId);
    return true;
  }

  #scheduleFlush(): void {
    if (this.#flushScheduled || this.#state !== "ready") return;
    this.#flushScheduled = true;
    // Messages sent in the same turn of the event loop go out in one write.
    queueMicrotask(() => {
      this.#flushScheduled = false;
      const attempt = this.#attempt;
      if (attempt !== null) guard(this.#ctx.logger, "flush", () => this.#flush(), () => this.#fail(attempt, "internal error", false));
    });
  }

  #flush(): void {
    const attempt = this.#attempt;
    const socket = attempt?.socket;
    if (attempt === null || socket === null || socket === undefined) return;
    for (;;) {
      if (this.#pending === null) {
        if (this.#state !== "ready") break;
        const batch = this.#queue.takeBatch(this.#ctx.options.writeBatchBytesMin);
        if (batch === null) break;
        this.#ctx.count(this.counters, "framesOut", batch.frames);
        this.#pending = batch.bytes;
        this.#pendingOffset = 0;
      }
      const restBytes = this.#pending.byteLength - this.#pendingOffset;
      const writtenBytes = socket.write(this.#pending, this.#pendingOffset, restBytes);
      if (writtenBytes < 0) {
        this.#fail(attempt, "socket closed while writing", false);
        return;
      }
      this.#ctx.count(this.counters, "bytesOut", writtenBytes);
      this.#pendingOffset += writtenBytes;
      if (writtenBytes < restBytes) {
        // The kernel buffer is full: resume on drain, unless the peer stops reading altogether.
        if (writtenBytes > 0 || this.#stallTimer === null) this.#armStallTimer(attempt);
        return;
      }
      this.#pending = null;
    }
    this.#clearStallTimer();
  }

  #armStallTimer(attempt: Attempt): void {
    this.#clearStallTimer();
    const { writeStallTimeoutMs } = this.#ctx.options;
    this.#stallTimer = setTimeout(
      () => this.#fail(attempt, `peer read nothing for ${writeStallTimeoutMs} ms`, false, "warn"),
      writeStallTimeoutMs,
    );
  }

  /**
   * Ends an attempt and schedules the next dial. A lost connection is logged once at warn; a
   * peer that stays unreachable is logged at warn on the first failure and at debug after.
   */
  #fail(attempt: Attempt, reason: string, socketClosed: boolean, level?: "warn"): void {
    if (this.#attempt !== attempt) return;
    const wasReady = this.#state === "ready";
    if (socketClosed) attempt.socket = null;
    this.#dropAttempt();
    const logger = this.#ctx.logger;
    const fields = { peer: this.peerId, remote: this.#address, reason };
    this.#lastFailure = reason;
    if (this.#onDemand && (this.#queue.messages === 0 || !wasReady)) {
      // Nothing to send to a non-member, or it cannot be reached: what was queued for it goes
      // (Raft sends again what still matters), and it is dialled again when there is more.
      logger.debug(`peer transport: connection to peer ${this.peerId} (not a member) ended: ${reason}`, fields);
      this.#queue.clear();
      this.#state = "idle";
      return;
    }
    if (wasReady) {
      logger.warn(`peer transport: lost connection to peer ${this.peerId} at ${this.#address}: ${reason}; reconnecting`, fields);
    } else {
      this.#ctx.count(this.counters, "dialFailures");
      this.#failuresInRow++;
      // The peer cannot be reached: what was queued for it is dropped rather than delivered when
      // it comes back. Raft sends again what still matters (a probe as soon as the connection
      // is up); a restarted follower otherwise first worked through seconds of stale appends
      // and heartbeats before the entries it lacked.
      const dropped = this.#queue.clearControl();
      if (dropped > 0) this.#ctx.count(this.counters, "queueDrops", dropped);
      const quiet = this.#failuresInRow > 1 && level === undefined;
      logger[quiet ? "debug" : "warn"](`peer transport: cannot reach peer ${this.peerId} at ${this.#address}: ${reason}; retrying`, fields);
    }
    const { reconnectDelayMsMin, reconnectDelayMsMax, random } = this.#ctx.options;
    const delayMs = reconnectDelayMs(this.#failuresInRow, reconnectDelayMsMin, reconnectDelayMsMax, random);
    this.#state = "waiting";
    this.#timer = setTimeout(() => guard(logger, "dial", () => this.#dial(), () => {}), delayMs);
  }

  /** Forgets the current attempt and closes its socket; its late callbacks are then ignored. */
  #dropAttempt(): void {
    const attempt = this.#attempt;
    this.#attempt = null;
    this.#clearTimer();
    this.#clearStallTimer();
    this.#pending = null;
    if (this.#state !== "closed") this.#state = "waiting";
    if (attempt === null) return;
    const socket = attempt.socket;
    attempt.socket = null;
    socket?.terminate();
  }

  #clearTimer(): void {
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
  }

  #clearStallTimer(): void {
    if (this.#stallTimer !== null) clearTimeout(this.#stallTimer);
    this.#stallTimer = null;
  }
}
