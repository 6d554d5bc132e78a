// Mutual TLS on the peer port over real sockets with certificates openssl makes: members whose
// certificates the cluster CA signed and name them (URI svc://<id> or a DNS name) talk, bulk
// messages (snapshot chunks) included; a certificate from another CA, an expired one, one that
// names no member, none at all, or a member's certificate used to speak for another member is
// refused at the handshake and counted; a dialer refuses a peer whose certificate does not
// name the node it dialled. Each refusal is counted by reason, and shows in /metrics. Rotated
// certificates and CA bundles are used by new handshakes both ways while established
// connections stay up.

import { afterAll, afterEach, describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tls from "node:tls";
import { MetricsRegistry } from "../../src/metrics/index.ts";
import { registerTransportMetrics } from "../../src/node/transport-metrics.ts";
import { createTransport, type PeerTls, type Transport } from "../../src/transport/index.ts";
import { silentLogger, type Logger } from "../../src/util/index.ts";
import { makeCa, makeLeaf, type CertFiles } from "../lib/certs.ts";

const HOST = "127.0.0.1";
const dir = fs.mkdtempSync(join(tmpdir(), "svc-peer-tls-"));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
const ca = makeCa(dir, "cluster-ca");
const otherCa = makeCa(dir, "other-ca");
const caPem = fs.readFileSync(ca.cert, "utf8");

function tlsOf(files: CertFiles, caText = caPem): PeerTls {
  return { cert: fs.readFileSync(files.cert, "utf8"), key: fs.readFileSync(files.key, "utf8"), ca: caText };
}

const certs = {
  a: makeLeaf(dir, "a", ca),
  b: makeLeaf(dir, "b", ca, { san: "DNS:b" }),
  c: makeLeaf(dir, "c", ca),
  stranger: makeLeaf(dir, "stranger", ca),
  foreign: makeLeaf(dir, "foreign", otherCa, { san: "URI:svc://d" }),
  expired: makeLeaf(dir, "expired", ca, { days: -1, san: "URI:svc://d" }),
  d: makeLeaf(dir, "d", ca),
};

interface Node {
  readonly id: string;
  readonly transport: Transport;
  readonly received: string[];
  readonly warnings: string[];
  readonly address: string;
}

const cleanups: (() => void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) c();
  await Bun.sleep(10);
});

function logger(warnings: string[]): Logger {
  const l: Logger = { ...silentLogger, warn: (m) => warnings.push(m), error: (m) => warnings.push(m), child: () => l };
  return l;
}

function start(id: string, tls: PeerTls | undefined): Node {
  const received: string[] = [];
  const warnings: string[] = [];
  const transport = createTransport({
    nodeId: id, clusterId: "c1", listen: { hostname: HOST, port: 0 }, logger: logger(warnings),
    onMessage: (from, _type, payload) => received.push(`${from}:${payload.byteLength > 64 ? `${payload.byteLength} bytes` : new TextDecoder().decode(payload)}`),
    reconnectDelayMsMin: 10, reconnectDelayMsMax: 100,
    ...(tls === undefined ? {} : { tls }),
  });
  cleanups.push(() => transport.close());
  const port = transport.start();
  return { id, transport, received, warnings, address: `${HOST}:${port}` };
}

async function waitFor(what: string, condition: () => boolean, deadlineMs = 15_000): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await Bun.sleep(5);
  }
}

/** `members` know each other; `from` (not necessarily a member) dials `to` as `asId`. */
function peers(nodes: readonly Node[], extra: Record<string, string> = {}): void {
  const map = { ...Object.fromEntries(nodes.map((n) => [n.id, n.address])), ...extra };
  for (const n of nodes) n.transport.setPeers(map);
}

const send = (from: Node, to: string, text: string): boolean => from.transport.send(to, 0x20, new TextEncoder().encode(text));

describe("peer transport: mutual TLS", () => {
  test("members with certificates from the cluster CA exchange messages, snapshot-sized bulk ones too", async () => {
    const nodes = (["a", "b", "c"] as const).map((id) => start(id, tlsOf(certs[id])));
    peers(nodes);
    const [a, b, c] = nodes as [Node, Node, Node];
    await waitFor("a reaches b and c", () => {
      send(a, "b", "hello b");
      send(a, "c", "hello c");
      return b.received.includes("a:hello b") && c.received.includes("a:hello c");
    });
    expect(a.transport.send("b", 0x21, new Uint8Array(3 * 1024 * 1024).fill(7), { bulk: true })).toBe(true);
    await waitFor("the bulk message arrives whole", () => b.received.includes(`a:${3 * 1024 * 1024} bytes`));
    send(c, "a", "from c");
    await waitFor("c reaches a", () => a.received.includes("c:from c"));
    expect(a.transport.stats().totals.tlsRefusals).toBe(0);
  });

  for (const [what, files, reason] of [
    ["a certificate from another CA", certs.foreign, "unknown_ca"],
    ["an expired certificate", certs.expired, "expired"],
    ["a certificate that names no member", certs.stranger, "not_a_member"],
  ] as const) {
    test(`${what} is refused at the TLS handshake and counted as ${reason}; its messages never arrive`, async () => {
      const a = start("a", tlsOf(certs.a));
      // The intruder trusts the cluster CA, so only the acceptor's check stands between them.
      const intruder = start("d", tlsOf(files));
      peers([a], { d: intruder.address });
      intruder.transport.setPeers({ a: a.address });
      await waitFor("a refusal counted", () => a.transport.stats().totals.tlsRefusals >= 1);
      for (let i = 0; i < 20; i++) send(intruder, "a", "let me in");
      await Bun.sleep(100);
      expect(a.received).toEqual([]);
      expect(a.warnings.join("\n")).toContain("at the TLS handshake");
      expect(a.transport.stats().tlsRefusals[reason]).toBeGreaterThanOrEqual(1);
    });
  }

  test("a dialer without a certificate, or speaking plain TCP, gets nowhere", async () => {
    const a = start("a", tlsOf(certs.a));
    const plain = start("d", undefined);
    peers([a], { d: plain.address });
    plain.transport.setPeers({ a: a.address });
    for (let i = 0; i < 10; i++) send(plain, "a", "plain");
    await waitFor("the plain dialer's handshake fails", () => (plain.transport.stats().totals.dialFailures ?? 0) >= 1);
    expect(a.received).toEqual([]);
  });

  test("a member's certificate does not let it speak for another member", async () => {
    const a = start("a", tlsOf(certs.a));
    const b = start("b", tlsOf(certs.b));
    // c is a member, but the process dialling as c holds b's certificate.
    const impostor = start("c", tlsOf(certs.b));
    peers([a, b], { c: impostor.address });
    impostor.transport.setPeers({ a: a.address, b: b.address });
    await waitFor("the impostor's handshake refused and counted", () => a.transport.stats().totals.tlsRefusals >= 1);
    for (let i = 0; i < 10; i++) send(impostor, "a", "i am c");
    await Bun.sleep(100);
    expect(a.received).toEqual([]);
    expect(a.transport.stats().tlsRefusals.wrong_peer).toBeGreaterThanOrEqual(1);
  });

  test("a dialer refuses a peer whose certificate does not name the node it meant to reach", async () => {
    const a = start("a", tlsOf(certs.a));
    const b = start("b", tlsOf(certs.b));
    // a believes c lives at b's address: b's certificate names b, not c.
    a.transport.setPeers({ a: a.address, c: b.address });
    b.transport.setPeers({ a: a.address, b: b.address });
    send(a, "c", "meant for c");
    await waitFor("the refusal counted at the dialer", () => (a.transport.stats().peers["c"]?.tlsRefusals ?? 0) >= 1);
    expect(b.received).toEqual([]);
    expect(a.warnings.join("\n")).toContain('names "b", not "c"');
  });

  test("a dialer refuses a peer serving a certificate from another CA", async () => {
    const a = start("a", tlsOf(certs.a));
    const foreign = start("d", tlsOf(certs.foreign, fs.readFileSync(otherCa.cert, "utf8")));
    a.transport.setPeers({ a: a.address, d: foreign.address });
    send(a, "d", "hello?");
    await waitFor("the refusal counted at the dialer", () => (a.transport.stats().peers["d"]?.tlsRefusals ?? 0) >= 1);
    expect(a.warnings.join("\n")).toContain("at the TLS handshake: its certificate was refused");
  });

  test("a refusal shows in /metrics as tensor_chain_peer_tls_refusals_total by reason", async () => {
    const a = start("a", tlsOf(certs.a));
    const registry = new MetricsRegistry();
    registerTransportMetrics(registry, a.transport);
    expect(registry.render()).toContain('tensor_chain_peer_tls_refusals_total{reason="unknown_ca"} 0');
    const intruder = start("d", tlsOf(certs.foreign));
    peers([a], { d: intruder.address });
    intruder.transport.setPeers({ a: a.address });
    await waitFor("a refusal counted", () => (a.transport.stats().tlsRefusals.unknown_ca ?? 0) >= 1);
    expect(registry.render()).toMatch(/tensor_chain_peer_tls_refusals_total\{reason="unknown_ca"\} [1-9]/);
  });

  test("rotated certificates and CA bundle are used by new handshakes without a restart; established connections stay up", async () => {
    const a = start("a", tlsOf(certs.a));
    const b = start("b", tlsOf(certs.b));
    peers([a, b]);
    await waitFor("a reaches b", () => {
      send(a, "b", "before");
      return b.received.includes("a:before");
    });
    const newCa = makeCa(dir, "rotated-ca");
    const bundle = caPem + fs.readFileSync(newCa.cert, "utf8");
    const rotatedA = makeLeaf(dir, "a-rotated", newCa, { san: "URI:svc://a" });
    const onlyNew = makeLeaf(dir, "c-new-ca", newCa, { san: "URI:svc://c" });
    const probe = makeLeaf(dir, "probe", newCa, { san: "URI:svc://b" });

    /**
     * A TLS client with a certificate only the new CA signed: the CN of the certificate a
     * serves, and whether a kept the connection (a refuses a client certificate after the
     * client's side of the handshake is done, by closing).
     */
    const probeA = (): Promise<string> => new Promise((resolve, reject) => {
      const [host, port] = a.address.split(":");
      const socket = tls.connect({
        host, port: Number(port), ca: bundle, cert: fs.readFileSync(probe.cert, "utf8"), key: fs.readFileSync(probe.key, "utf8"), checkServerIdentity: () => undefined,
      }, () => {
        const cn = String(socket.getPeerCertificate().subject?.CN ?? "");
        const timer = setTimeout(() => {
          socket.destroy();
          resolve(`${cn} kept`);
        }, 500);
        socket.once("close", () => {
          clearTimeout(timer);
          resolve(`${cn} closed`);
        });
      });
      socket.once("error", () => {});
      socket.once("close", () => resolve("closed"));
      setTimeout(() => reject(new Error("probe timed out")), 5_000);
    });
    // Before the rotation, a client signed only by the new CA is refused.
    expect(await probeA()).not.toEndWith("kept");
    await waitFor("the refusal counted", () => a.transport.stats().tlsRefusals.unknown_ca >= 1);

    b.transport.setTls(tlsOf(certs.b, bundle));
    a.transport.setTls(tlsOf(rotatedA, bundle));
    // The established connection carried on.
    send(a, "b", "during");
    await waitFor("the established connection still delivers", () => b.received.includes("a:during"));
    expect(a.transport.stats().peers["b"]?.reconnects).toBe(0);

    // A new handshake is served the new certificate, and a client of the new CA is kept.
    expect(await probeA()).toBe("a-rotated kept");
    // A peer whose certificate only the new CA signed is a member now.
    const c = start("c", tlsOf(onlyNew, bundle));
    peers([a, b, c]);
    await waitFor("c reaches a and b", () => {
      send(c, "a", "from c");
      send(c, "b", "from c");
      return a.received.includes("c:from c") && b.received.includes("c:from c");
    });
    // a's dials present its new certificate, which c (trusting the new CA only through the bundle) accepts.
    await waitFor("a reaches c with its new certificate", () => {
      send(a, "c", "to c");
      return c.received.includes("a:to c");
    });
  });
});

describe("why a peer's TLS handshake was refused", () => {
  test("no certificate sent is told as such, though the error's code is a bare EPROTO (it was counted as handshake_failed)", async () => {
    const { tlsErrorReason } = await import("../../src/transport/_peer-tls.ts");
    const noCert = Object.assign(new Error("error:100000c0:SSL routines:OPENSSL_internal:PEER_DID_NOT_RETURN_A_CERTIFICATE"), { code: "EPROTO" });
    expect(tlsErrorReason(noCert)).toBe("no_certificate");
    expect(tlsErrorReason(null)).toBe("no_certificate");
    expect(tlsErrorReason(Object.assign(new Error("certificate has expired"), { code: "CERT_HAS_EXPIRED" }))).toBe("expired");
    expect(tlsErrorReason(Object.assign(new Error("error:...:WRONG_VERSION_NUMBER"), { code: "EPROTO" }))).toBe("handshake_failed");
  });
});
