// The listener of the client and admin ports (src/http/server.ts): pipelined requests on one
// connection are served one after another, in the order sent, as RFC 9112 asks of requests that
// are not all safe; a request node:http does not hand to the app (CONNECT, an Expect it cannot
// meet) still gets a JSON error.
// Served by the real listener on 127.0.0.1 with a stand-in app.

import { afterEach, expect, test } from "bun:test";
import * as net from "node:net";
import { listen, type BoundServer } from "../../src/http/server.ts";

const servers: BoundServer[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.stop();
});

/** What the server sends on a new connection given `bytes`, until it closes it. */
async function exchange(port: number, bytes: string): Promise<string> {
  const socket = net.connect(port, "127.0.0.1");
  let received = "";
  socket.on("data", (chunk) => {
    received += chunk.toString("latin1");
  });
  const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
  socket.write(bytes);
  await closed;
  return received;
}

function post(path: string): string {
  return `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}`;
}

test("a pipelined request is served only after the one ahead of it on its connection is answered", async () => {
  const events: string[] = [];
  const app = {
    fetch: async (request: Request): Promise<Response> => {
      const path = new URL(request.url).pathname;
      events.push(`start ${path}`);
      // The first stands for a write that waits for its check before it enters the log.
      if (path === "/first") await Bun.sleep(200);
      events.push(`end ${path}`);
      return Response.json({ path });
    },
  };
  const server = await listen(app, { host: "127.0.0.1", port: 0, raw: "127.0.0.1:0" }, "client");
  servers.push(server);
  const socket = net.connect(server.port, "127.0.0.1");
  await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
  let received = "";
  const answered = new Promise<void>((resolve) => {
    socket.on("data", (chunk) => {
      received += chunk.toString("latin1");
      if (received.includes('{"path":"/third"}')) resolve();
    });
  });
  socket.write(post("/first") + post("/second") + post("/third"));
  await answered;
  socket.destroy();
  expect(events).toEqual(["start /first", "end /first", "start /second", "end /second", "start /third", "end /third"]);
  expect(received.indexOf('{"path":"/first"}')).toBeLessThan(received.indexOf('{"path":"/second"}'));
});

test("CONNECT is answered 405 with a JSON error and Allow, and its connection closed", async () => {
  const server = await listen({ fetch: () => Response.json({ ok: true }) }, { host: "127.0.0.1", port: 0, raw: "127.0.0.1:0" }, "client");
  servers.push(server);
  const received = await exchange(server.port, "CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n");
  expect(received.split("\r\n")[0]).toBe("HTTP/1.1 405 Method Not Allowed");
  expect(received.toLowerCase()).toContain("\r\nallow: get, head, post\r\n");
  const body = JSON.parse(received.slice(received.indexOf("\r\n\r\n") + 4)) as { error: { code: string; message: string } };
  expect(body.error.code).toBe("METHOD_NOT_ALLOWED");
  expect(body.error.message).toContain("CONNECT");
});

test("an Expect other than 100-continue is answered 417 with a JSON error, and its connection closed", async () => {
  let reached = 0;
  const server = await listen({ fetch: () => (reached++, Response.json({ ok: true })) }, { host: "127.0.0.1", port: 0, raw: "127.0.0.1:0" }, "client");
  servers.push(server);
  const received = await exchange(server.port, "POST /v1/execute HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Length: 2\r\n\r\n{}");
  expect(received.split("\r\n")[0]).toBe("HTTP/1.1 417 Expectation Failed");
  const body = JSON.parse(received.slice(received.indexOf("\r\n\r\n") + 4)) as { error: { code: string; message: string } };
  expect(body.error).toMatchObject({ code: "EXPECTATION_FAILED", message: expect.stringContaining("200-ok") });
  expect(reached).toBe(0);
});

test("a request target in absolute form is served by its path and query, its host ignored", async () => {
  const seen: string[] = [];
  const server = await listen({ fetch: (r: Request) => (seen.push(r.url), Response.json({ ok: true })) }, { host: "127.0.0.1", port: 0, raw: "127.0.0.1:0" }, "client");
  servers.push(server);
  const received = await exchange(server.port, "GET http://elsewhere.example:99/health?x=1 HTTP/1.1\r\nHost: elsewhere.example\r\nConnection: close\r\n\r\n");
  expect(received.split("\r\n")[0]).toBe("HTTP/1.1 200 OK");
  expect(seen).toEqual([`http://127.0.0.1:${server.port}/health?x=1`]);
});
