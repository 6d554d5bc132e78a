// The peer transport: opaque typed messages between the nodes of a cluster over TCP. Each node
// dials one connection to every peer for what it sends, and accepts the peers' connections for
// what it receives. Delivery is best effort and in order per connection: messages queued when a
// connection breaks may be lost, and a full queue refuses new ones. Raft retransmits.
// Only members (the peers given to setPeers) are accepted, and only with this node's cluster
// id once it has one: a stranger's messages never reach the caller.

import { AssertionError, assert, errorMessage, silentLogger, type Logger } from "../util/index.ts";
import type { TransportContext } from "./_context.ts";
import { CALLER_TYPE_MAX, CALLER_TYPE_MIN, FRAME_HEADER_BYTES } from "./_frame.ts";
import { InboundServer } from "./_inbound.ts";
import { checkId, parsePeerAddress, resolveOptions, type MessageHandler, type ResolvedOptions, type TransportOptions } from "./_options.ts";
import { OutboundPeer } from "./_outbound.ts";
import type { PeerTls, TlsRefusalReason } from "./_peer-tls.ts";
import { counterSink, zeroCounters, zeroTlsRefusals, type Count, type PeerStats, type TransportCounters, type TransportStats } from "./_stats.ts";

export interface SendOptions {
  /**
   * Large, non-urgent messages (snapshot chunks): cut into fragments and interleaved with
   * control messages, under the bulk lane's bounds. The payload is not copied: do not change it.
   */
  readonly bulk?: boolean;
  /**
   * The payload's buffer holds FRAME_HEADROOM_BYTES just before it that nothing else uses (made
   * by encodeMessage with that headroom): the frame is made there, in place, and the payload is
   * not copied. The caller hands the buffer over: do not change it. Not for bulk messages.
   */
  readonly headroom?: boolean;
}

/** What SendOptions.headroom needs before a payload: the frame header. */
export const FRAME_HEADROOM_BYTES = FRAME_HEADER_BYTES;

export interface PeerSetOptions {
  /**
   * Peers accepted, but dialled only while a message is queued for them: those that are not
   * members as far as this node knows (removed, or added by a change it has not seen yet).
   */
  readonly onDemand?: ReadonlySet<string>;
}

export interface Transport {
  /** The bound peer port (after start()). */
  readonly port: number;
  /** Binds the peer listener; returns the bound port. Throws SvcError PORT_IN_USE, PORT_NOT_PERMITTED, ADDRESS_NOT_LOCAL or TRANSPORT_LISTEN_FAILED. */
  start(): number;
  /**
   * The members, id → "host:port" (this node's own id is ignored): the peers to send to and
   * the only ones accepted. Until the first call every peer connection is refused. New peers
   * are dialled, changed addresses redialled, removed peers disconnected both ways and their
   * queues dropped. Throws SvcError TRANSPORT_BAD_ADDRESS (changing nothing) on a malformed address.
   */
  setPeers(peers: ReadonlyMap<string, string> | Readonly<Record<string, string>>, options?: PeerSetOptions): void;
  /**
   * Queues a message of a caller type (0x10–0xff) for a peer. False, counted as a queue drop,
   * when the peer is unknown, the payload exceeds frameBytesMax or the lane is full.
   */
  send(peerId: string, type: number, payload: Uint8Array, options?: SendOptions): boolean;
  /**
   * Adopts a cluster id (a new node that installed its first snapshot); reconnects everything,
   * unless it is the id this transport already learned from a member's handshake.
   */
  setClusterId(clusterId: string): void;
  /**
   * New certificate, key and CA for the connections made from now on, both ways; established
   * connections stay up. Only for a transport started with tls. Throws, keeping the previous
   * ones, when the listener cannot take them.
   */
  setTls(tls: PeerTls): void;
  /**
   * The cluster id each member sent in the last handshake of it this node read, dialling or
   * accepting ("" for none): whether the members already form a cluster, before this node
   * makes one (start.ts).
   */
  heardClusterIds(): ReadonlyMap<string, string>;
  peersOfAnotherCluster(withinMs: number): string[];
  /**
   * Peers that refused this node's handshake because they belong to a cluster and this node
   * sent no cluster id, without naming it: a member that no longer counts this node among its
   * own (removed) never dials back with its id, but is in a cluster all the same.
   */
  peersInAClusterUntold(): ReadonlySet<string>;
  stats(): TransportStats;
  /** Closes the listener and every connection and stops redialling. */
  close(): void;
}

class PeerTransport implements Transport {
  readonly #options: ResolvedOptions;
  readonly #logger: Logger;
  readonly #onMessage: MessageHandler;
  readonly #totals: TransportCounters = zeroCounters();
  readonly #count: Count = counterSink(this.#totals);
  readonly #tlsRefusals = zeroTlsRefusals();
  #tls: PeerTls | null;
  #clusterId: string;
  /**
   * While #clusterId is "": the id of the first member that connected with one. Dials carry
   * it, since members with an id refuse a handshake without one. Invariant: "" when
   * #clusterId is set.
   */
  #learnedClusterId = "";
  /** The cluster id each member sent in its last handshake read (see heardClusterIds). */
  readonly #heard = new Map<string, string>();
  /** Peers that last refused this node's handshake as another cluster's, and when (see peersOfAnotherCluster). */
  readonly #ofAnotherCluster = new Map<string, number>();
  /** Peers that refused this node's handshake saying they belong to a cluster (not named: see peersInAClusterUntold). */
  readonly #inAClusterUntold = new Set<string>();
  /** False until the first setPeers: no peer is accepted before the members are known. */
  #membersKnown = false;
  readonly #peers = new Map<string, OutboundPeer>();
  readonly #inbound: InboundServer;
  readonly #context: TransportContext;
  #port = 0;
  #closed = false;

  constructor(options: TransportOptions) {
    this.#options = resolveOptions(options);
    this.#logger = options.logger ?? silentLogger;
    this.#onMessage = options.onMessage;
    this.#clusterId = options.clusterId;
    this.#tls = this.#options.tls;
    const ctx: TransportContext = {
      options: this.#options,
      logger: this.#logger,
      count: this.#count,
      countTlsRefusal: (peer, reason) => this.#countTlsRefusal(peer, reason),
      tls: () => this.#tls,
      clusterId: () => (this.#clusterId !== "" ? this.#clusterId : this.#learnedClusterId),
      peerUnreachable: (peerId) => options.onPeerUnreachable?.(peerId),
      peerReachable: (peerId) => options.onPeerReachable?.(peerId),
      heard: (peerId, clusterId) => {
        if (this.#peers.has(peerId)) this.#heard.set(peerId, clusterId);
      },
      heardInACluster: (peerId) => {
        if (this.#peers.has(peerId)) this.#inAClusterUntold.add(peerId);
      },
      heardOfAnotherCluster: (peerId) => {
        if (this.#peers.has(peerId)) this.#ofAnotherCluster.set(peerId, Date.now());
      },
    };
    this.#inbound = new InboundServer(ctx, {
      countersOf: (peerId) => this.#peers.get(peerId)?.counters ?? null,
      deliver: (from, type, payload) => this.#deliver(from, type, payload),
      peerConnected: (peerId) => this.#peers.get(peerId)?.peerIsUp(),
      members: () => (this.#membersKnown ? this.#peers : "unknown"),
      learnClusterId: (clusterId, fromPeerId) => this.#learnClusterId(clusterId, fromPeerId),
    });
    this.#context = ctx;
  }

  get port(): number {
    return this.#port;
  }

  start(): number {
    assert(!this.#closed, "transport started after close");
    assert(this.#port === 0, "transport started twice");
    this.#port = this.#inbound.start();
    this.#logger.info(`peer transport: listening on ${this.#options.listen.hostname}:${this.#port}`);
    return this.#port;
  }

  setPeers(peers: ReadonlyMap<string, string> | Readonly<Record<string, string>>, options: PeerSetOptions = {}): void {
    assert(!this.#closed, "setPeers after close");
    const onDemand = options.onDemand ?? new Set<string>();
    const wanted = new Map(peers instanceof Map ? peers : Object.entries(peers));
    wanted.delete(this.#options.nodeId);
    // Check everything first so that a bad entry throws before anything changes.
    for (const [id, address] of wanted) {
      checkId("peer id", id);
      parsePeerAddress(id, address);
    }
    const added = new Map<string, OutboundPeer>();
    for (const [id, address] of wanted) {
      if (!this.#peers.has(id)) added.set(id, new OutboundPeer(this.#context, id, address));
    }
    for (const [id, peer] of this.#peers) {
      const address = wanted.get(id);
      if (address === undefined) {
        peer.close();
        this.#peers.delete(id);
        this.#inbound.dropPeer(id);
        this.#logger.info(`peer transport: peer ${id} removed`, { peer: id });
      } else {
        peer.setOnDemand(onDemand.has(id));
        peer.setAddress(address);
      }
    }
    for (const [id, peer] of added) {
      this.#peers.set(id, peer);
      peer.setOnDemand(onDemand.has(id));
      peer.start();
    }
    this.#membersKnown = true;
  }

  send(peerId: string, type: number, payload: Uint8Array, options?: SendOptions): boolean {
    assert(Number.isInteger(type) && type >= CALLER_TYPE_MIN && type <= CALLER_TYPE_MAX, "message type in the caller range 0x10-0xff");
    const peer = this.#peers.get(peerId);
    if (peer === undefined) {
      this.#count(null, "queueDrops");
      return false;
    }
    if (payload.byteLength > this.#options.frameBytesMax) {
      this.#count(peer.counters, "queueDrops");
      this.#logger.warn(`peer transport: dropping a ${payload.byteLength}-byte message to peer ${peerId}: over the ${this.#options.frameBytesMax}-byte limit`, { peer: peerId });
      return false;
    }
    const bulk = options?.bulk === true;
    return peer.send(type, payload, bulk, !bulk && options?.headroom === true && payload.byteOffset >= FRAME_HEADROOM_BYTES);
  }

  setClusterId(clusterId: string): void {
    checkId("cluster id", clusterId);
    if (clusterId === this.#clusterId) return;
    if (clusterId !== "" && clusterId === this.#learnedClusterId) {
      // Every connection already carries this id: nothing to redo.
      this.#clusterId = clusterId;
      this.#learnedClusterId = "";
      this.#logger.info(`peer transport: cluster id is now ${JSON.stringify(clusterId)}`);
      return;
    }
    this.#learnedClusterId = "";
    this.#logger.info(`peer transport: cluster id is now ${JSON.stringify(clusterId)}; reconnecting to peers`);
    this.#clusterId = clusterId;
    this.#inbound.dropAll();
    for (const peer of this.#peers.values()) peer.redial("cluster id changed");
  }

  setTls(tls: PeerTls): void {
    assert(this.#tls !== null, "TLS replaced on a transport started without it");
    if (!this.#closed) this.#inbound.replaceTls(tls);
    this.#tls = tls;
    this.#logger.info("peer transport: new connections use the reloaded certificates; established ones stay up");
  }

  heardClusterIds(): ReadonlyMap<string, string> {
    return this.#heard;
  }

  peersInAClusterUntold(): ReadonlySet<string> {
    return this.#inAClusterUntold;
  }

  /** Peers that refused a handshake of this node's within `withinMs` as one from another cluster than theirs. */
  peersOfAnotherCluster(withinMs: number): string[] {
    const since = Date.now() - withinMs;
    return [...this.#ofAnotherCluster].filter(([, atMs]) => atMs >= since).map(([id]) => id);
  }

  stats(): TransportStats {
    const peers: Record<string, PeerStats> = {};
    for (const [id, peer] of this.#peers) {
      peers[id] = {
        ...peer.counters,
        address: peer.address,
        connected: peer.connected,
        inboundConnected: this.#inbound.hasPeer(id),
        queuedMessages: peer.queuedMessages,
        queuedBytes: peer.queuedBytes,
        lastFailure: peer.lastFailure,
      };
    }
    return { totals: { ...this.#totals }, peers, tlsRefusals: { ...this.#tlsRefusals } };
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#inbound.close();
    for (const peer of this.#peers.values()) peer.close();
    this.#peers.clear();
  }

  #countTlsRefusal(peer: TransportCounters | null, reason: TlsRefusalReason): void {
    this.#count(peer, "tlsRefusals");
    this.#tlsRefusals[reason] += 1;
  }

  #learnClusterId(clusterId: string, fromPeerId: string): void {
    assert(this.#clusterId === "" && this.#learnedClusterId === "", "a cluster id is learned only by a node that has none");
    this.#learnedClusterId = clusterId;
    this.#logger.info(`peer transport: member ${fromPeerId} belongs to cluster ${JSON.stringify(clusterId)}; dialling peers with that id until this node joins it`, { peer: fromPeerId });
    for (const peer of this.#peers.values()) if (!peer.connected) peer.redial("learned the cluster id");
  }

  /** The caller's handler must not throw; if it does, the connection survives and it is logged. */
  #deliver(fromPeerId: string, type: number, payload: Uint8Array): void {
    if (this.#closed) return;
    try {
      this.#onMessage(fromPeerId, type, payload);
    } catch (e) {
      this.#logger.error(`peer transport: message handler failed on a message of type ${type} from peer ${fromPeerId}: ${errorMessage(e)}`);
      if (e instanceof AssertionError) {
        queueMicrotask(() => {
          throw e;
        });
      }
    }
  }
}

export function createTransport(options: TransportOptions): Transport {
  return new PeerTransport(options);
}
