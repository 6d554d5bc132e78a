// Membership changes on a running cluster of real processes: a node added at run time joins
// as a learner and is promoted once caught up; leadership moves on request; a removed node
// no longer counts, and the cluster goes on taking writes.

import { describe, expect } from "bun:test";
import {
  addressText, execute, freePort, getJson, procTest, query, runBinary, singleNodeConfig, startCluster, useProcessCleanup, waitFor, waitForLeader,
} from "../lib/proc.ts";

useProcessCleanup();

const fastRaft = { raft: { heartbeatIntervalMs: 50, electionTimeoutMs: 500 } };

interface ClusterInfo {
  leader: string | null;
  members: { id: string; role: string; connected: boolean | null }[];
}

describe("membership", () => {
  procTest("a node added at run time catches up, becomes a voter, can lead, and a removed node stops counting", async (env) => {
    const nodes = await startCluster(env, 3, fastRaft);
    const leader = await waitForLeader(nodes);
    await execute(leader.clientUrl, ["CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"]);
    for (let i = 0; i < 50; i++) await execute(nodes[i % 3]?.clientUrl ?? "", [{ sql: "INSERT INTO t (v) VALUES (?)", params: [`v${i}`] }]);

    // node4 knows the others; they learn its addresses from the add-node entry.
    const own = await singleNodeConfig(env.dir, fastRaft, "node4");
    const ownMember = own.cluster?.members?.[0];
    if (ownMember === undefined) throw new Error("no member entry for node4");
    const node4 = env.node({
      ...own,
      cluster: { bootstrap: false, members: [...(nodes[0]?.config.cluster?.members ?? []), ownMember] },
    });
    node4.spawn();

    // Refused up front, changing nothing: a member's id (its addresses stay), an id no
    // configuration could hold, another member's address.
    const follower = nodes.find((n) => n !== leader)!;
    const before = JSON.stringify((await getJson<{ members: unknown[] }>(`${leader.adminUrl}/admin/cluster-info`)).members);
    const post = (body: unknown) => fetch(`${leader.adminUrl}/admin/add-node`, { method: "POST", body: JSON.stringify(body) });
    const member = await post({ id: follower.nodeId, peer: "127.0.0.1:1", client: "127.0.0.1:2", admin: "127.0.0.1:3" });
    expect(member.status).toBe(400);
    expect(await member.text()).toContain(`${follower.nodeId} is already a voter`);
    const badId = await post({ id: "../../x y", peer: "127.0.0.1:1", client: "127.0.0.1:2", admin: "127.0.0.1:3" });
    expect(((await badId.json()) as { error: { code: string } }).error.code).toBe("BAD_REQUEST");
    const taken = await post({ id: "node9", peer: addressText(follower.config.cluster!.members!.find((m) => m.id === follower.nodeId)!.peer, "peer"), client: "127.0.0.1:2", admin: "127.0.0.1:3" });
    expect({ status: taken.status, text: await taken.text() }).toMatchObject({ status: 400, text: expect.stringContaining("peer address") });
    expect(JSON.stringify((await getJson<{ members: unknown[] }>(`${leader.adminUrl}/admin/cluster-info`)).members)).toBe(before);
    // The command says only the refusal: no "adding … waiting up to 120 s" for a member.
    const again = await runBinary(["admin", "add-node", "--node", leader.adminUrl, "--id", follower.nodeId, "--peer", "127.0.0.1:1", "--client", "127.0.0.1:2", "--admin", "127.0.0.1:3"]);
    expect(again.exitCode).toBe(1);
    expect(again.stderr).toContain(`${follower.nodeId} is already a voter`);
    expect(again.stderr).not.toContain("adding");

    const add = await runBinary([
      "admin", "add-node", "--node", leader.adminUrl, "--id", "node4",
      "--peer", addressText(ownMember.peer, "peer"), "--client", addressText(ownMember.client, "client"), "--admin", addressText(ownMember.admin, "admin"),
    ], { deadlineMs: 120_000 });
    expect(add.stderr).toBe("adding node4 as a learner; it becomes a voter once it has caught up (waiting up to 120 s; Ctrl-C leaves it a learner)\n");
    expect(add.exitCode).toBe(0);
    expect(add.stdout).toContain("voter");
    await node4.waitHealthy();

    const info = await getJson<ClusterInfo>(`${leader.adminUrl}/admin/cluster-info`);
    expect(info.members.find((m) => m.id === "node4")?.role).toBe("voter");
    await waitFor("node4 holds every row", async () => {
      const rows = await query(node4.clientUrl, "SELECT count(*) FROM t");
      return rows[0]?.[0] === 50;
    });

    const transfer = await runBinary(["admin", "transfer-leader", "--node", leader.adminUrl, "--to", "node4"], { deadlineMs: 30_000 });
    expect(transfer.exitCode).toBe(0);
    const all = [...nodes, node4];
    expect((await waitForLeader(all)).nodeId).toBe("node4");

    const victim = nodes.find((n) => n.nodeId !== leader.nodeId);
    if (victim === undefined) throw new Error("no follower to remove");
    const remove = await runBinary(["admin", "remove-node", "--node", node4.adminUrl, "--id", victim.nodeId], { deadlineMs: 30_000 });
    expect(remove.exitCode).toBe(0);
    const after = await getJson<ClusterInfo>(`${node4.adminUrl}/admin/cluster-info`);
    expect(after.members.map((m) => m.id).sort()).toEqual(all.map((n) => n.nodeId).filter((id) => id !== victim.nodeId).sort());

    // The removed node says so on /health (not "no leader").
    const said = await waitFor("the removed node's /health to say it was removed", async () => {
      const r = await fetch(`${victim.adminUrl}/health`);
      const body = (await r.json()) as { problem?: string };
      return r.status === 503 && body.problem?.includes("removed from the cluster") === true ? body : false;
    });
    expect(said.problem).toContain("add-node");
    // The members stop dialling it (they still hear it, and would answer it).
    for (const n of all.filter((x) => x !== victim)) {
      await waitFor(`${n.nodeId} to stop dialling the removed node`, () => n.log().includes(`peer ${victim.nodeId} is not a member: dialled only when there is something to send to it`));
    }
    // Client requests there are refused, saying why: it serves no stale state and forwards
    // nothing (its state is no longer replicated). An operator can still read it on the admin port.
    for (const [path, body] of [
      ["/v1/execute", { statements: [{ sql: "INSERT INTO t (v) VALUES (?)", params: ["at-removed"] }] }],
      ["/v1/query", { sql: "SELECT count(*) FROM t" }],
      ["/v1/query", { sql: "SELECT count(*) FROM t", consistency: "stale" }],
    ] as const) {
      const r = await fetch(`${victim.clientUrl}${path}`, { method: "POST", body: JSON.stringify(body), signal: AbortSignal.timeout(30_000) });
      const answer = (await r.json()) as { error?: { code: string; message: string; hint?: string } };
      expect({ path, status: r.status, code: answer.error?.code }).toEqual({ path, status: 421, code: "NOT_A_MEMBER" });
      expect(answer.error?.message).toContain("removed from the cluster");
      expect(answer.error?.hint).toContain("send requests to a member");
    }
    // A member that still took it for the leader and forwarded a write there is told NOT_LEADER
    // (nothing done; it relays that, and its client retries), not that the member it asked was removed.
    const forwarded = await fetch(`${victim.clientUrl}/v1/execute`, {
      method: "POST", headers: { "x-svc-forwarded-by": "node4" }, body: JSON.stringify({ statements: [{ sql: "INSERT INTO t (v) VALUES (?)", params: ["at-removed"] }] }),
    });
    const relayed = (await forwarded.json()) as { error?: { code: string; message: string } };
    expect({ status: forwarded.status, code: relayed.error?.code }).toEqual({ status: 503, code: "NOT_LEADER" });
    expect(relayed.error?.message).toContain(`node4 forwarded the request to ${victim.nodeId}, which was removed from the cluster`);
    const operatorRead = await fetch(`${victim.adminUrl}/admin/query`, { method: "POST", body: JSON.stringify({ sql: "SELECT count(*) FROM t", consistency: "stale" }) });
    expect(operatorRead.status).toBe(200);
    expect(((await query(node4.clientUrl, "SELECT count(*) FROM t WHERE v = 'at-removed'"))[0]?.[0])).toBe(0);
    // With the removed node stopped, three voters remain and a majority of them takes writes.
    await victim.kill9();
    const more = await execute(node4.clientUrl, [{ sql: "INSERT INTO t (v) VALUES (?)", params: ["after-remove"] }]);
    expect(more.results[0]?.rows_affected).toBe(1);
    // Started again, it still says it was removed (not that it waits for a leader).
    victim.spawn();
    await waitFor("the restarted removed node's /health to say it was removed", async () => {
      const r = await fetch(`${victim.adminUrl}/health`).catch(() => null);
      if (r === null) return false;
      const body = (await r.json()) as { problem?: string };
      return r.status === 503 && body.problem?.includes("removed from the cluster") === true;
    }, { deadlineMs: 30_000 });
    await victim.kill9();
  }, 120_000);

  procTest("an add-node its caller abandons while the node catches up leaves it a learner, through a follower's relay too", async (env) => {
    const nodes = await startCluster(env, 3, fastRaft);
    const leader = await waitForLeader(nodes);
    const follower = nodes.find((n) => n !== leader)!;
    const own = await singleNodeConfig(env.dir, fastRaft, "node4");
    const ownMember = own.cluster?.members?.[0];
    if (ownMember === undefined) throw new Error("no member entry for node4");
    const node4 = env.node({ ...own, cluster: { bootstrap: false, members: [...(nodes[0]?.config.cluster?.members ?? []), ownMember] } });
    // node4 is not running yet: the request waits for it to catch up, and its caller gives up.
    const caller = new AbortController();
    const pending = fetch(`${follower.adminUrl}/admin/add-node`, {
      method: "POST", signal: caller.signal,
      body: JSON.stringify({ id: "node4", peer: addressText(ownMember.peer, "peer"), client: addressText(ownMember.client, "client"), admin: addressText(ownMember.admin, "admin") }),
    }).catch(() => null);
    await waitFor("node4 to be added as a learner", async () =>
      (await getJson<ClusterInfo>(`${leader.adminUrl}/admin/cluster-info`)).members.find((m) => m.id === "node4")?.role === "learner");
    caller.abort();
    await pending;
    await waitFor("the leader to see the request go", () => leader.log().includes("add-node: the request was abandoned while node4 caught up; it stays a learner"));
    node4.spawn();
    await node4.waitHealthy();
    expect((await getJson<ClusterInfo>(`${leader.adminUrl}/admin/cluster-info`)).members.find((m) => m.id === "node4")?.role).toBe("learner");
  }, 120_000);

  procTest("a lone node may move its own peer address (the leader alone answers wherever it listens)", async (env) => {
    const node = await env.startSingleNode(fastRaft);
    const moved = await runBinary(["admin", "set-member", "--node", node.adminUrl, "--id", node.nodeId, "--peer", `127.0.0.1:${await freePort()}`]);
    expect({ exit: moved.exitCode, stderr: moved.stderr }).toEqual({ exit: 0, stderr: "" });
  }, 60_000);

  procTest("an add-node waiting for its learner answers at once when the node is removed meanwhile, saying so", async (env) => {
    // It waited out its two minutes and then said the removed node "stays a learner".
    const nodes = await startCluster(env, 3, fastRaft);
    const leader = await waitForLeader(nodes);
    const follower = nodes.find((n) => n !== leader)!;
    const [peer, client, admin] = [await freePort(), await freePort(), await freePort()].map((p) => `127.0.0.1:${p}`);
    const pending = fetch(`${follower.adminUrl}/admin/add-node`, { method: "POST", body: JSON.stringify({ id: "node9", peer, client, admin }) });
    await waitFor("node9 to be added as a learner", async () =>
      (await getJson<ClusterInfo>(`${leader.adminUrl}/admin/cluster-info`)).members.find((m) => m.id === "node9")?.role === "learner");
    expect((await runBinary(["admin", "remove-node", "--node", leader.adminUrl, "--id", "node9"])).exitCode).toBe(0);
    const answer = await pending;
    expect(answer.status).toBe(400);
    expect(await answer.text()).toContain("node9 was added as a learner, then removed from the cluster while it caught up");
  }, 60_000);

  procTest("a learner whose voters are gone reports itself unavailable on /health once it has heard no leader for two election timeouts", async (env) => {
    const nodes = await startCluster(env, 3, fastRaft);
    const leader = await waitForLeader(nodes);
    const own = await singleNodeConfig(env.dir, fastRaft, "node4");
    const ownMember = own.cluster?.members?.[0];
    if (ownMember === undefined) throw new Error("no member entry for node4");
    const node4 = env.node({ ...own, cluster: { bootstrap: false, members: [...(nodes[0]?.config.cluster?.members ?? []), ownMember] } });
    node4.spawn();
    const add = await runBinary([
      "admin", "add-node", "--node", leader.adminUrl, "--id", "node4", "--learner",
      "--peer", addressText(ownMember.peer, "peer"), "--client", addressText(ownMember.client, "client"), "--admin", addressText(ownMember.admin, "admin"),
    ], { deadlineMs: 120_000 });
    expect(add.exitCode).toBe(0);
    await node4.waitHealthy();
    expect((await getJson<ClusterInfo>(`${leader.adminUrl}/admin/cluster-info`)).members.find((m) => m.id === "node4")?.role).toBe("learner");
    // A learner never campaigns: it keeps naming the leader it last heard.
    for (const n of nodes) await n.kill9();
    const answer = await waitFor("the learner's /health to say there is no leader", async () => {
      const r = await fetch(`${node4.adminUrl}/health`);
      const body = (await r.json()) as { status: string; problem?: string };
      return r.status === 503 ? body : false;
    }, { deadlineMs: 30_000, intervalMs: 100 });
    expect(answer.status).toBe("unavailable");
    expect(answer.problem).toContain("no leader for");
  }, 120_000);

  procTest("removing the leader: the command succeeds, it hands over as it steps down, and writes go on at the others", async (env) => {
    const nodes = await startCluster(env, 3, fastRaft);
    const leader = await waitForLeader(nodes);
    await execute(leader.clientUrl, ["CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"]);
    const remove = await runBinary(["admin", "remove-node", "--node", leader.adminUrl, "--id", leader.nodeId], { deadlineMs: 30_000 });
    expect(remove.stderr).toBe("");
    expect(remove.exitCode).toBe(0);
    const others = nodes.filter((n) => n !== leader);
    const next = await waitForLeader(others);
    // Handed over (timeout_now), not elected after an election timeout with no leader.
    await waitFor("the removed leader to say whom it handed over to", () => leader.log().includes(`"successor":"${next.nodeId}"`) || leader.log().includes(`successor=${next.nodeId}`));
    await execute(others[0]!.clientUrl, [{ sql: "INSERT INTO t (v) VALUES (?)", params: ["after"] }]);
    const info = await getJson<ClusterInfo>(`${next.adminUrl}/admin/cluster-info`);
    expect(info.members.map((m) => m.id).sort()).toEqual(others.map((n) => n.nodeId).sort());
    await leader.kill9();
  }, 60_000);

  procTest("a node whose configuration leaves out a member of the cluster says so, naming it and the fix", async (env) => {
    const nodes = await startCluster(env, 3, fastRaft);
    await waitForLeader(nodes);
    const node2 = nodes[1];
    if (node2 === undefined) throw new Error("three nodes");
    expect(await node2.stop()).toBe(0);
    const members = (node2.config.cluster?.members ?? []).filter((m) => m.id !== "node3");
    const restarted = env.node({ ...node2.config, cluster: { ...node2.config.cluster, members } });
    restarted.spawn();
    await waitFor("node2 to name node3 as a member it does not know", () => restarted.log().includes("node3 is a member of the cluster, but not in this node's [cluster] members"));
    expect(restarted.log()).toContain("add them to members");
    // cluster-status asked of it names node3 as a member it cannot reach, and what to add: exit 1.
    const status = await runBinary(["admin", "cluster-status", "--node", restarted.adminUrl]);
    expect(status.exitCode).toBe(1);
    expect(status.stdout).toContain("PROBLEM: node3 is a member of the cluster, but node2's configuration file does not list it in [cluster] members and no addresses were replicated for it");
  }, 60_000);

  procTest("set-member moves a member to a new peer address: every node redials it there, and it catches up from its new place", async (env) => {
    const nodes = await startCluster(env, 3, fastRaft);
    const leader = await waitForLeader(nodes);
    await execute(leader.clientUrl, ["CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"]);
    const mover = nodes.find((n) => n.nodeId !== leader.nodeId)!;
    const other = nodes.find((n) => n.nodeId !== leader.nodeId && n !== mover)!;
    const newPeer = `127.0.0.1:${await freePort()}`;

    // Refused, changing nothing: not a member; another member's address; the leader's own peer address.
    const stranger = await runBinary(["admin", "set-member", "--node", other.adminUrl, "--id", "ghost", "--peer", newPeer]);
    expect(stranger.exitCode).toBe(1);
    expect(stranger.stderr).toContain("ghost is not a member");
    const taken = await runBinary(["admin", "set-member", "--node", other.adminUrl, "--id", mover.nodeId, "--peer", addressText(other.config.listen?.peer, "peer")]);
    expect(taken.exitCode).toBe(1);
    expect(taken.stderr).toContain(`is ${other.nodeId}'s peer address`);
    const own = await runBinary(["admin", "set-member", "--node", other.adminUrl, "--id", leader.nodeId, "--peer", newPeer]);
    expect(own.exitCode).toBe(1);
    expect(own.stderr).toContain("transfer-leader");
    expect((await runBinary(["admin", "set-member", "--node", other.adminUrl, "--id", mover.nodeId])).exitCode).toBe(2);
    const refusals: [string[], string][] = [
      [["--peer", `0.0.0.0:${await freePort()}`], "listens on every interface"],
      [["--client", addressText(mover.config.listen?.peer, "peer")], "peer and client addresses are the same"],
      [["--client", addressText(leader.config.listen?.admin, "admin")], `is ${leader.nodeId}'s admin address`],
    ];
    for (const [flags, says] of refusals) {
      const r = await runBinary(["admin", "set-member", "--node", other.adminUrl, "--id", mover.nodeId, ...flags]);
      expect({ flags, exitCode: r.exitCode }).toEqual({ flags, exitCode: 1 });
      expect(r.stderr).toContain(says);
    }

    // As the README says: stop the member, change its address (sent to a follower, relayed to the
    // leader, replicated), start it where it now listens. The others' files still name the old port.
    expect(await mover.stop()).toBe(0);
    const moved = await runBinary(["admin", "set-member", "--node", other.adminUrl, "--id", mover.nodeId, "--peer", newPeer, "--json"]);
    expect(moved.stderr).toBe("");
    expect(moved.exitCode).toBe(0);
    expect(JSON.parse(moved.stdout).member).toMatchObject({ id: mover.nodeId, peer: newPeer, client: addressText(mover.config.listen?.client, "client") });
    for (const n of [leader, other]) {
      await waitFor(`${n.nodeId} to know ${mover.nodeId}'s new address`, async () =>
        (await getJson<{ members: { id: string; peer: string }[] }>(`${n.adminUrl}/admin/cluster-info`)).members.find((m) => m.id === mover.nodeId)?.peer === newPeer);
    }
    await execute(leader.clientUrl, [{ sql: "INSERT INTO t (v) VALUES (?)", params: ["while it moved"] }]);
    const relocated = env.node({ ...mover.config, listen: { ...mover.config.listen, peer: newPeer } });
    await relocated.start();
    await waitFor(`${mover.nodeId} to hold the write made while it moved`, async () => (await query(relocated.clientUrl, "SELECT count(*) FROM t").catch(() => []))[0]?.[0] === 1);
    expect((await getJson<{ members: { id: string; peer: string }[] }>(`${relocated.adminUrl}/admin/cluster-info`)).members.find((m) => m.id === mover.nodeId)?.peer).toBe(newPeer);
    // A move counts the member gone until it answers there: a second move that would leave fewer
    // than a majority answering is refused (two moves to addresses nothing listens on left the
    // cluster with no leader, and none to take them back).
    const otherPeer = addressText(other.config.listen?.peer, "peer");
    const nowhere = [`127.0.0.1:${await freePort()}`, `127.0.0.1:${await freePort()}`];
    expect((await runBinary(["admin", "set-member", "--node", leader.adminUrl, "--id", other.nodeId, "--peer", nowhere[0]!])).exitCode).toBe(0);
    const second = await runBinary(["admin", "set-member", "--node", leader.adminUrl, "--id", mover.nodeId, "--peer", nowhere[1]!]);
    expect(second.exitCode).toBe(1);
    expect(second.stderr).toContain(`moving ${mover.nodeId} to another peer address would leave 1 of the 3 voters answering, fewer than the 2 a write needs`);
    expect(second.stderr).toContain(`${other.nodeId} has not answered within an election timeout, or is not reached yet at the address it was moved to`);
    expect((await getJson<{ members: { id: string; peer: string }[] }>(`${leader.adminUrl}/admin/cluster-info`)).members.find((m) => m.id === mover.nodeId)?.peer).toBe(newPeer);
    // Moved back where it listens, it answers again, and writes commit.
    expect((await runBinary(["admin", "set-member", "--node", leader.adminUrl, "--id", other.nodeId, "--peer", otherPeer])).exitCode).toBe(0);
    await execute(leader.clientUrl, [{ sql: "INSERT INTO t (v) VALUES (?)", params: ["after the refused move"] }]);
    // Two changes at once, of different addresses of one member: both are kept (the second merges with the first).
    const [clientAt, adminAt] = [`127.0.0.1:${await freePort()}`, `127.0.0.1:${await freePort()}`];
    const both = await Promise.all([{ client: clientAt }, { admin: adminAt }].map((change) =>
      fetch(`${leader.adminUrl}/admin/set-member`, { method: "POST", body: JSON.stringify({ id: other.nodeId, ...change }) }).then((r) => r.status)));
    expect(both).toEqual([200, 200]);
    const otherNow = (await getJson<{ members: { id: string; client: string; admin: string }[] }>(`${leader.adminUrl}/admin/cluster-info`)).members.find((m) => m.id === other.nodeId);
    expect(otherNow).toMatchObject({ client: clientAt, admin: adminAt });
    // It counts for the quorum again: with the third member stopped, the leader still commits.
    await other.kill9();
    const more = await execute(leader.clientUrl, [{ sql: "INSERT INTO t (v) VALUES (?)", params: ["after the move"] }]);
    expect(more.results[0]?.rows_affected).toBe(1);
  }, 120_000);

  procTest("a change that is not valid is refused with a reason", async (env) => {
    const nodes = await startCluster(env, 3, fastRaft);
    const leader = await waitForLeader(nodes);
    const r = await runBinary(["admin", "remove-node", "--node", leader.adminUrl, "--id", "nobody"]);
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain("nobody");
    const t = await runBinary(["admin", "transfer-leader", "--node", leader.adminUrl, "--to", "ghost"]);
    expect(t.exitCode).toBe(1);
    expect(t.stderr).toContain("ghost");
  }, 60_000);
});
