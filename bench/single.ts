// Single-node benchmark: one svc node, fsync on, 256-byte values through POST /v1/execute
// with 1, 64 and 256 concurrent clients; then RSS after 1,000,000 rows. Prints figures;
// asserts nothing.

import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cpuMsOf, fetchPost, freePort, runLoad, printRow, rssBytesOf, startSvc, waitHealthy } from "./_lib.ts";
import { describeDisk, probeDisk } from "./_disk.ts";
import { createHttp1Client } from "./_http1.ts";
import { pythonPath, runPythonClient } from "./_python-client.ts";
import { runWrk, wrkPath } from "./_wrk.ts";
import { etcdBinary, etcdInstallHint, startEtcdTarget } from "./etcd.ts";

export async function benchSingle(options: { durationMs: number; bin: string[]; rows: number; etcd?: boolean }): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "svc-bench-"));
  const ports = { client: await freePort(), admin: await freePort(), peer: await freePort() };
  // The disk first, with nothing else running: its own fdatasync stalls bound the node's p99.
  const disk = probeDisk(dir, 5000);
  const node = startSvc(options.bin, dir, "node1", ports, [{ id: "node1", ...ports }], true);
  try {
    const base = `http://127.0.0.1:${ports.client}`;
    const admin = `http://127.0.0.1:${ports.admin}`;
    await waitHealthy(admin, 30_000);
    await post(base, { statements: ["CREATE TABLE kv (k INTEGER PRIMARY KEY, v TEXT NOT NULL)"] });
    const value = "v".repeat(256);
    let key = 0;
    const body = (): string => JSON.stringify({ statements: [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: [++key, value] }] });
    process.stdout.write(`\nsingle node, fsync on, 256-byte values, POST /v1/execute (${options.durationMs / 1000} s per row)\n`);
    // wrk when installed (rows auto-number their keys: the same body every time); otherwise
    // the lean keep-alive client, which costs about half of fetch's CPU per request.
    const wrk = wrkPath();
    const wrkBody = JSON.stringify({ statements: [{ sql: "INSERT INTO kv (v) VALUES (?)", params: [value] }] });
    process.stdout.write(`load generator: ${wrk === null ? "bun (install wrk for a cheaper one: apt-get install wrk)" : wrk}\n`);
    process.stdout.write(`${describeDisk(disk)}\n`);
    const http = createHttp1Client();
    try {
      await runLoad({ url: `${base}/v1/execute`, clients: 16, durationMs: 1000, body, post: http.post });
      for (const clients of [1, 64, 256]) {
        const syncsBefore = await walSyncs(admin);
        const cpuBefore = cpuMsOf(node.pid);
        const stealBefore = stolenTicks();
        const result = wrk === null
          ? await runLoad({ url: `${base}/v1/execute`, clients, durationMs: options.durationMs, body, post: http.post })
          : await runWrk(wrk, `${base}/v1/execute`, wrkBody, clients, options.durationMs);
        const cpuUs = ((cpuMsOf(node.pid) - cpuBefore) * 1000) / Math.max(1, result.ops);
        const syncsAfter = await walSyncs(admin);
        printRow(`writes, ${clients} client${clients === 1 ? "" : "s"}`, result);
        const stolen = (stolenTicks() - stealBefore) / (navigator.hardwareConcurrency * (options.durationMs / 10));
        process.stdout.write(`${"".padEnd(34)} node cpu/write ${cpuUs.toFixed(0)} µs; WAL fdatasync: ${syncsAfter.count - syncsBefore.count} calls, ` +
          `${syncsAfter.over25Ms - syncsBefore.over25Ms} over 25.6 ms; cpu taken by the host (steal): ${(stolen * 100).toFixed(0)}%\n`);
      }
      // One client as common clients make it: each pays its own costs, and none may find svc slower.
      printRow("writes, 1 client, Bun fetch", await runLoad({ url: `${base}/v1/execute`, clients: 1, durationMs: options.durationMs, body, post: fetchPost }));
      const python = pythonPath();
      if (python === null) process.stdout.write("writes, 1 client, python http.client: python3 is not installed\n");
      else printRow("writes, 1 client, python http.client", await runPythonClient(python, `${base}/v1/execute`, wrkBody, options.durationMs));
      if (options.etcd === true) await oneClientEtcd(options.durationMs, python);
    } finally {
      http.close();
    }
    process.stdout.write(`rss after the write runs: ${(rssBytesOf(node.pid) / 1048576).toFixed(1)} MB (${await rowCount(base)} rows)\n`);
    await fillRows(base, options.rows, value);
    await settle(admin);
    process.stdout.write(`rss after ${await rowCount(base)} rows: ${(rssBytesOf(node.pid) / 1048576).toFixed(1)} MB\n`);
  } finally {
    node.kill("SIGTERM");
    await node.exited;
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The one-client rows against a single etcd member (its v3 JSON gateway, a put per request). */
async function oneClientEtcd(durationMs: number, python: string | null): Promise<void> {
  const etcdBin = etcdBinary();
  if (etcdBin === null) {
    process.stdout.write(`etcd is not on PATH: ${etcdInstallHint}\n`);
    return;
  }
  const etcd = await startEtcdTarget(etcdBin, 1);
  try {
    const put = etcd.write(0);
    printRow("etcd (one member): writes, 1 client, Bun fetch", await runLoad({ url: put.url, clients: 1, durationMs, body: put.body, post: fetchPost }));
    if (python !== null) printRow("etcd (one member): writes, 1 client, python http.client", await runPythonClient(python, put.url, put.body(), durationMs));
  } finally {
    await etcd.stop();
  }
}

/**
 * Wait until the node is done with what the fill left it: no snapshot running for a second
 * and a half (the node collects its garbage half a second after writes stop). At most 30 s.
 */
async function settle(admin: string): Promise<void> {
  const deadline = performance.now() + 30_000;
  let quietSince = performance.now();
  while (performance.now() < deadline && performance.now() - quietSince < 1500) {
    const text = await (await fetch(`${admin}/metrics`)).text();
    if (/^tensor_chain_snapshot_in_progress 1$/m.test(text)) quietSince = performance.now();
    await Bun.sleep(100);
  }
}

/**
 * Ticks (1/100 s) of CPU the hypervisor gave to others while this machine wanted it (the
 * "steal" column of /proc/stat): a shared virtual machine is slower while it grows.
 */
function stolenTicks(): number {
  const cpu = readFileSync("/proc/stat", "utf8").split("\n")[0] ?? "";
  return Number(cpu.trim().split(/\s+/)[8] ?? 0);
}

/** The node's WAL fdatasync calls so far, and how many took longer than 25.6 ms (a bucket bound). */
async function walSyncs(admin: string): Promise<{ count: number; over25Ms: number }> {
  const text = await (await fetch(`${admin}/metrics`)).text();
  const value = (re: RegExp): number => Number(re.exec(text)?.[1] ?? Number.NaN);
  const count = value(/^tensor_chain_wal_sync_latency_seconds_count (\S+)$/m);
  return { count, over25Ms: count - value(/^tensor_chain_wal_sync_latency_seconds_bucket\{le="0\.0256"\} (\S+)$/m) };
}

async function post(base: string, body: unknown): Promise<void> {
  const r = await fetch(`${base}/v1/execute`, { method: "POST", body: JSON.stringify(body) });
  if (!r.ok) throw new Error(`setup write failed: ${r.status} ${await r.text()}`);
}

/** Bring the table to `rows` more rows, 100 rows per write from 32 writers. */
async function fillRows(base: string, rows: number, value: string): Promise<void> {
  const started = performance.now();
  const batchRows = 100;
  let next = 10_000_000;
  const end = next + rows;
  const writer = async (): Promise<void> => {
    while (next < end) {
      const from = next;
      next += batchRows;
      const values = Array.from({ length: Math.min(batchRows, end - from) }, (_, i) => `(${from + i}, '${value}')`).join(",");
      await post(base, { statements: [`INSERT INTO kv (k, v) VALUES ${values}`] });
    }
  };
  await Promise.all(Array.from({ length: 32 }, writer));
  process.stdout.write(`filled ${rows} rows in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
}

async function rowCount(base: string): Promise<number> {
  const r = await fetch(`${base}/v1/query`, { method: "POST", body: JSON.stringify({ sql: "SELECT count(*) FROM kv" }) });
  const body = (await r.json()) as { rows: number[][] };
  return body.rows[0]?.[0] ?? 0;
}
