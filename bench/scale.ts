// The scale part of `bun run bench -- --scale 100MB,1GB,10GB`: one node filled to each store
// size, then, per size:
//   - 32 writers of 256-byte rows for --duration seconds: writes/s, p99, the node's bytes
//     written to disk per byte of user data (/proc/<pid>/io write_bytes over writes × 256),
//     checkpoints taken against what snapshot_interval asks, images made, RSS;
//   - a new follower brought up from empty (an image streamed, then the log): seconds and MB/s;
//   - restart to healthy after a clean stop and after kill -9.
// Prints figures; asserts nothing.

import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createHttp1Client } from "./_http1.ts";
import { freePort, printRow, rssBytesOf, runLoad, startSvc, waitHealthy, type Ports } from "./_lib.ts";

const valueBytes = 256;
const rowsPerStatement = 500;
const snapshotIntervalEntries = 10_000;

export async function benchScale(options: { durationMs: number; bin: string[]; sizes: string[] }): Promise<void> {
  for (const size of options.sizes) await benchOneSize(options, size, parseSize(size));
}

function parseSize(text: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*(MB|GB)$/i.exec(text.trim());
  if (m === null) throw new Error(`--scale takes sizes like 100MB,1GB (got ${text})`);
  return Number(m[1]) * (m[2]?.toUpperCase() === "GB" ? 1024 ** 3 : 1024 ** 2);
}

async function benchOneSize(options: { durationMs: number; bin: string[] }, label: string, storeBytes: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "svc-bench-scale-"));
  const ports: Ports = { client: await freePort(), admin: await freePort(), peer: await freePort() };
  const members = [{ id: "node1", ...ports }];
  let node = startSvc(options.bin, dir, "node1", ports, members, true);
  const base = `http://127.0.0.1:${ports.client}`;
  const admin = `http://127.0.0.1:${ports.admin}`;
  let follower: Bun.Subprocess | null = null;
  try {
    await waitHealthy(admin, 30_000);
    await post(base, { statements: ["CREATE TABLE IF NOT EXISTS kv (id INTEGER PRIMARY KEY, v BLOB)"] });
    const fillStarted = performance.now();
    const rows = Math.ceil(storeBytes / (valueBytes + 40));
    await fill(base, rows);
    const fillS = (performance.now() - fillStarted) / 1000;
    await settleAfterFill(admin);
    const sizeMb = (await storeSizeBytes(admin)) / 1048576;
    process.stdout.write(`\n${label}: filled ${rows.toLocaleString()} rows in ${fillS.toFixed(0)} s; store ${sizeMb.toFixed(0)} MB\n`);

    // Sustained writes.
    const client = createHttp1Client();
    const value = "v".repeat(valueBytes);
    const before = await counters(admin, node.pid);
    const load = await runLoad({
      url: `${base}/v1/execute`, clients: 32, durationMs: options.durationMs, post: client.post,
      body: () => JSON.stringify({ statements: [{ sql: "INSERT INTO kv (v) VALUES (?)", params: [value] }] }),
    });
    const after = await counters(admin, node.pid);
    printRow(`${label} writes, 32 clients`, load);
    const userBytes = load.ops * valueBytes;
    const walBytes = after.walAppendedBytes - before.walAppendedBytes;
    const syncs = after.walSyncs - before.walSyncs;
    const written = after.writeBytes - before.writeBytes;
    const checkpoints = after.checkpoints - before.checkpoints;
    const images = after.images - before.images;
    process.stdout.write(
      `${label}   disk written ${(written / 1048576).toFixed(0)} MB for ${(userBytes / 1048576).toFixed(1)} MB of rows: ${(written / Math.max(1, userBytes)).toFixed(1)}x; ` +
      `${(written / 1048576 / (options.durationMs / 1000)).toFixed(1)} MB/s\n` +
      `${label}   of which WAL records ${(walBytes / 1048576).toFixed(0)} MB; ${(load.ops / Math.max(1, syncs)).toFixed(1)} writes per WAL sync\n` +
      `${label}   checkpoints ${checkpoints} (snapshot_interval asks ${Math.floor(load.ops / snapshotIntervalEntries)}), images ${images}; rss ${(rssBytesOf(node.pid) / 1048576).toFixed(0)} MB\n`,
    );

    // A new follower from empty: an image streamed, then the log.
    const fPorts: Ports = { client: await freePort(), admin: await freePort(), peer: await freePort() };
    const all = [...members, { id: "node2", ...fPorts }];
    const joinStarted = performance.now();
    follower = startSvc(options.bin, dir, "node2", fPorts, all, false);
    const added = await fetch(`${admin}/admin/add-node`, {
      method: "POST",
      body: JSON.stringify({ id: "node2", peer: `127.0.0.1:${fPorts.peer}`, client: `127.0.0.1:${fPorts.client}`, admin: `127.0.0.1:${fPorts.admin}`, learner: true }),
    });
    if (!added.ok) throw new Error(`add-node failed: ${added.status} ${await added.text()}`);
    // The RSS of both while the image streams: neither should grow with the store.
    const peak = { leader: 0, follower: 0 };
    const joining = follower;
    const sampler = setInterval(() => {
      peak.leader = Math.max(peak.leader, rssOrZero(node.pid));
      peak.follower = Math.max(peak.follower, rssOrZero(joining.pid));
    }, 50);
    try {
      await waitHealthy(`http://127.0.0.1:${fPorts.admin}`, 3_600_000);
    } finally {
      clearInterval(sampler);
    }
    const joinS = (performance.now() - joinStarted) / 1000;
    const received = await metric(`http://127.0.0.1:${fPorts.admin}`, "tensor_chain_snapshot_transfer_received_bytes_total");
    process.stdout.write(
      `${label}   new follower healthy in ${joinS.toFixed(1)} s (image ${(received / 1048576).toFixed(0)} MB, ${(received / 1048576 / joinS).toFixed(0)} MB/s); ` +
      `peak rss meanwhile: leader ${(peak.leader / 1048576).toFixed(0)} MB, follower ${(peak.follower / 1048576).toFixed(0)} MB\n`,
    );
    follower.kill("SIGTERM");
    await follower.exited;
    follower = null;

    // Restarts.
    node.kill("SIGTERM");
    await node.exited;
    let t0 = performance.now();
    node = startSvc(options.bin, dir, "node1", ports, members, true);
    await waitHealthy(admin, 3_600_000);
    const cleanS = (performance.now() - t0) / 1000;
    await runLoad({
      url: `${base}/v1/execute`, clients: 32, durationMs: 3000, post: client.post,
      body: () => JSON.stringify({ statements: [{ sql: "INSERT INTO kv (v) VALUES (?)", params: [value] }] }),
    });
    node.kill("SIGKILL");
    await node.exited;
    t0 = performance.now();
    node = startSvc(options.bin, dir, "node1", ports, members, true);
    await waitHealthy(admin, 3_600_000);
    const killS = (performance.now() - t0) / 1000;
    process.stdout.write(`${label}   restart to healthy: ${cleanS.toFixed(2)} s after a clean stop, ${killS.toFixed(2)} s after kill -9\n`);
  } finally {
    follower?.kill("SIGKILL");
    node.kill("SIGKILL");
    await node.exited;
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Let the node finish what the fill left (checkpoints of the store's SQLite WAL) and have the
 * kernel write everything back, so the write run is measured on its own.
 */
async function settleAfterFill(admin: string): Promise<void> {
  let last = -1;
  let quietSince = performance.now();
  const deadline = performance.now() + 120_000;
  while (performance.now() < deadline && performance.now() - quietSince < 3000) {
    const now = await metric(admin, "tensor_chain_checkpoints_total");
    if (now !== last) {
      last = now;
      quietSince = performance.now();
    }
    await Bun.sleep(200);
  }
  Bun.spawnSync(["sync"]);
}

/** `rows` rows of `valueBytes` random bytes, from 8 writers, `rowsPerStatement` a statement. */
async function fill(base: string, rows: number): Promise<void> {
  let next = 0;
  const placeholders = Array.from({ length: rowsPerStatement }, () => "(randomblob(?))").join(",");
  const writer = async (): Promise<void> => {
    while (next < rows) {
      const n = Math.min(rowsPerStatement, rows - next);
      next += n;
      const sql = n === rowsPerStatement ? `INSERT INTO kv (v) VALUES ${placeholders}` : `INSERT INTO kv (v) VALUES ${Array.from({ length: n }, () => "(randomblob(?))").join(",")}`;
      await post(base, { statements: [{ sql, params: Array.from({ length: n }, () => valueBytes) }] });
    }
  };
  await Promise.all(Array.from({ length: 8 }, writer));
}

async function counters(admin: string, pid: number): Promise<{ writeBytes: number; checkpoints: number; images: number; walAppendedBytes: number; walSyncs: number }> {
  const io = readFileSync(`/proc/${pid}/io`, "utf8");
  return {
    writeBytes: Number(/^write_bytes: (\d+)$/m.exec(io)?.[1] ?? 0),
    checkpoints: await metric(admin, "tensor_chain_checkpoints_total"),
    images: await metric(admin, "tensor_chain_snapshots_total"),
    walAppendedBytes: await metric(admin, "tensor_chain_wal_appended_bytes_total"),
    walSyncs: await metric(admin, "tensor_chain_wal_syncs_total"),
  };
}

async function metric(admin: string, name: string): Promise<number> {
  const text = await (await fetch(`${admin}/metrics`)).text();
  return Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1] ?? 0);
}

async function storeSizeBytes(admin: string): Promise<number> {
  const stats = (await (await fetch(`${admin}/admin/stats`)).json()) as { store_size_bytes?: number; size_bytes?: number };
  return stats.store_size_bytes ?? stats.size_bytes ?? 0;
}

async function post(base: string, body: unknown): Promise<void> {
  const r = await fetch(`${base}/v1/execute`, { method: "POST", body: JSON.stringify(body) });
  if (!r.ok) throw new Error(`write failed: ${r.status} ${await r.text()}`);
}

/** The process's RSS, or 0 once it has exited. */
function rssOrZero(pid: number): number {
  try {
    return rssBytesOf(pid);
  } catch {
    return 0;
  }
}
