// Free loopback ports for the nodes a test starts.
//
// A port is proven free by binding it (TCP and UDP: the peer port carries both) on
// 127.0.0.1 and closing it again. Candidates come from below the kernel's ephemeral range
// rather than from a bind to port 0: a port the kernel hands out for port 0 is one it also
// hands out as the local port of outgoing connections, and the tests' own HTTP clients
// could take it between a node's kill -9 and its restart on the same port.

import * as dgram from "node:dgram";
import * as fs from "node:fs";
import * as net from "node:net";

const handedOut = new Set<number>();

function ephemeralRangeStart(): number {
  try {
    const [low] = fs.readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/);
    const n = Number(low);
    if (Number.isInteger(n) && n > 12_000) return n;
  } catch {
    // not Linux: use the IANA dynamic range's start
  }
  return 49_152;
}

const rangeLow = 10_000;
const rangeHigh = ephemeralRangeStart();

function tcpFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once("error", () => resolve(false));
    server.listen({ host: "127.0.0.1", port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

function udpFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = dgram.createSocket("udp4");
    socket.once("error", () => {
      socket.close();
      resolve(false);
    });
    socket.bind(port, "127.0.0.1", () => socket.close(() => resolve(true)));
  });
}

/** One port on 127.0.0.1 that is free for TCP and UDP now and not given out before by this process. */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = rangeLow + Math.floor(Math.random() * (rangeHigh - rangeLow));
    if (handedOut.has(port)) continue;
    if ((await tcpFree(port)) && (await udpFree(port))) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error(`no free port found in ${rangeLow}..${rangeHigh} after 200 attempts`);
}

/** `count` distinct free ports. */
export async function freePorts(count: number): Promise<number[]> {
  const ports: number[] = [];
  for (let i = 0; i < count; i++) ports.push(await freePort());
  return ports;
}
