// While a node starts (its ports bound, its state not loaded yet), /health answers in its own
// shape and every other request gets the error contract's shape: a code, a hint, Retry-After.
// The node answered every request with the /health body, which carries no code.

import { describe, expect, test } from "bun:test";
import { startingResponse } from "../../src/http/index.ts";

describe("a request while the node starts", () => {
  test("/health says the node is starting", async () => {
    const r = startingResponse(new Request("http://127.0.0.1:7878/health"));
    expect(r.status).toBe(503);
    expect(await r.json()).toEqual({ status: "unavailable", recovery: "starting" });
  });

  for (const [method, path] of [["POST", "/v1/execute"], ["POST", "/v1/query"], ["GET", "/metrics"], ["POST", "/admin/snapshot"]] as const) {
    test(`${method} ${path} gets 503 RECOVERING with a hint and Retry-After: nothing was done`, async () => {
      const r = startingResponse(new Request(`http://127.0.0.1:7878${path}`, { method, ...(method === "POST" ? { body: "{}" } : {}) }));
      expect(r.status).toBe(503);
      expect(r.headers.get("retry-after")).toBe("1");
      const body = (await r.json()) as { error: { code: string; message: string; hint: string } };
      expect(body.error.code).toBe("RECOVERING");
      expect(body.error.message).toContain("this node is starting");
      expect(body.error.hint).toContain("retry shortly");
    });
  }
});
