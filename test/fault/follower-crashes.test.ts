// Availability while followers crash over and over: three nodes, writers and linearizable
// readers on every node, and a seeded schedule that kills -9 one follower at a time and
// restarts it 2–6 s later, for 15 s (SVC_FAULT_LONG=1: 60 s). The leader is never touched, so
// it must stay the leader (no election without a fault of its own), every write must
// eventually succeed, and every node ends with the same rows. The longest time in which no
// write succeeded anywhere is printed (a figure, not asserted).
//
// The seed is printed first; SEED=<n> replays the same schedule.

import { expect } from "bun:test";
import { createPrng } from "../../src/util/prng.ts";
import { clusterTest } from "../lib/cluster.ts";
import { useProcessCleanup, waitFor, type NodeProcess } from "../lib/proc.ts";

useProcessCleanup();

const seed = process.env.SEED !== undefined && process.env.SEED !== "" ? Number(process.env.SEED) : Date.now() % 2_147_483_647;
console.log(`test/fault/follower-crashes.test.ts: SEED=${seed}`);
const runMs = process.env.SVC_FAULT_LONG === "1" ? 60_000 : 15_000;

async function post(url: string, body: unknown, timeoutMs: number): Promise<{ ok: boolean; status: number }> {
  try {
    const r = await fetch(url, { method: "POST", body: JSON.stringify(body), signal: AbortSignal.timeout(timeoutMs) });
    await r.arrayBuffer();
    return { ok: r.ok, status: r.status };
  } catch {
    return { ok: false, status: 0 };
  }
}

async function metric(node: NodeProcess, name: string): Promise<number> {
  const text = await (await fetch(`${node.adminUrl}/metrics`)).text();
  return Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1] ?? Number.NaN);
}

clusterTest("followers killed -9 one at a time: the leader keeps leading, every write eventually succeeds, and the nodes converge", {
  overrides: { snapshotIntervalEntries: 500 },
}, async (cluster) => {
  const prng = createPrng(seed, 0xc4a5);
  await cluster.start();
  await cluster.executeAnywhere([{ sql: "CREATE TABLE w (id INTEGER PRIMARY KEY, by TEXT)", params: [] }]);
  const leader = await cluster.waitLeader();
  const termBefore = await metric(leader, "tensor_chain_term");
  const followers = cluster.nodes.filter((n) => n !== leader);

  let stop = false;
  let nextId = 0;
  const acked = new Set<number>();
  let lastOkMs = performance.now();
  let longestGapMs = 0;
  const writer = async (w: number): Promise<void> => {
    while (!stop) {
      const id = ++nextId;
      // A write is retried (same id, INSERT OR IGNORE) until one answer says it happened.
      for (let attempt = 0; ; attempt++) {
        const node = cluster.nodes[(w + attempt) % cluster.nodes.length] as NodeProcess;
        const r = await post(`${node.clientUrl}/v1/execute`, { statements: [{ sql: "INSERT OR IGNORE INTO w (id, by) VALUES (?, ?)", params: [id, node.nodeId] }] }, 3_000);
        if (r.ok) {
          acked.add(id);
          const now = performance.now();
          longestGapMs = Math.max(longestGapMs, now - lastOkMs);
          lastOkMs = now;
          break;
        }
        if (attempt > 200) throw new Error(`write ${id} did not succeed after 200 attempts`);
        await Bun.sleep(20);
      }
    }
  };
  const reader = async (r: number): Promise<void> => {
    while (!stop) {
      const node = cluster.nodes[r % cluster.nodes.length] as NodeProcess;
      await post(`${node.clientUrl}/v1/query`, { sql: "SELECT count(*) FROM w", consistency: "linearizable" }, 2_000);
      await Bun.sleep(10);
    }
  };
  const clients = [...Array.from({ length: 6 }, (_, i) => writer(i)), ...Array.from({ length: 3 }, (_, i) => reader(i))];

  const started = performance.now();
  let crashes = 0;
  while (performance.now() - started < runMs) {
    const victim = followers[prng.nextInt(followers.length)] as NodeProcess;
    await Bun.sleep(500 + prng.nextInt(1500));
    await victim.kill9();
    crashes++;
    await Bun.sleep(2_000 + prng.nextInt(4_000));
    victim.spawn();
  }
  for (const f of followers) await f.waitHealthy();
  stop = true;
  await Promise.all(clients);

  console.log(`follower crashes: ${crashes} kills in ${(runMs / 1000).toFixed(0)} s; ${acked.size} writes; longest time with no write succeeding: ${longestGapMs.toFixed(0)} ms`);
  expect(crashes).toBeGreaterThan(0);
  // The leader was never touched: no election happened.
  expect(await metric(leader, "tensor_chain_is_leader")).toBe(1);
  expect(await metric(leader, "tensor_chain_term")).toBe(termBefore);
  // Every node ends with every acknowledged write, and the same rows.
  await waitFor("every node to apply what the leader committed", async () => {
    const commit = await metric(leader, "tensor_chain_commit_index");
    for (const n of cluster.nodes) if ((await metric(n, "tensor_chain_applied_index")) < commit) return false;
    return true;
  }, { deadlineMs: 60_000 });
  const dumps = await Promise.all(cluster.nodes.map((n) => cluster.dump(n, "w")));
  const ids = new Set(dumps[0]?.map((row) => Number(row[0])));
  for (const id of acked) expect(ids.has(id)).toBe(true);
  for (const d of dumps) expect(d).toEqual(dumps[0] ?? []);
}, 180_000);
