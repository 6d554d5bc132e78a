// Linearizability of svc under faults. Six clients read (consistency linearizable), write
// (INSERT OR REPLACE) and compare-and-set (UPDATE … WHERE v = expected; rows_affected says
// whether it swapped) three keys through random nodes of a three-node cluster, while a
// seeded nemesis kills -9 and restarts nodes, freezes them with SIGSTOP and cuts their peer
// links. Every operation is recorded with its call and return time; a write or CAS without a
// definite answer has an unknown outcome (it may have happened, or not). After the faults
// are healed every node must hold the same table and serve linearizable reads again, the
// history (those reads and the final state included) must be linearizable, and the final
// value of each key must be one that no acknowledged write had already overwritten.
//
// The seed is printed first; SEED=<n> replays the same fault schedule and the same client
// choices (the interleaving is the operating system's).

import { beforeAll, describe, expect } from "bun:test";
import { createPrng, type Prng } from "../../src/util/prng.ts";
import { clusterTest, type Cluster } from "../lib/cluster.ts";
import { checkLinearizable, describeOperation, type Operation } from "../lib/linearizability.ts";
import { Nemesis, describeFault, drawSchedule } from "../lib/nemesis.ts";
import { ensureBinary, execute, useProcessCleanup, waitFor, type NodeProcess } from "../lib/proc.ts";

useProcessCleanup();

const seed = process.env.SEED !== undefined && process.env.SEED !== "" ? Number(process.env.SEED) : Date.now() % 2_147_483_647;
console.log(`test/fault/linearizable.test.ts: SEED=${seed}`);

const keys = ["a", "b", "c"] as const;
const clientsCount = 6;
const nemesisRunMs = 22_000;
/**
 * Long enough for a forwarded write to come back in normal operation, short enough to keep
 * clients busy during faults. A read that times out is simply dropped, so reads wait less.
 */
const writeTimeoutMs = 2_500;
const readTimeoutMs = 1_000;

type Answer = { kind: "ok"; body: Record<string, unknown> } | { kind: "refused" } | { kind: "unknown"; why: string };

/**
 * One request. "refused" only when it is certain that nothing was done: the connection was
 * refused (the node is down) or the request was rejected as malformed. Any other failure may
 * come after the statement entered the log.
 */
async function call(node: NodeProcess, path: "/v1/query" | "/v1/execute", payload: unknown): Promise<Answer> {
  try {
    const r = await fetch(`${node.clientUrl}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(payload),
      signal: AbortSignal.timeout(path === "/v1/query" ? readTimeoutMs : writeTimeoutMs),
    });
    const text = await r.text();
    if (r.status === 200) return { kind: "ok", body: JSON.parse(text) as Record<string, unknown> };
    if (r.status === 400 || r.status === 413) return { kind: "refused" };
    return { kind: "unknown", why: `${r.status} ${text.slice(0, 120)}` };
  } catch (e) {
    const code = (e as { code?: unknown }).code;
    if (code === "ConnectionRefused" || code === "ECONNREFUSED") return { kind: "refused" };
    return { kind: "unknown", why: e instanceof Error ? e.message : String(e) };
  }
}

class History {
  readonly ops: Operation[] = [];
  readonly counts = new Map<string, number>();
  private readonly t0 = performance.now();

  now(): number {
    return performance.now() - this.t0;
  }

  add(op: Operation, outcome: string): void {
    this.ops.push(op);
    const label = `${op.kind}:${outcome}`;
    this.counts.set(label, (this.counts.get(label) ?? 0) + 1);
  }

  note(label: string): void {
    this.counts.set(label, (this.counts.get(label) ?? 0) + 1);
  }

  summary(): string {
    return [...this.counts].sort().map(([k, v]) => `${k}=${v}`).join(" ");
  }
}

async function runClient(clientId: number, cluster: Cluster, prng: Prng, history: History, stopped: () => boolean): Promise<void> {
  const lastSeen = new Map<string, number>();
  let seq = 0;
  while (!stopped()) {
    const node = cluster.nodes[prng.nextInt(cluster.nodes.length)]!;
    const key = keys[prng.nextInt(keys.length)]!;
    const dice = prng.next();
    const callMs = history.now();
    let failed = false;
    if (dice < 0.5) {
      const a = await call(node, "/v1/query", { sql: "SELECT v FROM kv WHERE k = ?", params: [key], consistency: "linearizable" });
      if (a.kind === "ok") {
        const rows = a.body["rows"] as unknown[][];
        const value = (rows[0]?.[0] ?? null) as number | null;
        history.add({ clientId, key, kind: "read", output: value, callMs, returnMs: history.now() }, "ok");
        if (value !== null) lastSeen.set(key, value);
      } else {
        // A read without an answer constrains nothing: it is left out.
        history.note(`read:${a.kind}`);
        failed = true;
      }
    } else {
      // Unique values: a value read back names the one operation that wrote it.
      const value = clientId * 1_000_000 + ++seq;
      if (dice < 0.75) {
        const a = await call(node, "/v1/execute", { statements: [{ sql: "INSERT OR REPLACE INTO kv (k, v) VALUES (?, ?)", params: [key, value] }] });
        if (a.kind === "refused") history.note("write:refused");
        else history.add({ clientId, key, kind: "write", input: value, callMs, returnMs: a.kind === "ok" ? history.now() : Infinity }, a.kind);
        if (a.kind === "ok") lastSeen.set(key, value);
        failed = a.kind !== "ok";
      } else {
        const expected = lastSeen.get(key) ?? 0;
        const a = await call(node, "/v1/execute", { statements: [{ sql: "UPDATE kv SET v = ? WHERE k = ? AND v = ?", params: [value, key, expected] }] });
        if (a.kind === "refused") history.note("cas:refused");
        else if (a.kind === "unknown") history.add({ clientId, key, kind: "cas", input: { expected, new: value }, output: null, callMs, returnMs: Infinity }, "unknown");
        else {
          const results = a.body["results"] as { rows_affected: number }[];
          const swapped = results[0]?.rows_affected === 1;
          history.add({ clientId, key, kind: "cas", input: { expected, new: value }, output: swapped, callMs, returnMs: history.now() }, swapped ? "swapped" : "not_swapped");
          if (swapped) lastSeen.set(key, value);
          else lastSeen.delete(key);
        }
        failed = a.kind !== "ok";
      }
    }
    // Pace retries against a node that is down or cut off instead of spinning on it.
    if (failed) await Bun.sleep(50 + prng.nextInt(100));
  }
}

/**
 * The final value of every key, read once the faults are healed and every node has applied
 * the same index (so the table holds every committed write), and recorded as reads that
 * follow every client operation. The table is read with consistency "stale" from each node:
 * all must agree, and no leader round is needed, so the final check does not depend on the
 * read path under test.
 */
async function finalState(cluster: Cluster, history: History): Promise<Map<string, number | null>> {
  const callMs = history.now();
  await cluster.waitConverged();
  const dumps = await Promise.all(cluster.nodes.map((n) => cluster.dump(n, "kv")));
  const returnMs = history.now();
  for (const [i, dump] of dumps.entries()) expect({ node: cluster.nodes[i]!.nodeId, dump }).toEqual({ node: cluster.nodes[i]!.nodeId, dump: dumps[0]! });
  const finals = new Map<string, number | null>();
  for (const key of keys) {
    const value = (dumps[0]!.find((row) => row[0] === key)?.[1] ?? null) as number | null;
    finals.set(key, value);
    history.add({ clientId: "final", key, kind: "read", output: value, callMs, returnMs }, "final");
  }
  return finals;
}

/**
 * Once healed, every node serves linearizable reads again (none is left waiting on a leader
 * that went away during the faults); each answer joins the history like any other read.
 */
async function readEverywhere(cluster: Cluster, history: History): Promise<void> {
  for (const node of cluster.nodes) {
    for (const key of keys) {
      await waitFor(`${node.nodeId} to answer a linearizable read of ${key} after healing`, async () => {
        const callMs = history.now();
        const a = await call(node, "/v1/query", { sql: "SELECT v FROM kv WHERE k = ?", params: [key], consistency: "linearizable" });
        // Thrown, so that a failed wait names the last answer.
        if (a.kind !== "ok") throw new Error(a.kind === "unknown" ? a.why : a.kind);
        const value = ((a.body["rows"] as unknown[][])[0]?.[0] ?? null) as number | null;
        history.add({ clientId: `after-${node.nodeId}`, key, kind: "read", output: value, callMs, returnMs: history.now() }, "after_heal");
        return true;
      }, { deadlineMs: 15_000 });
    }
  }
}

/**
 * No acknowledged write lost: the final value of a key was written by some operation W, and
 * no write or CAS that was acknowledged as applied started after W was acknowledged (it
 * would have replaced W's value, and values are never written twice).
 */
function lostWrites(history: readonly Operation[], key: string, finalValue: number | null): string[] {
  const ops = history.filter((op) => op.key === key && op.kind !== "read");
  const stores = (op: Operation): number | null =>
    op.kind === "write" ? (op.input as number) : op.kind === "cas" && op.output !== false ? (op.input.new as number) : null;
  const writer = ops.find((op) => stores(op) === finalValue);
  if (writer === undefined) return [`key ${key}: final value ${finalValue} was never written`];
  const later = ops.filter((op) => op !== writer && op.returnMs !== Infinity && (op.kind === "write" || op.output === true) && op.callMs > writer.returnMs);
  return later.slice(0, 5).map((op) => `key ${key}: final value ${finalValue} from ${describeOperation(writer)} although a later acknowledged ${describeOperation(op)} replaced it`);
}

describe("linearizability under faults", () => {
  beforeAll(() => {
    ensureBinary();
  });

  const schedule = drawSchedule({ seed, nodeIds: ["node1", "node2", "node3"], runMs: nemesisRunMs });

  clusterTest(`reads, writes and compare-and-set through random nodes stay linearizable under kill -9, SIGSTOP and partitions, and no acknowledged write is lost (SEED=${seed})`, {
    proxied: true,
    // Small, so that snapshots are taken and sent to restarted nodes during the run.
    overrides: { snapshotIntervalEntries: 500 },
  }, async (cluster) => {
    console.log(`nemesis schedule (SEED=${seed}):\n  ${schedule.map(describeFault).join("\n  ")}`);
    await cluster.start();
    const history = new History();
    await execute(cluster.nodes[0]!.clientUrl, ["CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER)"]);
    for (const key of keys) {
      const callMs = history.now();
      await execute(cluster.nodes[0]!.clientUrl, [{ sql: "INSERT INTO kv (k, v) VALUES (?, 0)", params: [key] }]);
      history.add({ clientId: "init", key, kind: "write", input: 0, callMs, returnMs: history.now() }, "init");
    }

    const nemesis = new Nemesis(cluster, schedule);
    let stopped = false;
    const clients = Array.from({ length: clientsCount }, (_, i) => runClient(i + 1, cluster, createPrng(seed, i + 1), history, () => stopped));
    try {
      await nemesis.run();
    } finally {
      stopped = true;
      nemesis.stop();
      await Promise.all(clients);
      console.log(`nemesis did:\n  ${nemesis.log.join("\n  ")}`);
      await nemesis.heal();
    }
    console.log(`history: ${history.ops.length} operations recorded; ${history.summary()}`);

    const finals = await finalState(cluster, history);
    await readEverywhere(cluster, history);

    const problems = keys.flatMap((k) => lostWrites(history.ops, k, finals.get(k) ?? null));
    expect(problems).toEqual([]);

    const checkStartedMs = performance.now();
    const verdict = checkLinearizable(history.ops, { timeoutMs: 20_000 });
    console.log(`linearizability check: ${verdict.ok === true ? "linearizable" : verdict.ok === false ? "NOT linearizable" : "inconclusive"} (${Math.round(performance.now() - checkStartedMs)} ms)`);
    if (verdict.ok !== true) console.error(verdict.ok === false ? verdict.explanation : verdict.reason);
    expect(verdict.ok).toBe(true);
    // The run did something under faults: acknowledged writes and reads on every key.
    expect(history.counts.get("write:ok") ?? 0).toBeGreaterThan(0);
    expect(history.counts.get("read:ok") ?? 0).toBeGreaterThan(0);
  }, 120_000);
});
