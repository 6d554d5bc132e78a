// The UDP driver on loopback: three members see each other alive, one that closes its socket
// is declared dead by the others, and sends to its closed port (answered by ICMP port
// unreachable) do not disturb the others.

import { afterEach, describe, expect, test } from "bun:test";
import { createGossip, type GossipService, type MemberFacts } from "../../src/gossip/index.ts";
import { silentLogger } from "../../src/util/index.ts";
import { freePorts } from "../lib/proc.ts";

const timings = { protocolPeriodMs: 200, ackTimeoutMs: 80, indirectProbes: 2, suspicionTimeoutMs: 600, packetBytesMax: 1400 };
const started: GossipService[] = [];

afterEach(() => {
  for (const g of started.splice(0)) g.close();
});

function facts(port: number): MemberFacts {
  return {
    role: "follower", term: 1, leader: null, commitIndex: 0, appliedIndex: 0, version: "test", recovery: "healthy",
    addresses: { peer: `127.0.0.1:${port}`, client: "127.0.0.1:1", admin: "127.0.0.1:2" }, raftLinks: {}, archive: null,
  };
}

async function waitUntil(what: string, cond: () => boolean, deadlineMs = 15_000): Promise<void> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > deadlineMs) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(20);
  }
}

const stateOf = (g: GossipService, id: string): string | undefined => g.snapshot().members.find((m) => m.id === id)?.state;

describe("gossip over UDP", () => {
  test("members see each other alive, and a member that stops is declared dead by the others", async () => {
    const ports = await freePorts(3);
    const members = ports.map((p, i) => ({ id: `m${i}`, peer: `127.0.0.1:${p}` }));
    for (const [i, port] of ports.entries()) {
      const g = createGossip({ self: `m${i}`, listen: { host: "127.0.0.1", port }, logger: silentLogger, timings });
      await g.start();
      g.setClusterId("udp-test");
      g.setSource({ members: () => members, facts: () => facts(port) });
      started.push(g);
    }
    const [a, b, c] = started;
    if (a === undefined || b === undefined || c === undefined) throw new Error("three members");
    await waitUntil("everyone alive everywhere", () => started.every((g) => g.snapshot().members.filter((m) => m.state === "alive" && m.record !== null).length === 3));
    expect(a.snapshot().members.find((m) => m.id === "m1")?.record?.facts.version).toBe("test");

    c.close();
    await waitUntil("m2 dead at m0 and m1", () => stateOf(a, "m2") === "dead" && stateOf(b, "m2") === "dead");
    // The others go on: still alive to each other, and still probing.
    const probes = a.snapshot().counters.probes;
    await waitUntil("more probes", () => a.snapshot().counters.probes > probes + 3);
    expect(stateOf(a, "m1")).toBe("alive");
    expect(stateOf(b, "m0")).toBe("alive");
  }, 30_000);
});
