// The backup part of `bun run bench -- --backup SIZE` (e.g. 1GB): one node filled to SIZE with
// rows of random 256-byte values, then, as an operator would run them:
//   - `svc admin backup full`: seconds, how long writes were paused, archive size, peak RSS of
//     the command;
//   - `svc admin backup verify`: seconds;
//   - restore from the archive (SPEC §4.5: extract, stop, copy raft and store back, start):
//     seconds from extraction to a node answering /health, and the rows found;
//   - write p99 of 16 writers alone, then while `svc admin backup snapshot` runs (online).
// Prints figures; asserts nothing.

import { cpSync, mkdirSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tar from "tar";
import { freePort, peakRssMb, printRow, runLoad, startSvc, waitHealthy, type Ports } from "./_lib.ts";

const valueBytes = 256;
const rowsPerStatement = 500;

function parseSize(text: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*(MB|GB)$/i.exec(text.trim());
  if (m === null) throw new Error(`--backup takes a size like 100MB or 1GB (got ${text})`);
  return Number(m[1]) * (m[2]?.toUpperCase() === "GB" ? 1024 ** 3 : 1024 ** 2);
}


async function post(url: string, body: unknown): Promise<void> {
  const r = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  if (!r.ok) throw new Error(`${url}: ${r.status} ${await r.text()}`);
  await r.arrayBuffer();
}

async function fill(base: string, rows: number): Promise<void> {
  let next = 0;
  const writer = async (): Promise<void> => {
    while (next < rows) {
      const n = Math.min(rowsPerStatement, rows - next);
      next += n;
      const sql = `INSERT INTO kv (v) VALUES ${Array.from({ length: n }, () => "(randomblob(?))").join(",")}`;
      await post(`${base}/v1/execute`, { statements: [{ sql, params: Array.from({ length: n }, () => valueBytes) }] });
    }
  };
  await Promise.all(Array.from({ length: 8 }, writer));
}

async function run(argv: string[]): Promise<{ code: number; out: string; err: string; seconds: number; peakMb: number }> {
  const started = performance.now();
  const proc = Bun.spawn(argv, { stdout: "pipe", stderr: "pipe" });
  let peak = 0;
  const poll = setInterval(() => {
    peak = Math.max(peak, peakRssMb(proc.pid));
  }, 50);
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  const code = await proc.exited;
  clearInterval(poll);
  return { code, out, err, seconds: (performance.now() - started) / 1000, peakMb: peak };
}

export async function benchBackup(options: { bin: string[]; size: string }): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "svc-bench-backup-"));
  const ports: Ports = { client: await freePort(), admin: await freePort(), peer: await freePort() };
  const members = [{ id: "node1", ...ports }];
  let node = startSvc(options.bin, dir, "node1", ports, members, true);
  const base = `http://127.0.0.1:${ports.client}`;
  const admin = `http://127.0.0.1:${ports.admin}`;
  const configPath = join(dir, "node1.toml");
  try {
    await waitHealthy(admin, 30_000);
    await post(`${base}/v1/execute`, { statements: ["CREATE TABLE IF NOT EXISTS kv (id INTEGER PRIMARY KEY, v BLOB)"] });
    const rows = Math.ceil(parseSize(options.size) / (valueBytes + 40));
    const fillStarted = performance.now();
    await fill(base, rows);
    process.stdout.write(`backup ${options.size}: filled ${rows.toLocaleString()} rows in ${((performance.now() - fillStarted) / 1000).toFixed(0)} s\n`);

    const etc = join(dir, "etc");
    mkdirSync(etc);
    cpSync(configPath, join(etc, "config.toml"));
    const backups = join(dir, "backups");
    const full = await run([...options.bin, "admin", "backup", "full", "--config", configPath, "--to", backups, "--etc-dir", etc, "--json"]);
    if (full.code !== 0) {
      process.stdout.write(`backup full: failed (exit ${full.code}): ${full.err}\n`);
      return;
    }
    const made = JSON.parse(full.out) as { archive: string; sizeBytes: number; pausedMs: number };
    process.stdout.write(
      `backup full: ${full.seconds.toFixed(1)} s, writes paused ${(made.pausedMs / 1000).toFixed(2)} s, archive ${(made.sizeBytes / 1048576).toFixed(0)} MB, peak RSS ${full.peakMb.toFixed(0)} MB\n`,
    );
    const verify = await run([...options.bin, "admin", "backup", "verify", made.archive]);
    process.stdout.write(`backup verify: ${verify.seconds.toFixed(1)} s (exit ${verify.code}), peak RSS ${verify.peakMb.toFixed(0)} MB\n`);

    // Writes alone, then while an online snapshot backup copies an image out.
    const load = (durationMs: number) => runLoad({
      url: `${base}/v1/execute`, clients: 16, durationMs,
      body: () => JSON.stringify({ statements: [{ sql: "INSERT INTO kv (v) VALUES (randomblob(256))", params: [] }] }),
    });
    printRow("writes, 16 clients, alone", await load(10_000));
    const snapshotStarted = performance.now();
    // About as long as an image takes (the full backup's pause measured it).
    const during = load(Math.max(3000, Math.round(made.pausedMs) + 1000));
    const snap = await run([...options.bin, "admin", "backup", "snapshot", "--config", configPath, "--to", join(dir, "snapshots"), "--json"]);
    const snapS = (performance.now() - snapshotStarted) / 1000;
    printRow("writes, 16 clients, during backup", await during);
    process.stdout.write(`backup snapshot: ${snapS.toFixed(1)} s (exit ${snap.code}) while writing\n`);

    // SPEC §4.5 on the same node: extract, stop, copy back, start.
    const restoreStarted = performance.now();
    const extracted = join(dir, "extracted");
    mkdirSync(extracted);
    await tar.x({ file: made.archive, cwd: extracted });
    node.kill("SIGTERM");
    await node.exited;
    const dataDir = join(dir, "node1");
    rmSync(join(dataDir, "raft"), { recursive: true, force: true });
    rmSync(join(dataDir, "store"), { recursive: true, force: true });
    cpSync(join(extracted, "raft"), join(dataDir, "raft"), { recursive: true });
    cpSync(join(extracted, "store"), join(dataDir, "store"), { recursive: true });
    node = startSvc(options.bin, dir, "node1", ports, members, true);
    await waitHealthy(admin, 600_000);
    const restoreS = (performance.now() - restoreStarted) / 1000;
    const stats = (await (await fetch(`${admin}/admin/stats`)).json()) as { total_entries: number };
    process.stdout.write(`restore from the archive: ${restoreS.toFixed(1)} s to healthy (store ${(statSync(join(dataDir, "store", "state.db")).size / 1048576).toFixed(0)} MB, ${stats.total_entries.toLocaleString()} rows)\n`);
  } finally {
    node.kill("SIGKILL");
    await node.exited;
    rmSync(dir, { recursive: true, force: true });
  }
}
