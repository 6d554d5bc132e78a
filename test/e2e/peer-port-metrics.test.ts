// What the peer port refuses shows in /metrics: a connection that sends garbage is closed and
// counted as a bad frame, and the bytes it sent are counted in.

import * as net from "node:net";
import { describe, expect } from "bun:test";
import { addressText, metric, procTest, singleNodeConfig, useCompiledBinary, useProcessCleanup, waitFor } from "../lib/proc.ts";

useProcessCleanup();
useCompiledBinary();

/** Connect to host:port, write `bytes`, and resolve once the other side closes the connection. */
function sendAndWaitClose(address: string, bytes: Uint8Array): Promise<void> {
  const [host, port] = [address.slice(0, address.lastIndexOf(":")), Number(address.slice(address.lastIndexOf(":") + 1))];
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port }, () => socket.write(bytes));
    socket.on("error", () => resolve()); // a reset is a close too
    socket.on("close", () => resolve());
    socket.setTimeout(20_000, () => {
      socket.destroy();
      reject(new Error("the peer port kept a connection that sent garbage"));
    });
  });
}

describe("peer port metrics", () => {
  procTest("a connection that sends garbage to the peer port is closed and counted in tensor_chain_peer_transport_events_total{event=\"bad_frame\"}", async (env) => {
    const node = env.node(await singleNodeConfig(env.dir));
    await node.start();
    const series = 'tensor_chain_peer_transport_events_total{event="bad_frame"}';
    expect(await metric(node.adminUrl, series)).toBe(0);
    const bytesIn = await metric(node.adminUrl, 'tensor_chain_peer_bytes_total{direction="in"}');
    const garbage = new Uint8Array(4096).fill(0xab);
    await sendAndWaitClose(addressText(node.config.listen?.peer, "listen.peer"), garbage);
    await waitFor("the bad frame to be counted", async () => (await metric(node.adminUrl, series)) >= 1);
    expect(await metric(node.adminUrl, 'tensor_chain_peer_bytes_total{direction="in"}')).toBeGreaterThan(bytesIn);
    for (const event of ["handshake_refused", "non_member_refused", "handshake_timeout", "reconnect", "dial_failed", "queue_drop"]) {
      expect(await metric(node.adminUrl, `tensor_chain_peer_transport_events_total{event="${event}"}`)).toBeGreaterThanOrEqual(0);
    }
    expect(node.running).toBe(true);
  });
});
