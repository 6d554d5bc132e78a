// Cluster admin from any node, on real processes: pause-writes, resume-writes, snapshot and
// transfer-leader sent to a follower's admin port (through `svc admin`) act on the cluster, as
// if they had been sent to the leader.

import { describe, expect } from "bun:test";
import { clusterTest } from "../lib/cluster.ts";
import { execute, executeRaw, getJson, kvSchema, runBinary, useProcessCleanup } from "../lib/proc.ts";

useProcessCleanup();

interface Stats {
  snapshot_index: number;
  writes_paused: boolean;
}

describe("cluster admin from any node", () => {
  clusterTest("pause-writes, resume-writes and snapshot sent to followers act on the cluster", {}, async (cluster) => {
    await cluster.start();
    const leader = await cluster.waitLeader();
    const [first, second] = cluster.others(leader);
    if (first === undefined || second === undefined) throw new Error("a three-node cluster has two followers");
    await execute(leader.clientUrl, [kvSchema]);

    const pause = await runBinary(["admin", "pause-writes", "--node", first.adminUrl], { deadlineMs: 30_000 });
    expect(pause.stderr).toBe("");
    expect(pause.exitCode).toBe(0);
    expect(pause.stdout).toContain("writes paused");
    const refused = await executeRaw(leader.clientUrl, [{ sql: "INSERT INTO kv (k, v) VALUES ('a', '1')" }]);
    expect(refused.status).toBe(503);
    expect(refused.text).toContain("WRITES_PAUSED");

    const resume = await runBinary(["admin", "resume-writes", "--node", second.adminUrl], { deadlineMs: 30_000 });
    expect(resume.exitCode).toBe(0);
    await execute(first.clientUrl, [{ sql: "INSERT INTO kv (k, v) VALUES ('a', '1')" }]);

    const before = await getJson<Stats>(`${leader.adminUrl}/admin/stats`);
    const snapshot = await runBinary(["admin", "snapshot", "--json", "--node", second.adminUrl], { deadlineMs: 60_000 });
    expect(snapshot.exitCode).toBe(0);
    const taken = JSON.parse(snapshot.stdout) as { status: string; node_id: string; index: number };
    expect(taken).toMatchObject({ status: "done", node_id: leader.nodeId });
    expect(taken.index).toBeGreaterThan(before.snapshot_index);
    expect((await getJson<Stats>(`${leader.adminUrl}/admin/stats`)).snapshot_index).toBe(taken.index);
  }, 120_000);

  clusterTest("transfer-leader sent to a follower moves leadership", {}, async (cluster) => {
    await cluster.start();
    const leader = await cluster.waitLeader();
    const [follower, target] = cluster.others(leader);
    if (follower === undefined || target === undefined) throw new Error("a three-node cluster has two followers");
    const r = await runBinary(["admin", "transfer-leader", "--node", follower.adminUrl, "--to", target.nodeId], { deadlineMs: 30_000 });
    expect(r.stderr).toBe("");
    expect(r.exitCode).toBe(0);
    expect((await cluster.waitLeader()).nodeId).toBe(target.nodeId);
    // Asked again (a retried script): it is already there, which is what was asked.
    const again = await runBinary(["admin", "transfer-leader", "--node", follower.adminUrl, "--to", target.nodeId], { deadlineMs: 30_000 });
    expect({ exit: again.exitCode, stderr: again.stderr }).toEqual({ exit: 0, stderr: "" });
    expect((await cluster.waitLeader()).nodeId).toBe(target.nodeId);
  }, 120_000);
});
