// The peer network as the node uses it: typed opaque messages to other members by id.
// Production: the TCP transport (src/transport), which frames, checks and reconnects.
// Twin: the simulator's network, which delays, drops, duplicates and partitions. Messages
// arriving go to the handler the node was built with (SvcNode.onPeerMessage).

export interface PeerLinkStatus {
  readonly connected: boolean;
  readonly inboundConnected: boolean;
  readonly address: string;
  /** Why this node's last dial or connection to the peer failed, while not connected. */
  readonly lastFailure?: string | null;
}

export interface PeerNetwork {
  /**
   * Queue a message; false when it cannot be sent now (no link, queue full). `headroom`: the
   * payload was encoded with room before it for the transport's frame (see the transport's
   * SendOptions); a network that frames nothing ignores it.
   */
  send(peerId: string, type: number, payload: Uint8Array, options?: { bulk?: boolean; headroom?: boolean }): boolean;
  /**
   * The peers to talk to, by id, with their peer addresses. `onDemand`: those among them that
   * are not members as far as this node knows, dialled only while something is to be sent to them.
   */
  setPeers(peers: Readonly<Record<string, string>>, options?: { onDemand?: ReadonlySet<string> }): void;
  setClusterId(clusterId: string): void;
  /** Per-peer link state, for cluster-status. */
  linkStatus(): Record<string, PeerLinkStatus>;
  close(): void;
}
