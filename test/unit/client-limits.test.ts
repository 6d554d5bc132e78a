// Per-client limits on an HTTP port ([limits] client_requests_per_second and
// client_connections_max): past either, 429 TOO_MANY_REQUESTS with Retry-After, the
// connection closed after the answer; off unless configured; a member's relayed requests pass,
// and a client that only claims to be a member does not.
// Served by the real listener on 127.0.0.1 with a stand-in app.

import { afterEach, describe, expect, test } from "bun:test";
import * as net from "node:net";
import { ClientLimiter } from "../../src/http/client-limits.ts";
import { relayProof } from "../../src/http/forward.ts";
import { InFlightBytes } from "../../src/http/in-flight.ts";
import { listen, type BoundServer } from "../../src/http/server.ts";
import { SvcError } from "../../src/util/errors.ts";

const servers: BoundServer[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.stop();
});

const app = { fetch: () => Response.json({ ok: true }) };
const clusterId = "c-0123";

async function serve(limits: { requestsPerSecond: number; connectionsMax: number; memberHosts?: string[] }, nowMs?: () => number): Promise<string> {
  const limiter = new ClientLimiter({ ...limits, memberHosts: new Set(limits.memberHosts ?? []), clusterId: () => clusterId }, nowMs);
  const server = await listen(app, { host: "127.0.0.1", port: 0, raw: "127.0.0.1:0" }, "client", undefined, limiter);
  servers.push(server);
  return `http://127.0.0.1:${server.port}`;
}

/** One request on its own connection. */
async function get(base: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${base}/v1/query`, { method: "POST", body: "{}", headers: { ...headers, connection: "close" }, keepalive: false });
}

/** Raw keep-alive connections, each sending one request and reading the status line. */
async function statusOnConnection(port: number): Promise<{ status: string; socket: net.Socket }> {
  const socket = net.connect(port, "127.0.0.1");
  await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
  const status = await new Promise<string>((resolve) => {
    socket.once("data", (chunk) => resolve(chunk.toString("latin1").split("\r\n")[0] ?? ""));
    socket.write("POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}");
  });
  return { status, socket };
}

/**
 * A write of a 4 MiB body sent whole before the client reads, as most clients do (Python's among
 * them). A connection closed on an unread body is reset by the kernel, and such a client sees a
 * broken pipe, which reads as "outcome unknown", not the answer.
 */
async function answerAfterSendingAll(port: number): Promise<{ status: string; text: string; errors: string[] }> {
  const body = JSON.stringify({ statements: [{ sql: "INSERT INTO t VALUES (?)", params: ["x".repeat(4 * 1024 * 1024)] }] });
  const socket = net.connect(port, "127.0.0.1");
  const errors: string[] = [];
  socket.on("error", (e) => errors.push(String((e as NodeJS.ErrnoException).code ?? e.message)));
  await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
  // It reads only once all is sent, and a moment later: a reset has arrived by then.
  socket.pause();
  await new Promise<void>((resolve) => socket.write(`POST /v1/execute HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n${body}`, () => resolve()));
  await Bun.sleep(300);
  const text = await new Promise<string>((resolve) => {
    let received = "";
    socket.on("data", (chunk) => (received += chunk.toString("latin1")));
    socket.on("close", () => resolve(received));
    socket.resume();
  });
  return { status: text.split("\r\n")[0] ?? "", text, errors };
}

describe("per-client limits", () => {
  test("past client_requests_per_second, requests get 429 with Retry-After, and pass again once the bucket refills", async () => {
    let now = 0;
    const base = await serve({ requestsPerSecond: 5, connectionsMax: 0 }, () => now);
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) statuses.push((await get(base)).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
    const refused = await get(base);
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toBe("1");
    const body = (await refused.json()) as { error: { code: string; message: string; limit: string } };
    expect(body.error.code).toBe("TOO_MANY_REQUESTS");
    expect(body.error.message).toContain("more than 5 requests a second");
    expect(body.error.limit).toBe("rate");
    now += 1000;
    expect((await get(base)).status).toBe(200);
  });

  test("past client_connections_max, a request on a further connection gets 429 and that connection closes", async () => {
    const base = await serve({ requestsPerSecond: 0, connectionsMax: 2 });
    const port = Number(new URL(base).port);
    const first = await statusOnConnection(port);
    const second = await statusOnConnection(port);
    const third = await statusOnConnection(port);
    expect([first.status, second.status, third.status]).toEqual(["HTTP/1.1 200 OK", "HTTP/1.1 200 OK", "HTTP/1.1 429 Too Many Requests"]);
    await new Promise<void>((resolve) => (third.socket.destroyed ? resolve() : third.socket.once("close", () => resolve())));
    // One of the two closes: a new connection is within the cap again.
    first.socket.destroy();
    let again = "";
    for (let i = 0; i < 100 && again !== "HTTP/1.1 200 OK"; i++) {
      const c = await statusOnConnection(port);
      again = c.status;
      c.socket.destroy();
      if (again !== "HTTP/1.1 200 OK") await Bun.sleep(10);
    }
    expect(again).toBe("HTTP/1.1 200 OK");
    second.socket.destroy();
  });

  test("a refused request whose client sends its whole body before reading gets the 429, not a reset", async () => {
    const base = await serve({ requestsPerSecond: 1, connectionsMax: 0 });
    expect((await get(base)).status).toBe(200);
    const answer = await answerAfterSendingAll(Number(new URL(base).port));
    expect({ status: answer.status, errors: answer.errors }).toEqual({ status: "HTTP/1.1 429 Too Many Requests", errors: [] });
    expect(answer.text).toContain('"code":"TOO_MANY_REQUESTS"');
  });

  test("so does one on a connection past client_connections_max", async () => {
    const base = await serve({ requestsPerSecond: 0, connectionsMax: 1 });
    const port = Number(new URL(base).port);
    const first = await statusOnConnection(port);
    const answer = await answerAfterSendingAll(port);
    first.socket.destroy();
    expect({ status: answer.status, errors: answer.errors }).toEqual({ status: "HTTP/1.1 429 Too Many Requests", errors: [] });
    expect(answer.text).toContain('"limit":"connections"');
  });

  test("and one refused for want of memory gets the 503 MEMORY_BACKPRESSURE", async () => {
    const inFlight = new InFlightBytes({ paths: ["/v1/execute"], bytesMax: 1000, rssBytesMax: 0, maxMemoryMb: 128, collectEveryBytes: 0 });
    const server = await listen(app, { host: "127.0.0.1", port: 0, raw: "127.0.0.1:0" }, "client", undefined, undefined, inFlight);
    servers.push(server);
    // Another write's body is held: this one is not alone, and is past the share.
    const held = inFlight.admit(1000);
    const answer = await answerAfterSendingAll(server.port);
    if (!(held instanceof SvcError)) held.release();
    expect({ status: answer.status, errors: answer.errors }).toEqual({ status: "HTTP/1.1 503 Service Unavailable", errors: [] });
    expect(answer.text).toContain('"code":"MEMORY_BACKPRESSURE"');
  });

  test("with no limits configured, nothing is refused", async () => {
    const base = await serve({ requestsPerSecond: 0, connectionsMax: 0 });
    const statuses = await Promise.all(Array.from({ length: 50 }, () => get(base).then((r) => r.status)));
    expect(new Set(statuses)).toEqual(new Set([200]));
  });

  test("a request a member relays (x-svc-forwarded-by with its relay proof, from a member's host) is not limited", async () => {
    let now = 0;
    const base = await serve({ requestsPerSecond: 1, connectionsMax: 0, memberHosts: ["127.0.0.1"] }, () => now);
    const headers = { "x-svc-forwarded-by": "node2", "x-svc-relay-proof": relayProof({ nodeId: "node2", clusterId }) };
    const relayed = await Promise.all(Array.from({ length: 5 }, () => get(base, headers).then((r) => r.status)));
    expect(relayed).toEqual([200, 200, 200, 200, 200]);
    expect((await get(base)).status).toBe(200);
    expect((await get(base)).status).toBe(429);
  });

  test("a client on a member's host that sets x-svc-forwarded-by itself is limited: without a member's relay proof, or with another node's or cluster's", async () => {
    const now = 0;
    const base = await serve({ requestsPerSecond: 1, connectionsMax: 0, memberHosts: ["127.0.0.1"] }, () => now);
    const forged: Record<string, string>[] = [
      { "x-svc-forwarded-by": "node2" },
      { "x-svc-forwarded-by": "node2", "x-svc-relay-proof": "" },
      { "x-svc-forwarded-by": "node2", "x-svc-relay-proof": relayProof({ nodeId: "node3", clusterId }) },
      { "x-svc-forwarded-by": "node2", "x-svc-relay-proof": relayProof({ nodeId: "node2", clusterId: "another" }) },
    ];
    expect((await get(base)).status).toBe(200);
    for (const headers of forged) expect((await get(base, headers)).status).toBe(429);
  });
});
