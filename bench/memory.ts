// The memory part of `bun run bench -- --memory [--memory-mb SIZES]`: one node per max_memory_mb
// setting (default 128,512) under three queries that would answer 100 M rows and a burst of 32 clients
// each writing 8 rows of 512 KiB (a refused write is retried after 20 ms). The node's RSS and its
// SQL processes' are sampled every 20 ms: the peak of their sum (VmRSS, as the ceiling counts
// it), and of their PSS (shared pages of the binary counted once), against max_memory_mb + 64 MB.
// Prints figures; asserts nothing.

import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, startSvc, waitHealthy } from "./_lib.ts";

const MIB = 2 ** 20;
const heavyQuery = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 100000000) SELECT x, randomblob(100) FROM c";
const clientsCount = 32;
const writesPerClient = 8;
const valueBytes = 512 * 1024;

function tree(pid: number): number[] {
  const out = [pid];
  for (let i = 0; i < out.length; i++) {
    try {
      for (const task of readdirSync(`/proc/${out[i]}/task`)) {
        const text = readFileSync(`/proc/${out[i]}/task/${task}/children`, "utf8").trim();
        if (text !== "") out.push(...text.split(/\s+/).map(Number));
      }
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

function kib(path: string, field: string): number {
  try {
    const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(path, "utf8"));
    return m === null ? 0 : Number(m[1]) * 1024;
  } catch {
    return 0;
  }
}

interface Peaks {
  rss: number;
  nodeRss: number;
  pss: number;
}

function sampler(pid: number): { stop: () => Peaks } {
  const peaks: Peaks = { rss: 0, nodeRss: 0, pss: 0 };
  const sample = (): void => {
    const pids = tree(pid);
    const rss = pids.reduce((s, p) => s + kib(`/proc/${p}/status`, "VmRSS"), 0);
    const pss = pids.reduce((s, p) => s + kib(`/proc/${p}/smaps_rollup`, "Pss"), 0);
    peaks.rss = Math.max(peaks.rss, rss);
    peaks.pss = Math.max(peaks.pss, pss);
    peaks.nodeRss = Math.max(peaks.nodeRss, kib(`/proc/${pid}/status`, "VmRSS"));
  };
  const timer = setInterval(sample, 20);
  sample();
  return { stop: () => (clearInterval(timer), sample(), peaks) };
}

async function post(url: string, body: unknown): Promise<{ status: number; code: string }> {
  const r = await fetch(url, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } });
  const text = await r.text();
  let code = "";
  try {
    code = (JSON.parse(text) as { error?: { code?: string } }).error?.code ?? "";
  } catch {
    // not JSON
  }
  return { status: r.status, code };
}

export async function benchMemory(options: { bin: string[]; sizesMb: number[] }): Promise<void> {
  process.stdout.write(`memory: ${clientsCount} clients × ${writesPerClient} writes of ${valueBytes / 1024} KiB, 3 queries of 100 M rows; peaks of node + SQL processes\n`);
  for (const mb of options.sizesMb) {
    const dir = mkdtempSync(join(tmpdir(), `svc-bench-memory-${mb}-`));
    const ports = { client: await freePort(), admin: await freePort(), peer: await freePort() };
    const proc = startSvc(options.bin, dir, "node1", ports, [{ id: "node1", ...ports }], true, { maxMemoryBytes: mb * MIB });
    const client = `http://127.0.0.1:${ports.client}`;
    try {
      await waitHealthy(`http://127.0.0.1:${ports.admin}`, 60_000);
      await post(`${client}/v1/execute`, { statements: ["CREATE TABLE burst (k TEXT, v TEXT)"] });
      const watch = sampler(proc.pid);
      const t0 = performance.now();
      let refused = 0;
      const queries = [1, 2, 3].map(() => post(`${client}/v1/query`, { sql: heavyQuery }));
      const writer = async (c: number): Promise<void> => {
        for (let i = 0; i < writesPerClient; i++) {
          for (;;) {
            const r = await post(`${client}/v1/execute`, { statements: [{ sql: "INSERT INTO burst (k, v) VALUES (?, ?)", params: [`c${c}-${i}`, "v".repeat(valueBytes)] }] });
            if (r.status === 200) break;
            refused++;
            await Bun.sleep(20);
          }
        }
      };
      const [answers] = await Promise.all([Promise.all(queries), Promise.all(Array.from({ length: clientsCount }, (_, c) => writer(c)))]);
      const elapsedS = (performance.now() - t0) / 1000;
      const peaks = watch.stop();
      const written = clientsCount * writesPerClient;
      const queryCodes = [...new Set(answers.map((a) => a.code || String(a.status)))].join(",");
      process.stdout.write(
        `max_memory_mb ${String(mb).padStart(5)}: peak RSS ${(peaks.rss / MIB).toFixed(0).padStart(4)} MB (node ${(peaks.nodeRss / MIB).toFixed(0)} MB), ` +
        `peak PSS ${(peaks.pss / MIB).toFixed(0).padStart(4)} MB, bound ${mb + 64} MB; ${written} writes in ${elapsedS.toFixed(1)} s ` +
        `(${(written / elapsedS).toFixed(0)}/s, ${refused} refused with 503), queries: ${queryCodes}\n`,
      );
    } finally {
      proc.kill("SIGKILL");
      await proc.exited;
      rmSync(dir, { recursive: true, force: true });
    }
  }
}
