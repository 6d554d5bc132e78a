// What `svc admin` says when a node takes the connection and gives no answer in time (a stopped
// or stuck process): an action it was sent may still take effect, so it is not reported as a
// node that could not be reached.

import { afterAll, expect, test } from "bun:test";
import { callNode } from "../../src/cli/_client.ts";

// Accepts connections and reads requests, never answers: a node stopped with SIGSTOP.
const silent = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
const base = `http://127.0.0.1:${silent.port}`;
afterAll(() => silent.stop(true));

async function failure(method: "GET" | "POST", path: string): Promise<string> {
  try {
    await callNode(base, method, path, undefined, 1_000);
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error("the call was answered");
}

test("an action that got no answer in time may still take effect, and says to check before repeating it", async () => {
  const message = await failure("POST", "/admin/pause-writes");
  expect(message).toStartWith(`the node at ${base} did not answer within 1 s: the request may still take effect there\n`);
  expect(message).toContain("`svc admin cluster-status`");
  expect(message).not.toContain("cannot reach");
});

test("a read that got no answer in time says the node did not answer, not that it is unreachable", async () => {
  for (const [method, path] of [["GET", "/admin/stats"], ["POST", "/admin/query"]] as const) {
    const message = await failure(method, path);
    expect(message).toStartWith(`the node at ${base} did not answer within 1 s\n`);
    expect(message).not.toContain("take effect");
  }
});

test("a refused connection is still one that never reached the node", async () => {
  const closed = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const url = `http://127.0.0.1:${closed.port}`;
  closed.stop(true);
  await expect(callNode(url, "POST", "/admin/pause-writes", undefined, 2_000)).rejects.toThrow(`cannot reach the node at ${url}`);
});
