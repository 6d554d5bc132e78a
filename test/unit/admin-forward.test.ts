// Cluster admin actions work from any node: a follower forwards them to the leader's admin port
// and relays the answer, with the client API's contract when the relay fails (NOT_LEADER when
// the request never left, OUTCOME_UNKNOWN once the leader may have read it). `svc admin` follows
// a NOT_LEADER answer that names the leader's admin address. Fake leaders on 127.0.0.1.

import { afterEach, describe, expect, test } from "bun:test";
import * as net from "node:net";
import { resolve } from "node:path";
import { adminApp } from "../../src/http/admin-app.ts";
import type { SvcNode } from "../../src/node/index.ts";
import { SvcError } from "../../src/util/errors.ts";

const HOST = "127.0.0.1";
const REPO = resolve(import.meta.dir, "../..");
const stops: (() => void)[] = [];

afterEach(() => {
  for (const stop of stops.splice(0)) stop();
});

interface Seen {
  method: string;
  path: string;
  body: string;
  forwardedBy: string | null;
}

/** An admin port that records each request and answers with `reply`. */
function fakeAdmin(reply: (seen: Seen) => Response): { address: string; seen: Seen[] } {
  const seen: Seen[] = [];
  const server = Bun.serve({
    hostname: HOST,
    port: 0,
    async fetch(request) {
      const url = new URL(request.url);
      const s = { method: request.method, path: `${url.pathname}${url.search}`, body: await request.text(), forwardedBy: request.headers.get("x-svc-forwarded-by") };
      seen.push(s);
      return reply(s);
    },
  });
  stops.push(() => server.stop(true));
  return { address: `${HOST}:${server.port}`, seen };
}

/** A fake leader that reads the whole request and then resets the connection. */
async function resettingLeader(): Promise<string> {
  const server = net.createServer((socket) => {
    let seen = "";
    socket.on("data", (chunk) => {
      seen += chunk.toString("latin1");
      if (seen.includes("\r\n\r\n")) socket.resetAndDestroy();
    });
    socket.on("error", () => {});
  });
  stops.push(() => server.close());
  await new Promise<void>((done) => server.listen(0, HOST, () => done()));
  return `${HOST}:${(server.address() as net.AddressInfo).port}`;
}

async function closedPort(): Promise<string> {
  const listener = Bun.listen({ hostname: HOST, port: 0, socket: { data() {} } });
  const port = listener.port;
  listener.stop(true);
  return `${HOST}:${port}`;
}

/** The parts of a follower node that the admin routes touch; its leader is node1 at `leaderAdmin`. */
function follower(leaderAdmin: string, local: { snapshots: number } = { snapshots: 0 }): SvcNode {
  const notLeader = (): SvcError => new SvcError("NOT_LEADER", "this node is not the leader; node1 is", {
    hint: "send the request to the leader",
    details: { leaderId: "node1", leaderClient: "127.0.0.1:1", leaderAdmin },
  });
  const fake = {
    config: { nodeId: "node2", raft: { electionTimeoutMs: 500 } },
    status: () => ({ role: "follower", leaderId: "node1" }),
    requireLeader: () => {
      throw notLeader();
    },
    memberAddresses: () => new Map([["node1", { id: "node1", peer: "127.0.0.1:2", client: "127.0.0.1:1", admin: leaderAdmin }]]),
    setWritesPaused: () => Promise.reject(notLeader()),
    addMember: () => Promise.reject(notLeader()),
    updateMember: () => Promise.reject(notLeader()),
    removeMember: () => Promise.reject(notLeader()),
    promoteMember: () => Promise.reject(notLeader()),
    transferLeader: () => Promise.reject(notLeader()),
    takeSnapshot: () => {
      local.snapshots++;
      return Promise.resolve({ index: 7, term: 2, dir: "/x/2-7", sizeBytes: 10, durationMs: 1 });
    },
  };
  // Only what the routes under test call is there; the rest of SvcNode is never reached.
  return fake as unknown as SvcNode;
}

async function post(app: ReturnType<typeof adminApp>, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: Record<string, unknown> }> {
  const r = await app.handle(new Request(`http://${HOST}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  }));
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
}

const okLeader = () => fakeAdmin((s) => Response.json({ relayed: s.path, writes_paused: true, index: 42, node_id: "node1" }));

describe("cluster admin actions sent to a follower", () => {
  test("pause-writes and resume-writes are forwarded to the leader's admin port and its answer relayed", async () => {
    const leader = okLeader();
    const app = adminApp(follower(leader.address));
    expect(await post(app, "/admin/pause-writes")).toEqual({ status: 200, body: { relayed: "/admin/pause-writes", writes_paused: true, index: 42, node_id: "node1" } });
    expect((await post(app, "/admin/resume-writes")).status).toBe(200);
    expect(leader.seen.map((s) => [s.method, s.path, s.forwardedBy])).toEqual([
      ["POST", "/admin/pause-writes", "node2"],
      ["POST", "/admin/resume-writes", "node2"],
    ]);
  });

  test("a snapshot goes to the leader with its query kept; ?local=true takes it on this node", async () => {
    const leader = okLeader();
    const local = { snapshots: 0 };
    const app = adminApp(follower(leader.address, local));
    expect((await post(app, "/admin/snapshot?wait=true")).body["relayed"]).toBe("/admin/snapshot?wait=true");
    expect(local.snapshots).toBe(0);
    expect(await post(app, "/admin/snapshot?wait=true&local=true")).toMatchObject({ status: 200, body: { status: "done", node_id: "node2", index: 7 } });
    expect(local.snapshots).toBe(1);
    expect(leader.seen).toHaveLength(1);
  });

  test("a pause's lease goes to the leader in the query; a parameter the route does not take is refused here, and nothing is sent", async () => {
    const leader = okLeader();
    const app = adminApp(follower(leader.address));
    expect((await post(app, "/admin/pause-writes?lease_ms=60000")).body["relayed"]).toBe("/admin/pause-writes?lease_ms=60000");
    expect(await post(app, "/admin/snapshot?wiat=true")).toMatchObject({ status: 400, body: { error: { code: "BAD_REQUEST", parameter: "wiat" } } });
    expect(await post(app, "/admin/pause-writes?lease=60s")).toMatchObject({ status: 400, body: { error: { code: "BAD_REQUEST", parameter: "lease" } } });
    expect(leader.seen.map((s) => s.path)).toEqual(["/admin/pause-writes?lease_ms=60000"]);
  });

  test("membership changes and transfer-leader are forwarded with their bodies", async () => {
    const leader = okLeader();
    const app = adminApp(follower(leader.address));
    const member = { id: "node4", peer: "127.0.0.1:7", client: "127.0.0.1:8", admin: "127.0.0.1:9", learner: true };
    const moved = { id: "node3", peer: "127.0.0.1:10" };
    for (const [path, body] of [["/admin/add-node", member], ["/admin/set-member", moved], ["/admin/remove-node", { id: "node3" }], ["/admin/promote", { id: "node3" }], ["/admin/transfer-leader", { id: "node2" }]] as const) {
      expect((await post(app, path, body)).status).toBe(200);
    }
    expect(leader.seen.map((s) => [s.path, JSON.parse(s.body)])).toEqual([
      ["/admin/add-node", member], ["/admin/set-member", moved], ["/admin/remove-node", { id: "node3" }], ["/admin/promote", { id: "node3" }], ["/admin/transfer-leader", { id: "node2" }],
    ]);
  });

  test("set-member's body is checked before it is forwarded: an id and at least one host:port, nothing else", async () => {
    const leader = okLeader();
    const app = adminApp(follower(leader.address));
    for (const [body, says] of [
      [{ id: "node3" }, "at least one of"],
      [{ peer: "127.0.0.1:10" }, '"id" is required'],
      [{ id: "node3", peer: "nowhere" }, '"peer" must be host:port'],
      [{ id: "node3", client: 7878 }, '"client" must be host:port'],
      [{ id: "node3", peer: "127.0.0.1:10", learner: true }, "learner"],
    ] as const) {
      const r = await post(app, "/admin/set-member", body);
      expect(r.status).toBe(400);
      expect(String((r.body["error"] as { message?: unknown } | undefined)?.message)).toContain(says);
    }
    expect(leader.seen).toHaveLength(0);
  });

  test("remove-node, promote and transfer-leader take {\"id\"} and nothing else: an unknown field is refused, not ignored", async () => {
    const leader = okLeader();
    const app = adminApp(follower(leader.address));
    for (const path of ["/admin/remove-node", "/admin/promote", "/admin/transfer-leader"]) {
      // A client's dry run, or a misspelt field, must not remove a member.
      for (const [body, says] of [[{ id: "node3", dry_run: true }, '"dry_run"'], [{ to: "node3" }, '"to"'], [{ id: "" }, "id"]] as const) {
        const r = await post(app, path, body);
        expect(r.status).toBe(400);
        expect(String((r.body["error"] as { message?: unknown } | undefined)?.message)).toContain(says);
      }
    }
    expect(leader.seen).toHaveLength(0);
  });

  test("a request that was already forwarded is not forwarded again: 503 NOT_LEADER naming the leader's admin address", async () => {
    const leader = okLeader();
    const app = adminApp(follower(leader.address));
    const r = await post(app, "/admin/pause-writes", undefined, { "x-svc-forwarded-by": "node3" });
    expect(r).toMatchObject({ status: 503, body: { error: { code: "NOT_LEADER", leader: "node1", leader_admin: leader.address } } });
    expect(leader.seen).toHaveLength(0);
  });

  test("the leader's admin port refuses the connection: the request never left, 503 NOT_LEADER with the leader's admin address", async () => {
    const address = await closedPort();
    const r = await post(adminApp(follower(address)), "/admin/pause-writes");
    expect(r).toMatchObject({ status: 503, body: { error: { code: "NOT_LEADER", leader_admin: address } } });
  });

  test("the leader's connection resets after it read the request: 504 OUTCOME_UNKNOWN", async () => {
    const r = await post(adminApp(follower(await resettingLeader())), "/admin/pause-writes");
    expect(r).toMatchObject({ status: 504, body: { error: { code: "OUTCOME_UNKNOWN" } } });
  });
});

describe("svc admin and a NOT_LEADER answer", () => {
  test("follows the leader's admin address named in the answer", async () => {
    const leader = okLeader();
    const notLeader = fakeAdmin(() => Response.json(
      { error: { code: "NOT_LEADER", message: "this node is not the leader; node1 is", leader: "node1", leader_admin: leader.address } },
      { status: 503 },
    ));
    const proc = Bun.spawn([process.execPath, "src/main.ts", "admin", "pause-writes", "--node", `http://${notLeader.address}`], {
      cwd: REPO, stdout: "pipe", stderr: "pipe", env: { ...process.env, NO_COLOR: "1" },
    });
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    expect({ code, stdout }).toEqual({ code: 0, stdout: expect.stringContaining("writes paused (log index 42)") });
    expect(stderr).toContain(`asking the leader at http://${leader.address}`);
    expect(notLeader.seen.map((s) => s.path)).toEqual(["/admin/pause-writes"]);
    expect(leader.seen.map((s) => s.path)).toEqual(["/admin/pause-writes"]);
  }, 30_000);
});
