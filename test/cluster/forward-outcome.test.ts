// The client error contract under a leader kill (README, Client API): writes go through the
// followers, which forward them to the leader, and the leader is killed with kill -9 while
// they are in flight. A write answered with a "not applied" code must never be found applied
// afterwards; whatever may have been applied is answered with a code that says so
// (OUTCOME_UNKNOWN, WRITE_TIMEOUT) or not answered at all. Every error answer has a code.

import { beforeAll, describe, expect } from "bun:test";
import { clusterTest, type Cluster } from "../lib/cluster.ts";
import { ensureBinary, execute, kvSchema, kvTable, useProcessCleanup, valueFor, type NodeProcess } from "../lib/proc.ts";

useProcessCleanup();

/** Codes that promise the write did not happen and will not (README, Client API). */
const notAppliedCodes: ReadonlySet<string> = new Set(["NOT_LEADER", "WRITES_PAUSED", "OVERLOADED", "ENTRY_REPLACED", "SHUTTING_DOWN", "STORAGE_FAILED"]);

interface Answer {
  readonly status: number | "no answer";
  readonly code: string | undefined;
}

/** Writers that go through `targets` only, each key once, recording every answer. */
class ForwardedWrites {
  readonly answers = new Map<string, Answer>();
  private stopped = false;
  private readonly loops: Promise<void>[] = [];

  constructor(private readonly targets: readonly NodeProcess[], clients: number, private readonly prefix: string) {
    for (let c = 0; c < clients; c++) this.loops.push(this.client(c));
  }

  acked(): number {
    let n = 0;
    for (const a of this.answers.values()) if (a.status === 200) n++;
    return n;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.loops);
  }

  private async client(clientId: number): Promise<void> {
    for (let seq = 0; !this.stopped; seq++) {
      const key = `${this.prefix}-c${clientId}-${seq}`;
      const target = this.targets[(clientId + seq) % this.targets.length]!;
      const answer = await write(target, key);
      this.answers.set(key, answer);
      if (answer.status !== 200) await Bun.sleep(10);
    }
  }
}

async function write(target: NodeProcess, key: string): Promise<Answer> {
  try {
    const r = await fetch(`${target.clientUrl}/v1/execute`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ statements: [{ sql: `INSERT INTO ${kvTable} (k, v) VALUES (?, ?)`, params: [key, valueFor(key, 32)] }] }),
      signal: AbortSignal.timeout(15_000),
    });
    const text = await r.text();
    if (r.status === 200) return { status: 200, code: undefined };
    let code: string | undefined;
    try {
      code = (JSON.parse(text) as { error?: { code?: string } }).error?.code;
    } catch {
      code = undefined;
    }
    return { status: r.status, code };
  } catch {
    return { status: "no answer", code: undefined };
  }
}

async function waitAcked(load: ForwardedWrites, count: number): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (load.acked() < count) {
    if (Date.now() > deadline) throw new Error(`only ${load.acked()} of ${count} forwarded writes acknowledged`);
    await Bun.sleep(20);
  }
}

/** Kill the leader while the followers forward writes to it; restart it once the others lead. */
async function killLeaderUnderForwardedWrites(cluster: Cluster, prefix: string): Promise<ForwardedWrites> {
  const leader = await cluster.waitLeader();
  const followers = cluster.others(leader);
  const load = new ForwardedWrites(followers, 8, prefix);
  try {
    await waitAcked(load, 100);
    await cluster.kill9(leader);
    await cluster.waitLeader(followers);
    const before = load.acked();
    await waitAcked(load, before + 50);
  } finally {
    await load.stop();
  }
  leader.spawn();
  await cluster.waitHealthy(leader);
  return load;
}

describe("the client error contract when the leader dies under forwarded writes", () => {
  beforeAll(() => {
    ensureBinary();
  });

  clusterTest("no write answered with a not-applied code is ever found applied, and every error names its code", {}, async (cluster) => {
    await cluster.start();
    await execute(cluster.nodes[0]!.clientUrl, [kvSchema]);
    const answers = new Map<string, Answer>();
    for (let round = 0; round < 3; round++) {
      const load = await killLeaderUnderForwardedWrites(cluster, `r${round}`);
      for (const [k, a] of load.answers) answers.set(k, a);
    }
    await cluster.waitConverged();
    const leader = await cluster.waitLeader();
    const present = new Set((await cluster.dump(leader, kvTable)).map((row) => String(row[0])));

    const problems: string[] = [];
    const tally = new Map<string, number>();
    for (const [key, a] of answers) {
      const label = a.status === 200 ? "200" : `${a.status} ${a.code ?? "(no code)"}`;
      tally.set(label, (tally.get(label) ?? 0) + 1);
      if (a.status === 200 && !present.has(key)) problems.push(`${key}: acknowledged but missing`);
      if (typeof a.status === "number" && a.status !== 200 && a.code === undefined) problems.push(`${key}: answered ${a.status} without an error code`);
      const notApplied = (typeof a.status === "number" && a.status >= 400 && a.status < 500) || (a.status === 503 && a.code !== undefined && notAppliedCodes.has(a.code));
      if (notApplied && present.has(key)) problems.push(`${key}: answered ${a.status} ${a.code} (not applied), yet it is applied`);
    }
    console.log(`forwarded writes by answer: ${JSON.stringify(Object.fromEntries(tally))}`);
    expect(problems.slice(0, 20)).toEqual([]);
  }, 180_000);
});
