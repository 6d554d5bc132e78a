// TCP proxies between the nodes of a test cluster, so that a test can cut the network between
// live processes. Each node dials its own connection to every peer for what it sends, so one
// proxy per ordered pair (from → to) carries exactly the messages `from` sends to `to`; a cut
// link drops its connections and refuses new ones, as a partition that resets connections.
// Each proxy also relays UDP datagrams on the same port number (gossip uses the peer port over
// UDP): a Raft cut (setLink) leaves gossip flowing; cutPeerPort cuts both, as a firewall would.

import * as dgram from "node:dgram";
import * as net from "node:net";

/** Told the bytes `from` has sent to `to` through the proxy since it was set. */
export type TrafficListener = (bytesSent: number) => void;

class LinkProxy {
  private cut = false;
  /** UDP (gossip) is cut separately from TCP (Raft). */
  private udpCut = false;
  private readonly udp = dgram.createSocket("udp4");
  private listener: { fn: TrafficListener; bytes: number } | null = null;
  private readonly sockets = new Set<net.Socket>();
  private readonly server: net.Server;

  constructor(readonly from: string, readonly to: string, private readonly target: { host: string; port: number }) {
    this.server = net.createServer((client) => this.accept(client));
  }

  async listen(port: number): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen({ host: "127.0.0.1", port, exclusive: true }, () => resolve());
    });
    await new Promise<void>((resolve, reject) => {
      this.udp.once("error", reject);
      this.udp.bind(port, "127.0.0.1", () => resolve());
    });
    this.udp.on("message", (msg) => {
      if (!this.udpCut) this.udp.send(msg, this.target.port, this.target.host);
    });
    // A datagram relayed to a node that is down comes back as ECONNREFUSED (ICMP port
    // unreachable): it is lost, as UDP may lose anything, and must not end the test process.
    this.udp.on("error", () => undefined);
  }

  setUdpCut(cut: boolean): void {
    this.udpCut = cut;
  }

  setCut(cut: boolean): void {
    this.cut = cut;
    if (cut) this.dropAll();
  }

  watch(fn: TrafficListener | null): void {
    this.listener = fn === null ? null : { fn, bytes: 0 };
  }

  get isCut(): boolean {
    return this.cut;
  }

  close(): void {
    this.cut = true;
    this.udpCut = true;
    this.dropAll();
    this.server.close();
    this.udp.close();
  }

  private dropAll(): void {
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
  }

  private accept(client: net.Socket): void {
    if (this.cut) {
      client.destroy();
      return;
    }
    const upstream = net.connect(this.target);
    this.sockets.add(client);
    this.sockets.add(upstream);
    const drop = (): void => {
      client.destroy();
      upstream.destroy();
      this.sockets.delete(client);
      this.sockets.delete(upstream);
    };
    client.on("error", drop);
    upstream.on("error", drop);
    client.on("close", drop);
    upstream.on("close", drop);
    client.on("data", (chunk: Buffer) => {
      const l = this.listener;
      if (l === null) return;
      l.bytes += chunk.length;
      l.fn(l.bytes);
    });
    // pipe() applies backpressure both ways: a slow reader slows the writer, nothing is buffered without bound.
    client.pipe(upstream);
    upstream.pipe(client);
  }
}

export class PeerProxies {
  private readonly links: LinkProxy[] = [];

  /** A proxy on 127.0.0.1:`port` that carries `from`'s connections to `to` at `target` ("host:port"). */
  async add(from: string, to: string, port: number, target: string): Promise<void> {
    const cut = target.lastIndexOf(":");
    const link = new LinkProxy(from, to, { host: target.slice(0, cut), port: Number(target.slice(cut + 1)) });
    await link.listen(port);
    this.links.push(link);
  }

  /** Cut (or restore) the links between two nodes, both directions. */
  setLink(a: string, b: string, cut: boolean): void {
    for (const l of this.links) if ((l.from === a && l.to === b) || (l.from === b && l.to === a)) l.setCut(cut);
  }

  /** Cut (or restore) the whole peer port between two nodes, TCP (Raft) and UDP (gossip), both directions. */
  cutPeerPort(a: string, b: string, cut: boolean): void {
    for (const l of this.links) {
      if ((l.from === a && l.to === b) || (l.from === b && l.to === a)) {
        l.setCut(cut);
        l.setUdpCut(cut);
      }
    }
  }

  /** Call `fn` on every chunk `from` sends to `to` (null stops it): a test can act in the middle of a transfer. */
  watch(from: string, to: string, fn: TrafficListener | null): void {
    for (const l of this.links) if (l.from === from && l.to === to) l.watch(fn);
  }

  /** Cut every link to and from `node`. */
  isolate(node: string): void {
    for (const l of this.links) if (l.from === node || l.to === node) l.setCut(true);
  }

  /** Split the nodes into groups that reach only their own group. */
  partition(groups: readonly (readonly string[])[]): void {
    const groupOf = new Map<string, number>();
    groups.forEach((g, i) => g.forEach((id) => groupOf.set(id, i)));
    for (const l of this.links) l.setCut(groupOf.get(l.from) !== groupOf.get(l.to));
  }

  healAll(): void {
    for (const l of this.links) {
      l.setCut(false);
      l.setUdpCut(false);
    }
  }

  /** Which ordered links are cut now, for a test's log. */
  describeCuts(): string {
    const cut = this.links.filter((l) => l.isCut).map((l) => `${l.from}→${l.to}`);
    return cut.length === 0 ? "none" : cut.join(" ");
  }

  close(): void {
    for (const l of this.links) l.close();
    this.links.length = 0;
  }
}
