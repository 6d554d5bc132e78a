// Shared pieces of the benchmarks: starting svc nodes, a closed-loop HTTP load generator
// with latency percentiles, and reading a process's RSS.

import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { renderConfigToml, type ConfigDraft } from "../src/config/index.ts";

export interface LoadResult {
  ops: number;
  errors: number;
  opsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
}

/**
 * A free loopback port, never one handed out before in this process: ports got by binding port 0
 * came back twice now and then, and a cluster whose config named one port twice never started.
 * The test harness's choice (below the kernel's ephemeral range, TCP and UDP both free).
 */
export { freePort } from "../test/lib/proc-ports.ts";

export interface Ports {
  client: number;
  admin: number;
  peer: number;
}

export function startSvc(
  bin: string[], dir: string, id: string, ports: Ports, members: (Ports & { id: string })[], bootstrap: boolean,
  extra: Pick<ConfigDraft, "tls" | "auth" | "maxMemoryBytes"> = {},
): Bun.Subprocess {
  const dataDir = join(dir, id);
  mkdirSync(dataDir, { recursive: true });
  const configPath = join(dir, `${id}.toml`);
  const addr = (p: number): string => `127.0.0.1:${p}`;
  writeFileSync(configPath, renderConfigToml({
    nodeId: id,
    dataDir,
    listen: { client: addr(ports.client), admin: addr(ports.admin), peer: addr(ports.peer) },
    cluster: { bootstrap, members: members.map((m) => ({ id: m.id, peer: addr(m.peer), client: addr(m.client), admin: addr(m.admin) })) },
    ...extra,
  }));
  return Bun.spawn([...bin, "serve", "--config", configPath], {
    stdout: "ignore",
    stderr: Bun.file(join(dir, `${id}.log`)),
    env: { ...process.env, RUST_LOG: process.env.RUST_LOG ?? "warn" },
  });
}

export async function waitHealthy(adminBase: string, timeoutMs: number, init: BunFetchRequestInit = {}): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const r = await fetch(`${adminBase}/health`, init);
      if (r.ok) return;
    } catch {
      // not up yet
    }
    await Bun.sleep(50);
  }
  throw new Error(`${adminBase} did not become healthy within ${timeoutMs} ms`);
}

export interface PostResult {
  ok: boolean;
  status: number;
  text: string;
}

export type Post = (url: string, body: string) => Promise<PostResult>;

export const fetchPost: Post = async (url, body) => {
  const r = await fetch(url, { method: "POST", body, headers: { "content-type": "application/json" } });
  return { ok: r.ok, status: r.status, text: await r.text() };
};

/**
 * Closed loop: `clients` workers, each sending its next request when the last is answered.
 * `post` sends one request (fetch unless given; bench/_http1.ts is a cheaper client).
 */
export async function runLoad(options: {
  url: string | (() => string);
  clients: number;
  durationMs: number;
  body: () => string;
  post?: Post;
  /** Go on past durationMs until this says enough. */
  until?: () => boolean;
}): Promise<LoadResult> {
  const post = options.post ?? fetchPost;
  const latencies: number[] = [];
  let errors = 0;
  let firstError = "";
  const started = performance.now();
  const deadline = started + options.durationMs;
  const worker = async (): Promise<void> => {
    while (performance.now() < deadline || (options.until !== undefined && !options.until())) {
      const url = typeof options.url === "string" ? options.url : options.url();
      const t0 = performance.now();
      try {
        const r = await post(url, options.body());
        if (r.ok) latencies.push(performance.now() - t0);
        else {
          errors++;
          firstError ||= `${r.status} ${r.text.slice(0, 200)}`;
        }
      } catch (e) {
        errors++;
        firstError ||= String(e);
      }
    }
  };
  await Promise.all(Array.from({ length: options.clients }, worker));
  const elapsedMs = performance.now() - started;
  if (firstError !== "") process.stdout.write(`  (${errors} errors; first: ${firstError})\n`);
  return summarize(latencies, errors, elapsedMs);
}

export function summarize(latencies: number[], errors: number, elapsedMs: number): LoadResult {
  const sorted = Float64Array.from(latencies).sort();
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
  return { ops: sorted.length, errors, opsPerSecond: (sorted.length * 1000) / elapsedMs, p50Ms: at(0.5), p99Ms: at(0.99) };
}

export function printRow(label: string, r: LoadResult): void {
  process.stdout.write(
    `${label.padEnd(34)} ${r.opsPerSecond.toFixed(0).padStart(8)} ops/s   p50 ${r.p50Ms.toFixed(2).padStart(7)} ms   p99 ${r.p99Ms.toFixed(2).padStart(7)} ms   (${r.ops} ok, ${r.errors} errors)\n`,
  );
}

export function rssBytesOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const m = /VmRSS:\s+(\d+) kB/.exec(status);
  return m === null ? 0 : Number(m[1]) * 1024;
}

/** CPU time (user + system) a process has used so far; /proc counts it in USER_HZ = 100 ticks. */
export function cpuMsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name, which may itself hold spaces: utime and stime are 14 and 15.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** The peak RSS (VmHWM) of a process, in MB; 0 when it is gone. */
export function peakRssMb(pid: number): number {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m === null ? 0 : Number(m[1]) / 1024;
  } catch {
    return 0;
  }
}

/** The leader-kill rows' writers abandon a request unanswered after this, and send another. */
const leaderKillRequestTimeoutMs = 250;

/**
 * 64 writers on the leader for 2 s, then kill() (SIGKILL of the leader) and the writers move to
 * the survivors (which forward to whichever of them leads next): the time from the kill to the
 * first write a survivor acknowledges. A writer abandons a request unanswered after 250 ms (etcd
 * holds a write that reached a member during the election until its own timeout) and sends
 * another. NaN when none succeeds within 30 s.
 */
export async function leaderKillMs(o: {
  leader: number;
  survivors: readonly number[];
  write: (member: number) => { url: string; body: () => string };
  kill: () => void;
  post: Post;
}): Promise<number> {
  let killedAt = 0;
  let firstOkMs = Number.NaN;
  let stop = false;
  const writers = Array.from({ length: 64 }, async (_, w) => {
    let turn = w;
    while (!stop) {
      const member = killedAt === 0 ? o.leader : (o.survivors[turn++ % o.survivors.length] ?? 0);
      const load = o.write(member);
      const r = await Promise.race([
        o.post(load.url, load.body()).catch(() => ({ ok: false })),
        Bun.sleep(leaderKillRequestTimeoutMs).then(() => ({ ok: false })),
      ]);
      if (r.ok && killedAt > 0 && member !== o.leader && Number.isNaN(firstOkMs)) firstOkMs = performance.now() - killedAt;
      if (!r.ok) await Bun.sleep(5);
    }
  });
  await Bun.sleep(2000);
  killedAt = performance.now();
  o.kill();
  while (Number.isNaN(firstOkMs) && performance.now() - killedAt < 30_000) await Bun.sleep(10);
  stop = true;
  await Promise.all(writers);
  return firstOkMs;
}
