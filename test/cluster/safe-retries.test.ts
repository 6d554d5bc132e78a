// Safe retries across a leader kill (README, Safe retries): clients send each write with its
// own request_id to every node in turn and retry it, with the same id, on any answer that does
// not settle it (OUTCOME_UNKNOWN, NOT_LEADER, a timeout, no answer) until it succeeds; some
// writes are also sent twice at once, and some again after they succeeded. The leader is
// killed with kill -9 meanwhile and restarted. Every request must be applied exactly once, and
// every repeat must answer what the first answer said.

import { beforeAll, describe, expect } from "bun:test";
import { clusterTest, type Cluster } from "../lib/cluster.ts";
import { ensureBinary, useProcessCleanup, type NodeProcess } from "../lib/proc.ts";

useProcessCleanup();

const table = "retried";

interface Settled {
  readonly index: number;
  readonly rowsAffected: number;
}

type Attempt = { settled: Settled } | { retry: string } | { fatal: string };

async function send(target: NodeProcess, requestId: string, n: number): Promise<Attempt> {
  let status: number;
  let text: string;
  try {
    const r = await fetch(`${target.clientUrl}/v1/execute`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ request_id: requestId, statements: [{ sql: `INSERT INTO ${table} (rid, n) VALUES (?, ?)`, params: [requestId, n] }] }),
      signal: AbortSignal.timeout(10_000),
    });
    status = r.status;
    text = await r.text();
  } catch (e) {
    return { retry: `no answer (${e instanceof Error ? e.name : String(e)})` };
  }
  if (status === 200) {
    const body = JSON.parse(text) as { index: number; results: { rows_affected: number }[] };
    return { settled: { index: body.index, rowsAffected: body.results[0]?.rows_affected ?? -1 } };
  }
  // 4xx says the request itself is wrong: retrying cannot help, and the test has a bug.
  if (status < 500) return { fatal: `${status} ${text}` };
  const code = (JSON.parse(text) as { error?: { code?: string } }).error?.code ?? "(no code)";
  return { retry: `${status} ${code}` };
}

/** Writers that settle every request, retrying it with its id on every node in turn. */
class RetryingWriters {
  /** Each request id and the answer that settled it. */
  readonly settled = new Map<string, Settled>();
  readonly problems: string[] = [];
  retries = 0;
  private stopped = false;
  private readonly loops: Promise<void>[] = [];

  constructor(private readonly cluster: Cluster, clients: number) {
    for (let c = 0; c < clients; c++) this.loops.push(this.client(c));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.loops);
  }

  /** Send until settled, turning through the nodes (a killed one refuses or does not answer). */
  async settle(requestId: string, n: number, turn: number): Promise<Settled> {
    const deadline = Date.now() + 60_000;
    for (let attempt = 0; ; attempt++) {
      const nodes = this.cluster.nodes;
      const answer = await send(nodes[(turn + attempt) % nodes.length]!, requestId, n);
      if ("settled" in answer) return answer.settled;
      if ("fatal" in answer) throw new Error(`${requestId}: ${answer.fatal}`);
      this.retries++;
      if (Date.now() > deadline) throw new Error(`${requestId} did not succeed within 60 s; last answer ${answer.retry}`);
      await Bun.sleep(20);
    }
  }

  private async client(c: number): Promise<void> {
    for (let seq = 0; !this.stopped; seq++) {
      const id = `c${c}-${seq}`;
      const n = c * 1_000_000 + seq;
      try {
        let first: Settled;
        if (seq % 5 === 0) {
          // Twice at once through two nodes: in flight together, applied once, one answer.
          const [a, b] = await Promise.all([this.settle(id, n, seq), this.settle(id, n, seq + 1)]);
          if (a.index !== b.index) this.problems.push(`${id}: sent twice at once, answered with indexes ${a.index} and ${b.index}`);
          first = a;
        } else {
          first = await this.settle(id, n, c + seq);
        }
        this.settled.set(id, first);
        if (seq % 3 === 0) {
          // Again once it succeeded, through another node: the first answer again.
          const again = await this.settle(id, n, c + seq + 1);
          if (again.index !== first.index) this.problems.push(`${id}: retried after success, answered index ${again.index}, first ${first.index}`);
        }
      } catch (e) {
        this.problems.push(e instanceof Error ? e.message : String(e));
        return;
      }
    }
  }
}

async function waitSettled(load: RetryingWriters, count: number): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (load.settled.size < count && load.problems.length === 0) {
    if (Date.now() > deadline) throw new Error(`only ${load.settled.size} of ${count} requests settled`);
    await Bun.sleep(20);
  }
}

describe("safe retries with request_id across a leader kill", () => {
  beforeAll(() => {
    ensureBinary();
  });

  clusterTest("every request retried until it succeeds is applied exactly once, and every repeat answers the first answer", {}, async (cluster) => {
    await cluster.start();
    await cluster.executeAnywhere([`CREATE TABLE ${table} (rid TEXT NOT NULL, n INTEGER NOT NULL)`]);
    const load = new RetryingWriters(cluster, 6);
    let retriesAtKill = 0;
    try {
      for (let round = 0; round < 2; round++) {
        await waitSettled(load, load.settled.size + 100);
        const leader = await cluster.waitLeader();
        retriesAtKill = load.retries;
        await cluster.kill9(leader);
        await cluster.waitLeader(cluster.others(leader));
        await waitSettled(load, load.settled.size + 100);
        leader.spawn();
        await cluster.waitHealthy(leader);
      }
    } finally {
      await load.stop();
    }
    expect(load.problems.slice(0, 20)).toEqual([]);
    // The kills forced retries (the leader died under writes in flight).
    expect(load.retries).toBeGreaterThan(0);
    console.log(`${load.settled.size} requests settled, ${load.retries} retries (${retriesAtKill} before the last kill)`);

    await cluster.waitConverged();
    for (const node of cluster.nodes) {
      const rows = await cluster.dump(node, table);
      const count = new Map<string, number>();
      for (const row of rows) count.set(String(row[0]), (count.get(String(row[0])) ?? 0) + 1);
      const wrong: string[] = [];
      for (const id of load.settled.keys()) if (count.get(id) !== 1) wrong.push(`${id} applied ${count.get(id) ?? 0} times on ${node.nodeId}`);
      expect(wrong.slice(0, 20)).toEqual([]);
    }

    // After the restarts, every node (the restarted one included) still answers a retry with the first answer.
    // (A retry sends the same statements: the n each client gave the id.)
    const nOf = (id: string): number => {
      const [c, seq] = id.slice(1).split("-").map(Number);
      return (c ?? 0) * 1_000_000 + (seq ?? 0);
    };
    const sample = [...load.settled.entries()].filter((_, i) => i % 25 === 0);
    for (const [i, node] of cluster.nodes.entries()) {
      for (const [id, first] of sample.slice(i * 3, i * 3 + 3)) {
        const again = await load.settle(id, nOf(id), i);
        expect({ id, node: node.nodeId, index: again.index }).toEqual({ id, node: node.nodeId, index: first.index });
      }
    }
  }, 240_000);
});
