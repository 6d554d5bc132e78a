// The peer listener and the connections peers dial to this node. A connection must open with a
// valid handshake from a member, within the handshake timeout; from then on its identity is the
// sender id it named, and it carries that peer's messages to us (our messages to the peer go
// over the connection we dial). Anything malformed closes the connection, is counted, and is
// logged at warn with the remote address (refusals at a bounded rate per remote host).

import type { Socket, TCPSocketListener } from "bun";
import { errorMessage, SvcError } from "../util/index.ts";
import { listenFailure } from "../util/listen-failure.ts";
import { guard, type TransportContext } from "./_context.ts";
import { Reassembler } from "./_fragment.ts";
import { CALLER_TYPE_MIN, describeFrameError, encodeFrame, FrameDecoder, FrameType } from "./_frame.ts";
import { decodeHello, encodeHello, HELLO_FRAME_BYTES_MAX, refuseAsAcceptor, REJECT_REASON_CHARS_MAX, type Membership } from "./_hello.ts";
import { listenTls, peerCertificateIds, tlsErrorReason, type PeerTls, type TlsRefusalReason } from "./_peer-tls.ts";
import { RefusalLog } from "./_refusal-log.ts";
import type { TransportCounters } from "./_stats.ts";

type Timer = ReturnType<typeof setTimeout>;
type PeerSocket = Socket<undefined>;

/** After refusing a handshake, how long the peer gets to read the reason before a hard close. */
const REJECT_LINGER_MS = 1_000;

interface InboundConn {
  /** "address:port" of the remote end, for logs. */
  readonly remote: string;
  /** The remote address without the port: refusals are rate-limited per host. */
  readonly remoteHost: string;
  readonly decoder: FrameDecoder;
  readonly reassembler: Reassembler;
  /** Set by a valid handshake; null before. */
  peerId: string | null;
  /** No more frames are processed once the connection is being closed. */
  closing: boolean;
  /** Handshake deadline, then (after a refusal) the linger before the hard close. */
  timer: Timer | null;
  /**
   * With mutual TLS: null until the TLS handshake is done, then the node ids the peer's
   * certificate names (its handshake must name one of them). Without TLS: always null.
   */
  certificateIds: readonly string[] | null;
}

export interface InboundHooks {
  /** Counters of a configured peer, or null for an id this node does not know. */
  countersOf(peerId: string): TransportCounters | null;
  deliver(fromPeerId: string, type: number, payload: Uint8Array): void;
  /** The members this node accepts connections from. */
  members(): Membership;
  /**
   * A member with a cluster id connected while this node has none: this node dials with that
   * id from now on, so that the members (who refuse a handshake without their id) accept it.
   */
  learnClusterId(clusterId: string, fromPeerId: string): void;
  /** A peer completed its handshake: it is up, whatever our own dials to it last saw. */
  peerConnected(peerId: string): void;
}

export class InboundServer {
  readonly #ctx: TransportContext;
  readonly #hooks: InboundHooks;
  #listener: TCPSocketListener<undefined> | null = null;
  /** Every accepted socket still open. Invariant: size ≤ inboundConnectionsMax. */
  readonly #conns = new Map<PeerSocket, InboundConn>();
  /** The newest handshaken connection of each peer. */
  readonly #byPeer = new Map<string, PeerSocket>();
  readonly #refusals: RefusalLog;

  constructor(ctx: TransportContext, hooks: InboundHooks) {
    this.#ctx = ctx;
    this.#hooks = hooks;
    this.#refusals = new RefusalLog(ctx.logger, ctx.options.refusalLogWindowMs);
  }

  /** Binds the listener; returns the bound port. */
  start(): number {
    const { hostname, port } = this.#ctx.options.listen;
    try {
      this.#listener = this.#listen(port, this.#ctx.tls());
    } catch (e) {
      const f = listenFailure(e, { host: hostname, port, setting: "listen.peer" });
      throw new SvcError(f.code ?? "TRANSPORT_LISTEN_FAILED", `cannot listen on ${hostname}:${port} (peer port): ${f.reason}`, { hint: f.hint, cause: e });
    }
    return this.#listener.port;
  }

  /**
   * New certificates for the connections accepted from now on. A Bun listener keeps the TLS
   * context it was made with, so the port is bound again with the new one; the connections
   * already accepted stay up. A dialer that comes in the instant between the two is refused and
   * redials. Throws (keeping the previous listener) when the new one cannot be made.
   */
  replaceTls(tls: PeerTls): void {
    const previous = this.#listener;
    if (previous === null) return;
    const port = previous.port;
    previous.stop(false);
    try {
      this.#listener = this.#listen(port, tls);
    } catch (e) {
      this.#listener = this.#listen(port, this.#ctx.tls());
      throw e;
    }
  }

  #listen(port: number, tls: PeerTls | null): TCPSocketListener<undefined> {
    const logger = this.#ctx.logger;
    const withConn = (what: string, socket: PeerSocket, body: (conn: InboundConn) => void) => {
      const conn = this.#conns.get(socket);
      if (conn === undefined || conn.closing) return;
      guard(logger, what, () => body(conn), () => this.#hardClose(socket, conn));
    };
    return Bun.listen({
      hostname: this.#ctx.options.listen.hostname,
      port,
      ...(tls === null ? {} : { tls: listenTls(tls) }),
      socket: {
        binaryType: "uint8array",
        open: (socket) => guard(logger, "accept", () => this.#onOpen(socket), () => socket.terminate()),
        handshake: (socket, success, error) => withConn("TLS handshake", socket, (conn) => this.#onTlsHandshake(socket, conn, success, error)),
        data: (socket, chunk) => withConn("data", socket, (conn) => this.#onData(socket, conn, chunk)),
        close: (socket) => guard(logger, "close", () => this.#onClose(socket), () => {}),
        error: (socket, error) => withConn("socket", socket, (conn) => {
          logger.warn(`peer transport: connection from ${conn.remote} failed: ${errorMessage(error)}`, { remote: conn.remote });
          this.#hardClose(socket, conn);
        }),
      },
    });
  }

  hasPeer(peerId: string): boolean {
    return this.#byPeer.has(peerId);
  }

  /** Closes the connections of a peer that is no longer a member. */
  dropPeer(peerId: string): void {
    for (const [socket, conn] of this.#conns) if (conn.peerId === peerId) this.#hardClose(socket, conn);
  }

  /** Closes every accepted connection; peers redial and handshake again. */
  dropAll(): void {
    for (const [socket, conn] of this.#conns) this.#hardClose(socket, conn);
  }

  close(): void {
    this.#listener?.stop(true);
    this.#listener = null;
    this.dropAll();
  }

  #onOpen(socket: PeerSocket): void {
    // A connection reset as it opened has no address left to read: it says so, not "undefined:undefined".
    const remoteHost = (socket.remoteAddress as string | undefined) ?? "an address gone before it was read";
    const remote = socket.remotePort === undefined ? remoteHost : `${remoteHost}:${socket.remotePort}`;
    const { options, logger, count } = this.#ctx;
    if (this.#conns.size >= options.inboundConnectionsMax && !this.#evictOneUnidentified()) {
      count(null, "handshakeRejects");
      this.#refusals.warn(remoteHost, `peer transport: refusing connection from ${remote}: already ${this.#conns.size} peer connections open`, {
        remote, reason: "too many connections",
      });
      socket.terminate();
      return;
    }
    const conn: InboundConn = {
      remote,
      remoteHost,
      decoder: new FrameDecoder(HELLO_FRAME_BYTES_MAX),
      reassembler: new Reassembler(options.frameBytesMax),
      peerId: null,
      closing: false,
      timer: null,
      certificateIds: null,
    };
    this.#conns.set(socket, conn);
    socket.setNoDelay(true);
    conn.timer = setTimeout(
      () => guard(logger, "handshake timeout", () => {
        count(null, "handshakeTimeouts");
        // With mutual TLS, a connection that never finished its TLS handshake is refused there.
        if (this.#ctx.tls() !== null && conn.certificateIds === null) this.#ctx.countTlsRefusal(null, "handshake_timeout");
        this.#refuse(socket, conn, `no handshake within ${options.handshakeTimeoutMs} ms`, null);
      }, () => this.#hardClose(socket, conn)),
      options.handshakeTimeoutMs,
    );
  }

  /**
   * Mutual TLS: a connection whose certificate is missing, from another CA, expired, or names
   * no member is closed here, before a byte of it is read, and counted.
   */
  #onTlsHandshake(socket: PeerSocket, conn: InboundConn, success: boolean, error: Error | null): void {
    const ids = success && error === null ? peerCertificateIds(socket) : [];
    const members = this.#hooks.members();
    const named = members === "unknown" ? ids : ids.filter((id) => members.has(id));
    let reason: string | null = null;
    let label: TlsRefusalReason = "not_a_member";
    if (!success || error !== null) {
      label = tlsErrorReason(error);
      reason = label === "no_certificate" ? "it sent no certificate" : `its certificate was refused (${error === null ? "no certificate" : errorCode(error)})`;
    } else if (named.length === 0) {
      reason = `its certificate names ${ids.length === 0 ? "no node id" : ids.map((id) => JSON.stringify(id)).join(", ")}, no member`;
    }
    if (reason === null) {
      conn.certificateIds = named;
      return;
    }
    this.#ctx.countTlsRefusal(null, label);
    this.#refusals.warn(conn.remoteHost, `peer transport: refused peer connection from ${conn.remote} at the TLS handshake: ${reason}`, { remote: conn.remote, reason });
    this.#hardClose(socket, conn);
  }

  /**
   * Makes room for a new connection by closing the oldest one that is being refused or has not
   * identified itself yet: connections that never handshake cannot keep a member out. False
   * when every connection belongs to a peer.
   */
  #evictOneUnidentified(): boolean {
    for (const [socket, conn] of this.#conns) {
      if (conn.peerId !== null && !conn.closing) continue;
      if (conn.peerId === null && !conn.closing) this.#ctx.count(null, "handshakeTimeouts");
      this.#hardClose(socket, conn);
      return true;
    }
    return false;
  }

  #counters(conn: InboundConn): TransportCounters | null {
    return conn.peerId === null ? null : this.#hooks.countersOf(conn.peerId);
  }

  #onData(socket: PeerSocket, conn: InboundConn, chunk: Uint8Array): void {
    this.#ctx.count(this.#counters(conn), "bytesIn", chunk.byteLength);
    const error = conn.decoder.push(chunk, (type, payload) => this.#onFrame(socket, conn, type, payload));
    if (error !== null) this.#badFrame(socket, conn, describeFrameError(error));
  }

  #onFrame(socket: PeerSocket, conn: InboundConn, type: number, payload: Uint8Array): boolean {
    this.#ctx.count(this.#counters(conn), "framesIn");
    if (conn.peerId === null) return this.#onHandshake(socket, conn, type, payload);
    const peerId = conn.peerId;
    const members = this.#hooks.members();
    if (members === "unknown" || !members.has(peerId)) {
      // Removed from the members while connected (setPeers closes such connections; this
      // guards the frames of a chunk already being decoded).
      this.#ctx.count(null, "nonMemberRejects");
      this.#hardClose(socket, conn);
      return false;
    }
    if (type === FrameType.fragment) {
      const result = conn.reassembler.push(payload);
      switch (result.kind) {
        case "partial":
          return true;
        case "error":
          this.#badFrame(socket, conn, result.reason);
          return false;
        case "message":
          this.#hooks.deliver(peerId, result.type, result.payload);
          return !conn.closing;
      }
    }
    if (type < CALLER_TYPE_MIN) {
      this.#badFrame(socket, conn, `unexpected frame of type ${type} after the handshake`);
      return false;
    }
    this.#hooks.deliver(peerId, type, payload);
    return !conn.closing;
  }

  #onHandshake(socket: PeerSocket, conn: InboundConn, type: number, payload: Uint8Array): boolean {
    const { options, logger, count } = this.#ctx;
    if (type !== FrameType.hello) {
      this.#badFrame(socket, conn, `expected a handshake, got a frame of type ${type}`);
      return false;
    }
    const hello = decodeHello(payload);
    if ("error" in hello) {
      this.#refuse(socket, conn, hello.error, null);
      return false;
    }
    if (this.#ctx.tls() !== null && !(conn.certificateIds ?? []).includes(hello.senderId)) {
      // A member's certificate does not let it speak for another member.
      this.#ctx.countTlsRefusal(null, "wrong_peer");
      this.#refuse(socket, conn, `the handshake names ${JSON.stringify(hello.senderId)}, but the certificate names ${(conn.certificateIds ?? []).map((id) => JSON.stringify(id)).join(", ") || "nobody"}`, null);
      return false;
    }
    const members = this.#hooks.members();
    const member = members !== "unknown" && members.has(hello.senderId);
    if (member) this.#ctx.heard(hello.senderId, hello.clusterId);
    const refusal = refuseAsAcceptor(hello, options.nodeId, this.#ctx.clusterId(), members);
    if (refusal !== null) {
      if (members !== "unknown" && !member) count(null, "nonMemberRejects");
      // A member with no cluster id yet (new, or rebuilt) waits to be dialled by a member with
      // one: it is up, so a dial to it waiting out a grown backoff goes now.
      if (member && hello.clusterId === "" && this.#ctx.clusterId() !== "") this.#hooks.peerConnected(hello.senderId);
      this.#refuse(socket, conn, refusal, this.#hooks.countersOf(hello.senderId), members === "unknown" ? "debug" : "warn");
      return false;
    }
    if (this.#ctx.clusterId() === "" && hello.clusterId !== "") this.#hooks.learnClusterId(hello.clusterId, hello.senderId);
    const reply = encodeFrame(FrameType.hello, encodeHello({ clusterId: this.#ctx.clusterId(), senderId: options.nodeId, targetId: hello.senderId }));
    const peerCounters = this.#hooks.countersOf(hello.senderId);
    const writtenBytes = socket.write(reply);
    count(peerCounters, "framesOut");
    if (writtenBytes > 0) count(peerCounters, "bytesOut", writtenBytes);
    if (writtenBytes !== reply.byteLength) {
      // A fresh socket always takes a few dozen bytes; if not, the connection is already broken.
      logger.warn(`peer transport: could not answer the handshake of peer ${hello.senderId} at ${conn.remote}`, { peer: hello.senderId, remote: conn.remote });
      this.#hardClose(socket, conn);
      return false;
    }
    if (conn.timer !== null) clearTimeout(conn.timer);
    conn.timer = null;
    conn.peerId = hello.senderId;
    conn.decoder.payloadBytesMax = options.frameBytesMax;
    const previous = this.#byPeer.get(hello.senderId);
    this.#byPeer.set(hello.senderId, socket);
    if (previous !== undefined) {
      // The peer redialled (it restarted, or its old connection died unnoticed): newest wins.
      const old = this.#conns.get(previous);
      if (old !== undefined) this.#hardClose(previous, old);
    }
    logger.debug(`peer transport: accepted connection from peer ${hello.senderId} at ${conn.remote}`, { peer: hello.senderId, remote: conn.remote });
    this.#hooks.peerConnected(hello.senderId);
    return true;
  }

  /** Refuses a handshake: the peer is told why, then the connection closes. */
  #refuse(socket: PeerSocket, conn: InboundConn, reason: string, counters: TransportCounters | null, level: "warn" | "debug" = "warn"): void {
    const { logger, count } = this.#ctx;
    count(counters, "handshakeRejects");
    const message = `peer transport: refused peer connection from ${conn.remote}: ${reason}`;
    if (level === "debug") logger.debug(message, { remote: conn.remote, reason });
    else this.#refusals.warn(conn.remoteHost, message, { remote: conn.remote, reason });
    conn.closing = true;
    if (conn.timer !== null) clearTimeout(conn.timer);
    // The dialer is told why, but not this node's cluster id: anyone can dial, and with no
    // gossip key_file the id is what the gossip key is made of.
    const local = this.#ctx.clusterId();
    const told = local === "" ? reason : reason.replaceAll(JSON.stringify(local), "(its own id)");
    socket.end(encodeFrame(FrameType.reject, new TextEncoder().encode(told.slice(0, REJECT_REASON_CHARS_MAX))));
    conn.timer = setTimeout(() => socket.terminate(), REJECT_LINGER_MS);
  }

  #badFrame(socket: PeerSocket, conn: InboundConn, reason: string): void {
    const { count } = this.#ctx;
    count(this.#counters(conn), "badFrames");
    const message = `peer transport: closing connection from ${conn.remote}${conn.peerId === null ? "" : ` (peer ${conn.peerId})`}: ${reason}`;
    // Rate-limited per host like refusals, a member's too: anyone can claim a member's id on a
    // connection of its own, and open thousands of them. Every one is counted.
    this.#refusals.warn(conn.remoteHost, message, { remote: conn.remote, ...(conn.peerId === null ? {} : { peer: conn.peerId }), reason });
    this.#hardClose(socket, conn);
  }

  #hardClose(socket: PeerSocket, conn: InboundConn): void {
    conn.closing = true;
    socket.terminate();
    this.#onClose(socket);
  }

  #onClose(socket: PeerSocket): void {
    const conn = this.#conns.get(socket);
    if (conn === undefined) return;
    this.#conns.delete(socket);
    conn.closing = true;
    if (conn.timer !== null) clearTimeout(conn.timer);
    conn.timer = null;
    if (conn.peerId !== null && this.#byPeer.get(conn.peerId) === socket) {
      this.#byPeer.delete(conn.peerId);
      this.#ctx.logger.debug(`peer transport: peer ${conn.peerId} at ${conn.remote} disconnected`, { peer: conn.peerId, remote: conn.remote });
    }
  }
}

function errorCode(error: Error): string {
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" ? code : error.message;
}
