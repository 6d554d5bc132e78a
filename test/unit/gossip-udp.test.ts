// The UDP driver on loopback: three members see each other alive, one that closes its socket
// is declared dead by the others, and sends to its closed port (answered by ICMP port
// unreachable) do not disturb the others. With a shared key ([gossip] key_file) the members
// converge; one holding another key, or none, is not admitted and its packets are counted as
// dropped; a key rotated in two steps (accept both, then send with the new) keeps them alive.

import { afterEach, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { createGossip, encodePacket, sharedKey, type GossipKey, type GossipService, type MemberFacts } from "../../src/gossip/index.ts";
import { canonicalIp } from "../../src/util/ip.ts";
import { silentLogger, type Logger } from "../../src/util/index.ts";
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

const newKey = (): Uint8Array => new Uint8Array(randomBytes(32));

/** Members on free ports, each with its own key holder (undefined: the key derived from the cluster id). */
async function startMembers(keys: readonly ((() => Uint8Array[]) | undefined)[]): Promise<GossipService[]> {
  const ports = await freePorts(keys.length);
  const members = ports.map((p, i) => ({ id: `m${i}`, peer: `127.0.0.1:${p}` }));
  const out: GossipService[] = [];
  for (const [i, port] of ports.entries()) {
    const holder = keys[i];
    const key: GossipKey | undefined = holder === undefined ? undefined : sharedKey(holder);
    const g = createGossip({
      self: `m${i}`, listen: { host: "127.0.0.1", port }, logger: silentLogger, timings,
      ...(key === undefined ? {} : { keyFor: () => key }),
    });
    await g.start();
    g.setClusterId("udp-test");
    g.setSource({ members: () => members, facts: () => facts(port) });
    started.push(g);
    out.push(g);
  }
  return out;
}

const aliveWithRecord = (g: GossipService, id: string): boolean => g.snapshot().members.some((m) => m.id === id && m.state === "alive" && m.record !== null);

describe("gossip encrypted with a shared key", () => {
  test("members sharing a key converge", async () => {
    const key = newKey();
    const gs = await startMembers([() => [key], () => [key], () => [key]]);
    await waitUntil("everyone alive everywhere", () => gs.every((g) => ["m0", "m1", "m2"].every((id) => aliveWithRecord(g, id))));
    for (const g of gs) expect(g.snapshot().dropped.decrypt_failed).toBe(0);
  }, 30_000);

  test("a member with another key, or with none, is not admitted, and its packets are counted as dropped", async () => {
    const key = newKey();
    const other = newKey();
    const [a, b, c, d] = await startMembers([() => [key], () => [key], () => [other], undefined]);
    if (a === undefined || b === undefined || c === undefined || d === undefined) throw new Error("four members");
    await waitUntil("m0 and m1 alive to each other", () => aliveWithRecord(a, "m1") && aliveWithRecord(b, "m0"));
    await waitUntil("packets of the wrong key and of no key dropped at m0", () => a.snapshot().dropped.decrypt_failed > 0 && a.snapshot().dropped.key_mismatch > 0);
    await waitUntil("m2 and m3 dead at m0", () => stateOf(a, "m2") === "dead" && stateOf(a, "m3") === "dead", 20_000);
    expect(a.snapshot().members.find((m) => m.id === "m2")?.record ?? null).toBeNull();
    expect(a.snapshot().members.find((m) => m.id === "m3")?.record ?? null).toBeNull();
    expect(aliveWithRecord(c, "m0")).toBe(false);
    // Each refused sender is remembered by address, matched to its member, with the reason.
    const refusedAt = (g: GossipService, id: string) => g.snapshot().refused.find((r) => r.member === id);
    expect(refusedAt(a, "m2")).toMatchObject({ reason: "decrypt_failed" });
    expect(refusedAt(a, "m3")).toMatchObject({ reason: "key_mismatch" });
    expect(refusedAt(a, "m1")).toBeUndefined();
    await waitUntil("m2 refuses m0's packets too", () => refusedAt(c, "m0") !== undefined);
    expect(refusedAt(c, "m0")?.count).toBeGreaterThan(0);
  }, 30_000);

  test("a key rotated in two steps (every member accepts both, then sends with the new) keeps everyone alive", async () => {
    const oldKey = newKey();
    const nextKey = newKey();
    const held: Uint8Array[][] = [[oldKey], [oldKey], [oldKey]];
    const gs = await startMembers(held.map((_, i) => () => held[i] ?? []));
    const [a, b] = gs;
    if (a === undefined || b === undefined) throw new Error("members");
    const everyoneAlive = (): boolean => gs.every((g) => ["m0", "m1", "m2"].every((id) => aliveWithRecord(g, id)));
    await waitUntil("everyone alive with the old key", everyoneAlive);
    // Step 1: the new key is accepted everywhere, the old one still sends.
    for (const h of held) h.push(nextKey);
    // Step 2: m0 sends with the new key first; the others still send with the old one.
    held[0] = [nextKey, oldKey];
    const received = b.snapshot().counters.packetsReceived;
    await waitUntil("m1 receives more packets", () => b.snapshot().counters.packetsReceived > received + 10);
    expect(everyoneAlive()).toBe(true);
    // ...then every member does, and packets sealed with the old key drain.
    for (let i = 0; i < held.length; i++) held[i] = [nextKey, oldKey];
    const receivedBoth = gs.map((g) => g.snapshot().counters.packetsReceived);
    await waitUntil("every member receives more packets, all under the new key", () => gs.every((g, i) => g.snapshot().counters.packetsReceived > (receivedBoth[i] ?? 0) + 10));
    // Step 3: the old key is dropped everywhere.
    for (let i = 0; i < held.length; i++) held[i] = [nextKey];
    const receivedNew = a.snapshot().counters.packetsReceived;
    await waitUntil("m0 receives more packets under the new key", () => a.snapshot().counters.packetsReceived > receivedNew + 10);
    expect(everyoneAlive()).toBe(true);
    for (const g of gs) expect(g.snapshot().dropped.decrypt_failed).toBe(0);
  }, 30_000);
});

describe("senders refused for their key", () => {
  test("an address is one form: IPv4 mapped into IPv6 as itself, IPv6 compressed and in lower case, a zone id left as it is", () => {
    expect(canonicalIp("::ffff:127.0.0.1")).toBe("127.0.0.1");
    expect(canonicalIp("10.0.0.1")).toBe("10.0.0.1");
    expect(canonicalIp("0:0:0:0:0:0:0:1")).toBe("::1");
    expect(canonicalIp("FD00:0::A")).toBe("fd00::a");
    expect(canonicalIp("fe80::1%eth0")).toBe("fe80::1%eth0");
  });

  test("a flood of refused packets from many source ports is remembered and logged within bounds, and the member among them stays named", async () => {
    const lines: string[] = [];
    const logger: Logger = { ...silentLogger, warn: (message: string) => void lines.push(message), child: () => logger };
    const key = newKey();
    const other = newKey();
    const [port0, port1] = await freePorts(2);
    if (port0 === undefined || port1 === undefined) throw new Error("ports");
    const members = [{ id: "m0", peer: `127.0.0.1:${port0}` }, { id: "m1", peer: `127.0.0.1:${port1}` }];
    const g = createGossip({ self: "m0", listen: { host: "127.0.0.1", port: port0 }, logger, timings, keyFor: () => sharedKey(() => [key]) });
    await g.start();
    g.setClusterId("udp-test");
    g.setSource({ members: () => members, facts: () => facts(port0) });
    started.push(g);
    // m1 holds another key: refused, named.
    const m1 = createGossip({ self: "m1", listen: { host: "127.0.0.1", port: port1 }, logger: silentLogger, timings, keyFor: () => sharedKey(() => [other]) });
    await m1.start();
    m1.setClusterId("udp-test");
    m1.setSource({ members: () => members, facts: () => facts(port1) });
    started.push(m1);
    await waitUntil("m1 refused at m0", () => g.snapshot().refused.some((r) => r.member === "m1"));
    // Forty strays, each from a port of its own, sealed with yet another key (the cluster id is all they need to reach the check).
    const forged = encodePacket({ type: "ping", seq: 1, from: "m1", updates: [], facts: [] }, "udp-test", sharedKey(() => [newKey()]));
    const sockets = await Promise.all(Array.from({ length: 40 }, () => Bun.udpSocket({ hostname: "127.0.0.1", port: 0 })));
    try {
      for (let round = 0; round < 3; round++) for (const s of sockets) s.send(forged, port0, "127.0.0.1");
      await waitUntil("the strays refused", () => g.snapshot().dropped.decrypt_failed >= 100);
    } finally {
      for (const s of sockets) s.close();
    }
    await waitUntil("m1 refused again after the flood", () => (g.snapshot().refused.find((r) => r.member === "m1")?.count ?? 0) > 2);
    const refused = g.snapshot().refused;
    expect(refused.length).toBeLessThanOrEqual(16);
    expect(refused.filter((r) => r.member === "m1")).toHaveLength(1);
    // Each sender at most once a minute, and at most eight lines a minute in all.
    const refusalLines = lines.filter((l) => l.includes("fail authentication"));
    expect(refusalLines.length).toBeLessThanOrEqual(8);
    expect(refusalLines.filter((l) => l.includes("(m1)"))).toHaveLength(1);
  }, 30_000);
});

describe("a refused member heard before this node read its members", () => {
  test("is logged once they are read, by its name, not first by its address alone", async () => {
    const lines: string[] = [];
    const logger: Logger = { ...silentLogger, warn: (message: string) => void lines.push(message), child: () => logger };
    const [port0, port1] = await freePorts(2);
    if (port0 === undefined || port1 === undefined) throw new Error("ports");
    const members = [{ id: "m0", peer: `127.0.0.1:${port0}` }, { id: "m1", peer: `127.0.0.1:${port1}` }];
    // m0 has its cluster id (it decodes packets) but not yet its members, as a node starting.
    const g = createGossip({ self: "m0", listen: { host: "127.0.0.1", port: port0 }, logger, timings, keyFor: () => sharedKey(() => [newKey()]) });
    await g.start();
    g.setClusterId("udp-test");
    started.push(g);
    const m1 = createGossip({ self: "m1", listen: { host: "127.0.0.1", port: port1 }, logger: silentLogger, timings, keyFor: () => sharedKey(() => [newKey()]) });
    await m1.start();
    m1.setClusterId("udp-test");
    m1.setSource({ members: () => members, facts: () => facts(port1) });
    started.push(m1);
    await waitUntil("m1's packets refused at m0", () => g.snapshot().dropped.decrypt_failed > 0);
    g.setSource({ members: () => members, facts: () => facts(port0) });
    await waitUntil("the refusal logged with m1's name", () => lines.some((l) => l.includes("fail authentication") && l.includes("(m1)")));
    expect(lines.filter((l) => l.includes("fail authentication"))).toHaveLength(1);
  }, 30_000);
});

describe("a sender this member does not know", () => {
  test("its authenticated packet is dropped, and the peer address it gives for itself is handed to the node", async () => {
    const [p0, p1] = await freePorts(2);
    if (p0 === undefined || p1 === undefined) throw new Error("ports");
    const strangers: [string, string][] = [];
    const a = createGossip({ self: "m0", listen: { host: "127.0.0.1", port: p0 }, logger: silentLogger, timings });
    await a.start();
    a.setClusterId("udp-test");
    // m0 knows only itself; m1 (added while m0 was away, say) knows both.
    a.setSource({ members: () => [{ id: "m0", peer: `127.0.0.1:${p0}` }], facts: () => facts(p0), stranger: (id, peer) => void strangers.push([id, peer]) });
    started.push(a);
    const b = createGossip({ self: "m1", listen: { host: "127.0.0.1", port: p1 }, logger: silentLogger, timings });
    await b.start();
    b.setClusterId("udp-test");
    b.setSource({ members: () => [{ id: "m0", peer: `127.0.0.1:${p0}` }, { id: "m1", peer: `127.0.0.1:${p1}` }], facts: () => facts(p1) });
    started.push(b);
    await waitUntil("m0 told of m1", () => strangers.length > 0);
    expect(strangers[0]).toEqual(["m1", `127.0.0.1:${p1}`]);
    expect(a.snapshot().dropped.unknown_member).toBeGreaterThan(0);
    expect(a.snapshot().members.some((m) => m.id === "m1")).toBe(false);
  }, 30_000);
});

describe("what a member says of itself", () => {
  test("its own record in a snapshot is its facts as they are now, not as last gossiped", async () => {
    const [port] = await freePorts(1);
    if (port === undefined) throw new Error("port");
    let recovery = "joining";
    const g = createGossip({ self: "m0", listen: { host: "127.0.0.1", port }, logger: silentLogger, timings });
    await g.start();
    g.setClusterId("udp-test");
    g.setSource({ members: () => [{ id: "m0", peer: `127.0.0.1:${port}` }], facts: () => ({ ...facts(port), recovery }) });
    started.push(g);
    const ownRecovery = (): string | undefined => g.snapshot().members.find((m) => m.id === "m0")?.record?.facts.recovery;
    await waitUntil("m0's own record", () => ownRecovery() !== undefined);
    // A node that has just become healthy says so at once (its /health already does), not a gossip period later.
    recovery = "healthy";
    expect(ownRecovery()).toBe("healthy");
  }, 30_000);
});
