// Time to recover is measured and shown: a follower restarted behind the leader logs
// "recovery: caught_up … after N s" once the leader confirms it caught up, and its /metrics
// show the tensor_chain_recovery_* figures (entries behind, rate, estimate, the last
// catch-up's duration, catch-ups completed), in text promtool accepts.

import { beforeAll, describe, expect } from "bun:test";
import { clusterTest } from "../lib/cluster.ts";
import { Ledger, WriteLoad, ensureBinary, execute, fetchMetrics, kvSchema, useProcessCleanup } from "../lib/proc.ts";

useProcessCleanup();

describe("recovery is measured and shown", () => {
  beforeAll(() => {
    ensureBinary();
  });

  clusterTest("a follower restarted behind the leader logs how long its catch-up took and shows it in its metrics", {}, async (cluster) => {
    await cluster.start();
    await execute(cluster.nodes[0]!.clientUrl, [kvSchema]);
    const leader = await cluster.waitLeader();
    const follower = cluster.others(leader)[0]!;
    const targets = cluster.others(follower);
    let turn = 0;
    const load = new WriteLoad({ target: () => targets[turn++ % targets.length]!.clientUrl, clients: 8, keyPrefix: "behind", ledger: new Ledger(32), requestTimeoutMs: 10_000 });
    try {
      await load.untilAcked(100);
      await cluster.kill9(follower);
      await load.untilAcked(load.ackedCount + 1_000);
    } finally {
      await load.stop();
    }
    follower.spawn();
    await cluster.waitCaughtUp(follower);
    await follower.waitHealthy();

    const line = follower.lastRunLog().split("\n").find((l) => l.includes("recovery: caught_up"));
    expect(line).toMatch(/recovery: caught_up; joined as follower after \d+\.\d s/);
    expect(line).toMatch(/entries=\d+/);

    const metrics = await fetchMetrics(follower.adminUrl);
    expect(metrics.get("tensor_chain_recovery_catch_ups_total")).toBe(1);
    expect(metrics.get("tensor_chain_recovery_last_catch_up_seconds")).toBeGreaterThan(0);
    expect(metrics.get("tensor_chain_recovery_entries_behind")).toBe(0);
    expect(metrics.get("tensor_chain_recovery_estimated_seconds")).toBe(0);
    expect(metrics.has("tensor_chain_recovery_catch_up_rate_entries_per_second")).toBe(true);

    const promtool = Bun.which("promtool");
    if (promtool === null) {
      console.warn("promtool is not installed (Debian package prometheus): only the names were checked");
      return;
    }
    const text = await (await fetch(`${follower.adminUrl}/metrics`)).text();
    const check = Bun.spawnSync([promtool, "check", "metrics"], { stdin: new TextEncoder().encode(text) });
    expect(check.stderr.toString() + check.stdout.toString()).toBe("");
    expect(check.exitCode).toBe(0);
  });
});
