// A follower forwarding to the leader tells the client whether its write may have happened:
// NOT_LEADER (503, not applied) only when the request provably never left the follower, and
// OUTCOME_UNKNOWN (504) once the leader may have read it. Fake leaders on 127.0.0.1 play
// each failure.

import { afterAll, afterEach, describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { errorResponse } from "../../src/http/errors.ts";
import { forwardToLeader } from "../../src/http/forward.ts";
import { clientApp } from "../../src/http/client-app.ts";
import { setRelayContext } from "../../src/http/relay-context.ts";
import type { SvcNode } from "../../src/node/index.ts";
import { SvcError } from "../../src/util/errors.ts";
import { type CertFiles, makeCa, makeLeaf } from "../lib/certs.ts";

const HOST = "127.0.0.1";
const writeBody = JSON.stringify({ statements: ["INSERT INTO t VALUES (1)"] });
const servers: net.Server[] = [];

afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

/** A fake leader that reads the whole request, then `onRequest` decides what it does to the connection. */
async function fakeLeader(onRequest: (socket: net.Socket) => void): Promise<{ address: string; requests: () => number }> {
  let requests = 0;
  const server = net.createServer((socket) => {
    let seen = "";
    socket.on("data", (chunk) => {
      seen += chunk.toString("latin1");
      const headerEnd = seen.indexOf("\r\n\r\n");
      const length = Number(/content-length: *(\d+)/i.exec(seen)?.[1] ?? 0);
      if (headerEnd >= 0 && seen.length >= headerEnd + 4 + length) {
        requests++;
        onRequest(socket);
      }
    });
    socket.on("error", () => {});
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, HOST, () => resolve()));
  const port = (server.address() as net.AddressInfo).port;
  return { address: `${HOST}:${port}`, requests: () => requests };
}

async function freePort(): Promise<number> {
  const listener = Bun.listen({ hostname: HOST, port: 0, socket: { data() {} } });
  const port = listener.port;
  listener.stop(true);
  return port;
}

/** What the client gets: the relayed answer, or the error the forward failed with, as the client API answers it. */
async function forward(address: string, path = "/v1/execute", from?: Request): Promise<{ status: number; code: string | undefined; hint: string | undefined; headers: Headers }> {
  let r: Response;
  try {
    r = await forwardToLeader(address, path, writeBody, { nodeId: "n2", clusterId: "c1" }, from);
  } catch (e) {
    r = errorResponse(e);
  }
  const body = (await r.json()) as { error?: { code?: string; hint?: string } };
  return { status: r.status, code: body.error?.code, hint: body.error?.hint, headers: r.headers };
}

describe("forwarding a write to the leader", () => {
  test("the leader's connection reset after it read the request: 504 OUTCOME_UNKNOWN, not a retryable 503", async () => {
    const leader = await fakeLeader((socket) => socket.resetAndDestroy());
    const answer = await forward(leader.address);
    expect(leader.requests()).toBe(1);
    expect(answer).toMatchObject({ status: 504, code: "OUTCOME_UNKNOWN" });
    expect(answer.headers.get("retry-after")).toBeNull();
  });

  test("the leader's connection closed after it read the request, with no answer: 504 OUTCOME_UNKNOWN", async () => {
    const leader = await fakeLeader((socket) => socket.end());
    const answer = await forward(leader.address);
    expect(leader.requests()).toBe(1);
    expect(answer).toMatchObject({ status: 504, code: "OUTCOME_UNKNOWN" });
  });

  test("an answer cut off in its body: 504 OUTCOME_UNKNOWN", async () => {
    const leader = await fakeLeader((socket) => {
      socket.write("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"results\":");
      setTimeout(() => socket.resetAndDestroy(), 20);
    });
    const answer = await forward(leader.address);
    expect(answer).toMatchObject({ status: 504, code: "OUTCOME_UNKNOWN" });
  });

  test("connection refused: the request never left, 503 NOT_LEADER", async () => {
    const answer = await forward(`${HOST}:${await freePort()}`);
    expect(answer).toMatchObject({ status: 503, code: "NOT_LEADER" });
    expect(answer.headers.get("retry-after")).toBe("1");
  });

  test("the leader's name does not resolve: the request never left, 503 NOT_LEADER", async () => {
    const answer = await forward("leader.invalid:7878");
    expect(answer).toMatchObject({ status: 503, code: "NOT_LEADER" });
  });

  test("the leader's own answer is relayed as it is", async () => {
    const leader = await fakeLeader((socket) => {
      const body = JSON.stringify({ error: { code: "WRITES_PAUSED", message: "paused" } });
      socket.end(`HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
    });
    expect(await forward(leader.address)).toMatchObject({ status: 503, code: "WRITES_PAUSED" });
  });

  test("a forwarded read whose connection resets is retryable: 503 NOT_LEADER (a read applies nothing)", async () => {
    const leader = await fakeLeader((socket) => socket.resetAndDestroy());
    expect(await forward(leader.address, "/v1/query")).toMatchObject({ status: 503, code: "NOT_LEADER" });
  });
});

describe("forwarding a write to the leader over TLS", () => {
  const dir = fs.mkdtempSync(join(tmpdir(), "svc-forward-tls-"));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
  const ca = makeCa(dir, "ca");
  const follower = makeLeaf(dir, "n2", ca);

  /** A leader serving TLS with `cert` that counts the requests it reads. */
  function tlsLeader(cert: CertFiles): { address: string; requests: () => number; stop: () => void } {
    let requests = 0;
    const server = Bun.serve({
      hostname: HOST,
      port: 0,
      tls: { cert: fs.readFileSync(cert.cert, "utf8"), key: fs.readFileSync(cert.key, "utf8") },
      fetch: () => {
        requests++;
        return Response.json({ results: [], index: 1 });
      },
    });
    return { address: `${HOST}:${server.port}`, requests: () => requests, stop: () => server.stop(true) };
  }

  /** A client write as the follower's guard leaves it: relayed over TLS, trusting `ca`. */
  function writeOverTls(): Request {
    const request = new Request("https://localhost/v1/execute", { method: "POST", body: writeBody });
    const pem = (path: string) => fs.readFileSync(path, "utf8");
    setRelayContext(request, { authorization: null, tls: { ca: pem(ca.cert), cert: pem(follower.cert), key: pem(follower.key) } });
    return request;
  }

  function selfSigned(): CertFiles {
    const files = { cert: join(dir, "self.crt"), key: join(dir, "self.key") };
    const r = Bun.spawnSync(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", files.key,
      "-out", files.cert, "-days", "30", "-subj", "/CN=self", "-addext", "subjectAltName=IP:127.0.0.1"], { stdout: "pipe", stderr: "pipe" });
    if (r.exitCode !== 0) throw new Error(r.stderr.toString());
    return files;
  }

  const refused: ReadonlyArray<readonly [string, () => CertFiles]> = [
    ["has expired", () => makeLeaf(dir, "expired", ca, { days: -1 })],
    ["is signed by a CA this node does not trust", () => makeLeaf(dir, "foreign", makeCa(dir, "other-ca"))],
    ["is self-signed", selfSigned],
    ["names another host", () => makeLeaf(dir, "elsewhere", ca, { san: "DNS:elsewhere.example" })],
  ];

  for (const [what, cert] of refused) {
    test(`the leader's certificate ${what}: the request never left, 503 NOT_LEADER`, async () => {
      const leader = tlsLeader(cert());
      try {
        const answer = await forward(leader.address, "/v1/execute", writeOverTls());
        expect(answer).toMatchObject({ status: 503, code: "NOT_LEADER" });
        expect(answer.hint).toContain("refused the TLS certificate");
        expect(leader.requests()).toBe(0);
      } finally {
        leader.stop();
      }
    });
  }

  test("a leader whose certificate verifies gets the write, and its answer is relayed", async () => {
    const leader = tlsLeader(makeLeaf(dir, "n1", ca));
    try {
      expect(await forward(leader.address, "/v1/execute", writeOverTls())).toMatchObject({ status: 200 });
      expect(leader.requests()).toBe(1);
    } finally {
      leader.stop();
    }
  });
});

describe("a forward answered NOT_LEADER", () => {
  /** A former leader that answers every request 503 NOT_LEADER naming `leader`. */
  function formerLeader(leader: string): { address: string; stop: () => void } {
    const server = Bun.serve({
      hostname: HOST,
      port: 0,
      fetch: () => errorResponse(new SvcError("NOT_LEADER", `this node is not the leader; ${leader} is`, { details: { leaderId: leader } })),
    });
    return { address: `${HOST}:${server.port}`, stop: () => server.stop(true) };
  }

  /** A follower whose first execute says another node leads (at `leaderAddress`); it leads from then on. */
  function follower(leaderAddress: string) {
    let calls = 0;
    const node = {
      config: { nodeId: "n2", raft: { electionTimeoutMs: 1000 } },
      metrics: { readsTotal: { inc() {} }, readErrorsTotal: { labels: () => ({ inc() {} }) } },
      status: () => ({ role: calls > 0 ? "leader" : "follower" }),
      execute: async () => {
        if (calls++ === 0) throw new SvcError("NOT_LEADER", "this node is not the leader; n1 is", { details: { leaderId: "n1", leaderClient: leaderAddress } });
        return { results: [{ rowsAffected: 1, lastInsertId: 7 }], index: 12 };
      },
    } as unknown as SvcNode;
    return { app: clientApp(node), calls: () => calls };
  }

  const write = () => new Request("http://localhost/v1/execute", { method: "POST", body: writeBody, headers: { "content-type": "application/json" } });

  test("naming this node, which leads now, is served here: the former leader did nothing with it", async () => {
    const former = formerLeader("n2");
    try {
      const { app, calls } = follower(former.address);
      const r = await app.handle(write());
      expect(r.status).toBe(200);
      expect(await r.json()).toEqual({ results: [{ rows_affected: 1, last_insert_id: 7 }], index: 12 });
      expect(calls()).toBe(2);
    } finally {
      former.stop();
    }
  });

  test("naming another node is relayed as it came", async () => {
    const former = formerLeader("n3");
    try {
      const { app, calls } = follower(former.address);
      const r = await app.handle(write());
      expect(r.status).toBe(503);
      expect(((await r.json()) as { error: { code: string; leader: string } }).error).toMatchObject({ code: "NOT_LEADER", leader: "n3" });
      expect(calls()).toBe(1);
    } finally {
      former.stop();
    }
  });
});
