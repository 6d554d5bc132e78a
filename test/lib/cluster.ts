// A cluster of real svc processes on loopback for the cluster and fault tests, built on the
// process harness (proc*.ts): start N nodes that know each other, find the leader, wait for
// every node to have applied the same log, compare table dumps, and pause nodes with SIGSTOP.
// clusterTest() gives each test its own temp dir and ports and, whatever happens, resumes
// every paused node, closes the peer proxies and kills every process at the end.

import { expect, test } from "bun:test";
import type { ConfigDraft } from "../../src/config/index.ts";
import { PeerProxies } from "./cluster-proxy.ts";
import { addressText, clusterConfigs, type DraftOverrides } from "./proc-config.ts";
import { ProcEnv } from "./proc-env.ts";
import { GiveUp, executeRaw, postJson, queryRaw, request, waitFor, type ErrorBody, type ExecuteBody, type SqlValue, type StatementInput } from "./proc-http.ts";
import type { NodeProcess } from "./proc-node.ts";
import { freePorts } from "./proc-ports.ts";
import type { HealthBody as Health } from "./proc-cluster.ts";
import { kvTable, type Ledger } from "./proc-load.ts";

export type { HealthBody as Health } from "./proc-cluster.ts";

/**
 * Short Raft timings so that a failover takes well under a second; the election timeout is
 * the minimum the config accepts relative to the heartbeat (5 ×) times two, so a busy test
 * machine does not cause spurious elections.
 */
export const fastRaft = { heartbeatIntervalMs: 50, electionTimeoutMs: 500 } as const;

export interface ClusterOptions {
  count?: number;
  /** Config keys for every node (snapshot_interval, wal, …); raft defaults to fastRaft. */
  overrides?: DraftOverrides;
  /**
   * Route every peer connection through a proxy in the test process (one per ordered pair of
   * nodes), so that a test can cut links: see Cluster.isolate / Cluster.heal.
   */
  proxied?: boolean;
}

export class Cluster {
  private readonly paused = new Set<NodeProcess>();

  constructor(
    readonly env: ProcEnv,
    readonly nodes: readonly NodeProcess[],
    readonly proxies: PeerProxies | null,
  ) {}

  static async create(env: ProcEnv, options: ClusterOptions = {}): Promise<Cluster> {
    const overrides: DraftOverrides = { raft: fastRaft, ...options.overrides };
    const configs = await clusterConfigs(env.dir, options.count ?? 3, overrides);
    if (options.proxied !== true) return new Cluster(env, configs.map((c) => env.node(c)), null);
    const proxies = new PeerProxies();
    try {
      const proxied: ConfigDraft[] = [];
      for (const config of configs) {
        const members = config.cluster?.members ?? [];
        const own = members.map(async (m) => {
          if (m.id === config.nodeId) return m;
          // This node reaches peer m through its own proxy: cutting it drops config.nodeId → m.
          const [port] = await freePorts(1);
          if (port === undefined) throw new Error("no free port for a peer proxy");
          await proxies.add(config.nodeId, m.id, port, addressText(m.peer, `${m.id} peer`));
          return { ...m, peer: `127.0.0.1:${port}` };
        });
        proxied.push({ ...config, cluster: { ...config.cluster, members: await Promise.all(own) } });
      }
      return new Cluster(env, proxied.map((c) => env.node(c)), proxies);
    } catch (e) {
      proxies.close();
      throw e;
    }
  }

  node(id: string): NodeProcess {
    const n = this.nodes.find((x) => x.nodeId === id);
    if (n === undefined) throw new Error(`no node ${id} in this cluster`);
    return n;
  }

  /** Nodes that run and are not paused: the ones that can answer. */
  get live(): NodeProcess[] {
    return this.nodes.filter((n) => n.running && !this.paused.has(n));
  }

  others(...excluded: NodeProcess[]): NodeProcess[] {
    return this.nodes.filter((n) => !excluded.includes(n));
  }

  /** Start every node at once (node1 bootstraps; the others receive the log) and wait until all are healthy. */
  async start(): Promise<void> {
    for (const n of this.nodes) n.spawn();
    await Promise.all(this.nodes.map((n) => n.waitHealthy()));
    await this.waitLeader();
  }

  /** The node's health, or null when it does not answer (down, paused, overloaded). */
  async health(node: NodeProcess, timeoutMs = 1_000): Promise<Health | null> {
    if (!node.running) return null;
    try {
      const r = await request<Health>(`${node.clientUrl}/health`, { timeoutMs });
      return r.body ?? null;
    } catch {
      return null;
    }
  }

  /** Wait until the node reports itself healthy; a failure names the last /health answer. */
  async waitHealthy(node: NodeProcess, deadlineMs = 20_000): Promise<void> {
    let last: Health | null = null;
    await waitFor(`${node.nodeId} to be healthy`, async () => {
      last = await this.health(node);
      return last?.status === "ok";
    }, { deadlineMs }).catch((e: unknown) => {
      throw new Error(`${e instanceof Error ? e.message : String(e)}; last /health: ${JSON.stringify(last)}`);
    });
  }

  /**
   * Wait until exactly one of `among` is leader and every healthy node of `among` names it:
   * a stable leader that the others follow.
   */
  async waitLeader(among: readonly NodeProcess[] = this.live, deadlineMs = 20_000): Promise<NodeProcess> {
    return waitFor(`one leader among ${among.map((n) => n.nodeId).join(", ")}`, async () => {
      const hs = await Promise.all(among.map((n) => this.health(n)));
      const leaders = among.filter((_, i) => hs[i]?.role === "leader" && hs[i]?.status === "ok");
      const leader = leaders[0];
      if (leaders.length !== 1 || leader === undefined) return false;
      const agreed = hs.every((h) => h !== null && h.leader === leader.nodeId);
      return agreed ? leader : false;
    }, { deadlineMs });
  }

  /**
   * Wait until `nodes` are healthy and have applied the same index, at least the commit index
   * any of them reports: with no writes in flight, they then hold the same state.
   */
  async waitConverged(nodes: readonly NodeProcess[] = this.nodes, deadlineMs = 30_000): Promise<number> {
    return waitFor(`${nodes.map((n) => n.nodeId).join(", ")} to apply the same index`, async () => {
      const hs = await Promise.all(nodes.map((n) => this.health(n)));
      if (hs.some((h) => h === null || h.status !== "ok")) return false;
      const commit = Math.max(...hs.map((h) => h?.commit_index ?? 0));
      return hs.every((h) => h?.applied_index === commit) ? commit : false;
    }, { deadlineMs, intervalMs: 50 });
  }

  /** Wait until `node` has applied at least what the leader has committed now. */
  async waitCaughtUp(node: NodeProcess, deadlineMs = 30_000): Promise<void> {
    await waitFor(`${node.nodeId} to apply the leader's commit index`, async () => {
      const leader = await this.waitLeader(this.live, deadlineMs);
      const lh = await this.health(leader);
      const h = await this.health(node);
      return lh !== null && h !== null && h.status === "ok" && h.applied_index >= lh.commit_index;
    }, { deadlineMs, intervalMs: 50 });
  }

  /** A table's full contents as this node holds it (consistency "stale": no leader needed). */
  async dump(node: NodeProcess, table: string): Promise<SqlValue[][]> {
    const r = await queryRaw(node.clientUrl, `SELECT * FROM ${table} ORDER BY 1`, [], "stale");
    if (r.status !== 200 || r.body === undefined) throw new Error(`dump of ${table} on ${node.nodeId} answered ${r.status}: ${r.text}`);
    return r.body.rows;
  }

  /**
   * Execute through any live node, trying them in turn until one acknowledges. Only for
   * idempotent statements (INSERT OR REPLACE …): a retried write whose first attempt timed out
   * may apply twice.
   */
  async executeAnywhere(statements: readonly StatementInput[], deadlineMs = 20_000): Promise<number> {
    let turn = 0;
    return waitFor("a node to acknowledge the write", async () => {
      const live = this.live;
      const node = live[turn++ % Math.max(1, live.length)];
      if (node === undefined) return false;
      const r = await executeRaw(node.clientUrl, statements, 5_000);
      if (r.status === 200 && r.body !== undefined) return r.body.index;
      if (r.status === 400) throw new Error(`write refused by ${node.nodeId}: ${r.text}`);
      return false;
    }, { deadlineMs, intervalMs: 50 });
  }

  /**
   * Execute a write exactly once whatever happens to the leadership meanwhile, as README's safe
   * retries say: sent with `requestId` through the live nodes in turn, and sent again with the
   * same id on any answer that does not settle it (OUTCOME_UNKNOWN, NOT_LEADER, no answer). For
   * any write, idempotent or not; a refusal (4xx) ends the wait.
   */
  async executeOnce(statements: readonly StatementInput[], requestId: string, deadlineMs = 60_000): Promise<number> {
    let turn = 0;
    return waitFor(`write ${requestId} to be acknowledged`, async () => {
      const live = this.live;
      const node = live[turn++ % Math.max(1, live.length)];
      if (node === undefined) return false;
      const r = await postJson<ExecuteBody & ErrorBody>(`${node.clientUrl}/v1/execute`, { request_id: requestId, statements }, 10_000).catch(() => null);
      if (r === null) return false;
      if (r.status === 200 && r.body !== undefined) return r.body.index;
      if (r.status < 500) throw new GiveUp(`write ${requestId} refused by ${node.nodeId}: ${r.status} ${r.text}`);
      return false;
    }, { deadlineMs, intervalMs: 50 });
  }

  /** SIGSTOP: the process keeps its sockets but answers nothing, like a host that froze. */
  pause(node: NodeProcess): void {
    const pid = node.pid;
    if (pid === null || !node.running) throw new Error(`${node.nodeId} is not running`);
    process.kill(pid, "SIGSTOP");
    this.paused.add(node);
  }

  resume(node: NodeProcess): void {
    const pid = node.pid;
    this.paused.delete(node);
    if (pid !== null && node.running) process.kill(pid, "SIGCONT");
  }

  isPaused(node: NodeProcess): boolean {
    return this.paused.has(node);
  }

  resumeAll(): void {
    for (const n of [...this.paused]) this.resume(n);
  }

  /** kill -9 (a paused node is resumed first, so that nothing is left stopped). */
  async kill9(node: NodeProcess): Promise<void> {
    if (this.paused.has(node)) this.resume(node);
    await node.kill9();
  }

  /** Cut every peer link to and from `node` (needs proxied: true). */
  isolate(node: NodeProcess): void {
    this.requireProxies().isolate(node.nodeId);
  }

  /** Cut the peer link between two nodes, both directions; each still reaches the others (needs proxied: true). */
  cutLink(a: NodeProcess, b: NodeProcess): void {
    this.requireProxies().setLink(a.nodeId, b.nodeId, true);
  }

  /** Restore every peer link. */
  heal(): void {
    this.proxies?.healAll();
  }

  private requireProxies(): PeerProxies {
    if (this.proxies === null) throw new Error("this cluster was created without proxied: true");
    return this.proxies;
  }

  /** Leave nothing behind: resume paused nodes, close proxies, kill every process. */
  async dispose(): Promise<void> {
    this.resumeAll();
    this.proxies?.close();
    await this.env.dispose();
  }
}

/** Whether this run of the node logged the recovery transition into `state`. */
export function passedThrough(node: NodeProcess, state: string): boolean {
  return node.lastRunLog().includes(`-> ${state}`);
}

/** The states this run of the node went through, in order (from its "recovery: a -> b" log lines). */
export function recoveryPath(node: NodeProcess): string[] {
  const path: string[] = [];
  for (const m of node.lastRunLog().matchAll(/recovery: ([a-z_]+) -> ([a-z_]+)/g)) {
    if (path.length === 0 && m[1] !== undefined) path.push(m[1]);
    if (m[2] !== undefined) path.push(m[2]);
  }
  return path;
}

/**
 * A test with its own cluster: fresh temp dir and ports; at the end, even on failure, paused
 * nodes are resumed, proxies closed and every process killed. On failure each node's log tail
 * is printed and the temp dir kept.
 */
export function clusterTest(name: string, options: ClusterOptions, fn: (cluster: Cluster) => Promise<void>, timeoutMs = 90_000): void {
  test(name, async () => {
    const env = new ProcEnv(name);
    let cluster: Cluster | null = null;
    try {
      cluster = await Cluster.create(env, options);
      await fn(cluster);
    } catch (e) {
      cluster?.resumeAll();
      env.reportFailure(e);
      throw e;
    } finally {
      if (cluster !== null) await cluster.dispose();
      else await env.dispose();
    }
  }, timeoutMs);
}

/** Every node holds the same rows, and they are exactly what the clients were told. */
export async function expectSameData(cluster: Cluster, ledger: Ledger): Promise<void> {
  await cluster.waitConverged();
  const leader = await cluster.waitLeader();
  const reference = await cluster.dump(leader, kvTable);
  expect(ledger.check(reference).slice(0, 20)).toEqual([]);
  for (const n of cluster.nodes) expect(await cluster.dump(n, kvTable)).toEqual(reference);
}
