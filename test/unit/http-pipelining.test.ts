// Pipelined requests on one connection (src/http/server.ts): each is served once the one ahead
// of it is answered, in the order sent, as RFC 9112 asks of requests that are not all safe.
// Served by the real listener on 127.0.0.1 with a stand-in app.

import { afterEach, expect, test } from "bun:test";
import * as net from "node:net";
import { listen, type BoundServer } from "../../src/http/server.ts";

const servers: BoundServer[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.stop();
});

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
