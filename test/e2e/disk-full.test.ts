// A full disk is a state, not a crash: the compiled binary on a data directory that lives on a
// small tmpfs (mounted here, so these tests run as root and are skipped otherwise). The node
// refuses writes with 507 DISK_FULL, keeps answering reads and /health, starts on a full disk,
// and resumes writing by itself once space is freed, with every acknowledged write kept.

import * as fs from "node:fs";
import { join } from "node:path";
import { describe, expect } from "bun:test";
import { renderConfigToml } from "../../src/config/index.ts";
import {
  clusterConfigs, executeRaw, getJson, metric, postJson, procTest, queryRaw, runBinary, singleNodeConfig, useCompiledBinary, useProcessCleanup,
  waitFor, waitForLeader, type ProcEnv,
} from "../lib/proc.ts";

useProcessCleanup();
useCompiledBinary();

const canMount = process.getuid?.() === 0;
const MIB = 1024 * 1024;

/** A tmpfs of `sizeMb` under the env's dir, unmounted when `fn` ends. */
async function withTmpfs(env: ProcEnv, sizeMb: number, fn: (mountDir: string) => Promise<void>): Promise<void> {
  const mountDir = join(env.dir, "disk");
  fs.mkdirSync(mountDir);
  const mounted = Bun.spawnSync(["mount", "-t", "tmpfs", "-o", `size=${sizeMb}m`, "tmpfs", mountDir]);
  if (mounted.exitCode !== 0) throw new Error(`mount failed: ${mounted.stderr.toString()}`);
  try {
    await fn(mountDir);
  } finally {
    for (const node of env.nodes) await node.kill9();
    Bun.spawnSync(["umount", "-l", mountDir]);
  }
}

function freeBytes(dir: string): number {
  const s = fs.statfsSync(dir);
  return Number(s.bavail) * Number(s.bsize);
}

/** Fill the file system of `dir` with `path` until `leaveBytes` (rounded to pages) are free. */
function fillTo(dir: string, path: string, leaveBytes: number): void {
  const fd = fs.openSync(path, "a");
  try {
    const chunk = new Uint8Array(64 * 1024);
    for (;;) {
      const free = freeBytes(dir);
      if (free <= leaveBytes) break;
      const n = Math.min(chunk.length, Math.max(4096, free - leaveBytes));
      try {
        fs.writeSync(fd, chunk, 0, n);
      } catch {
        break; // ENOSPC: full
      }
    }
  } finally {
    fs.closeSync(fd);
  }
}

async function count(clientUrl: string, consistency: "linearizable" | "stale" = "linearizable"): Promise<number> {
  const r = await queryRaw(clientUrl, "SELECT count(*) FROM t", [], consistency);
  expect(r.status).toBe(200);
  return Number(r.body?.rows[0]?.[0]);
}

describe.skipIf(!canMount)("a full disk (data directory on a small tmpfs)", () => {
  procTest("a node whose disk fills up answers writes 507 DISK_FULL, serves reads, starts again while full, and resumes once space is freed; no acknowledged write is lost", async (env) => {
    await withTmpfs(env, 24, async (disk) => {
      const dataDir = join(disk, "node1");
      const node = env.node(await singleNodeConfig(env.dir, { dataDir, wal: { segmentSizeBytes: 1 * MIB } }));
      await node.start();
      const spare = join(disk, "spare-space");
      fs.writeFileSync(spare, new Uint8Array(6 * MIB));
      expect((await executeRaw(node.clientUrl, ["CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"])).status).toBe(200);

      let acknowledged = 0;
      let refusal: Awaited<ReturnType<typeof executeRaw>> | null = null;
      const value = "x".repeat(60_000);
      for (let i = 0; i < 1000 && refusal === null; i++) {
        const r = await executeRaw(node.clientUrl, [{ sql: "INSERT INTO t (v) VALUES (?)", params: [value] }]);
        if (r.status === 200) acknowledged++;
        else refusal = r;
      }
      expect(refusal).not.toBeNull();
      expect(refusal?.status).toBe(507);
      expect(refusal?.body?.error.code).toBe("DISK_FULL");
      expect(refusal?.body?.error.message).toContain(dataDir);
      expect(refusal?.body?.error.message).toMatch(/\d+ bytes free/);
      expect(node.running).toBe(true);

      const health = await getJson<{ status: string; disk: string }>(`${node.clientUrl}/health`);
      expect(health.disk).toBe("full");
      expect(health.status).toBe("degraded");
      expect(await metric(node.adminUrl, "tensor_chain_disk_full")).toBe(1);
      expect(await count(node.clientUrl)).toBe(acknowledged);

      // Completely full now, and restarted: it starts, serves reads, refuses writes.
      await node.kill9();
      fillTo(disk, join(disk, "filler"), 0);
      await node.start();
      expect(await count(node.clientUrl)).toBe(acknowledged);
      const whileFull = await executeRaw(node.clientUrl, [{ sql: "INSERT INTO t (v) VALUES (?)", params: ["after"] }]);
      expect(whileFull.status).toBe(507);
      expect((await getJson<{ disk: string }>(`${node.clientUrl}/health`)).disk).toBe("full");

      fs.rmSync(join(disk, "filler"));
      fs.rmSync(spare);
      await waitFor("writes to resume once space is freed", async () => (await executeRaw(node.clientUrl, [{ sql: "INSERT INTO t (v) VALUES (?)", params: ["after"] }])).status === 200);
      expect(await count(node.clientUrl)).toBe(acknowledged + 1);
      await waitFor("/health to say the disk is fine", async () => (await getJson<{ disk: string; status: string }>(`${node.clientUrl}/health`)).status === "ok");
      expect(await metric(node.adminUrl, "tensor_chain_disk_full")).toBe(0);
      expect(node.log()).not.toContain("fatal");
    });
  }, 120_000);

  procTest("a write whose apply or commit finds the disk full is not lost, and is applied and visible once space is freed", async (env) => {
    await withTmpfs(env, 24, async (disk) => {
      const dataDir = join(disk, "node1");
      const node = env.node(await singleNodeConfig(env.dir, { dataDir, wal: { segmentSizeBytes: 1 * MIB } }));
      await node.start();
      expect((await executeRaw(node.clientUrl, ["CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)"])).status).toBe(200);
      // Just above the reserve (a segment + 4 MiB): the write is admitted, its 8 MiB blob
      // (made when the entry is applied) does not fit.
      fillTo(disk, join(disk, "filler"), 5 * MIB + 600 * 1024);
      const pending = executeRaw(node.clientUrl, ["INSERT INTO t (v) VALUES (randomblob(8388608))"], 60_000);
      await waitFor("the node to report the full disk", async () => (await getJson<{ disk: string }>(`${node.clientUrl}/health`)).disk === "full");
      expect(node.running).toBe(true);
      expect(await count(node.clientUrl, "stale")).toBe(0);
      if ((await metric(node.adminUrl, "tensor_chain_store_uncommitted_entries")) > 0) {
        // Answered, and refused by the store's commit: a linearizable read cannot see it yet,
        // and says so rather than answer without it.
        const read = await queryRaw(node.clientUrl, "SELECT count(*) FROM t", [], "linearizable");
        expect(read.status).toBe(507);
        expect(read.body?.error?.code).toBe("DISK_FULL");
      }
      fs.rmSync(join(disk, "filler"));
      const answer = await pending;
      expect(answer.status).toBe(200);
      expect(await count(node.clientUrl)).toBe(1);
      // Refused by the apply (the write waits) or by the store's commit after it (the write was
      // answered: it is in the log, and visible once the store commits it).
      await waitFor("the node to log that the write went through", () => /the stalled write went through|the store committed what it had applied when the disk filled/.test(node.log()));
      expect(node.log()).not.toContain("fatal");
    });
  }, 120_000);

  procTest("a WAL segment larger than the free space stops start-up naming wal.segment_size_mb and the bytes free, and leaves no partial file", async (env) => {
    await withTmpfs(env, 20, async (disk) => {
      const config = await singleNodeConfig(env.dir, { dataDir: join(disk, "node1"), wal: { segmentSizeBytes: 32 * MIB } });
      const configPath = join(env.dir, "node1.toml");
      fs.writeFileSync(configPath, renderConfigToml(config));
      const r = await runBinary(["serve", "--config", configPath], { cwd: env.dir, deadlineMs: 30_000 });
      expect(r.exitCode).not.toBe(0);
      expect(r.stderr).toContain("wal.segment_size_mb = 32");
      expect(r.stderr).toMatch(/\d+ bytes free/);
      const leftovers = (fs.readdirSync(join(disk, "node1"), { recursive: true }) as string[]).filter((f) => f.includes(".creating") || f.includes("spare-"));
      expect(leftovers).toEqual([]);
      expect(freeBytes(disk)).toBeGreaterThan(12 * MIB);
    });
  });

  procTest("when every voter's disk is full, the leader stays: the others refuse to take leadership only to hand it back, and reads go on", async (env) => {
    await withTmpfs(env, 40, async (disk) => {
      const configs = await clusterConfigs(env.dir, 3, { wal: { segmentSizeBytes: 1 * MIB } });
      const nodes = configs.map((c, i) => env.node({ ...c, dataDir: join(disk, `node${i + 1}`) }));
      for (const n of nodes) n.spawn();
      await Promise.all(nodes.map((n) => n.waitHealthy()));
      const leader = await waitForLeader(nodes);
      expect((await executeRaw(leader.clientUrl, ["CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"])).status).toBe(200);
      fillTo(disk, join(disk, "filler"), 2 * MIB);
      await waitFor("every node to see its disk full", async () =>
        (await Promise.all(nodes.map((n) => getJson<{ disk: string }>(`${n.clientUrl}/health`).catch(() => null)))).every((h) => h?.disk === "full"));
      // The leader tries to hand over; the voter it picks has a full disk too and does not take it.
      const refused = async (): Promise<number> =>
        (await Promise.all(nodes.map((n) => metric(n.adminUrl, 'tensor_chain_peer_messages_dropped_total{reason="transfer_while_disk_full"}').catch(() => 0)))).reduce((a, b) => a + b, 0);
      const first = await waitFor("a transfer to be refused by a voter whose disk is full", async () => {
        const n = await refused();
        return n > 0 ? n : undefined;
      }, { deadlineMs: 30_000 });
      const stays = await waitForLeader(nodes);
      const term = (await getJson<{ term: number }>(`${stays.clientUrl}/health`)).term;
      // The next attempt is refused too: the same leader, in the same term, all along.
      await waitFor("the next transfer to be refused as well", async () => (await refused()) > first, { deadlineMs: 30_000 });
      expect(await waitForLeader(nodes)).toBe(stays);
      expect((await getJson<{ term: number }>(`${stays.clientUrl}/health`)).term).toBe(term);
      expect(await count(stays.clientUrl, "stale")).toBe(0);
      fs.rmSync(join(disk, "filler"));
    });
  }, 120_000);

  procTest("followers whose disks fill up keep the leader: they answer its heartbeats, it refuses new writes 507 DISK_FULL naming them, reads go on, and writes resume once space is freed with nothing acknowledged lost", async (env) => {
    await withTmpfs(env, 48, async (disk) => {
      const configs = await clusterConfigs(env.dir, 3, { wal: { segmentSizeBytes: 1 * MIB } });
      // node1 (the leader) on the test's disk; node2 and node3 share the small one.
      const nodes = configs.map((c, i) => env.node(i === 0 ? c : { ...c, dataDir: join(disk, `node${i + 1}`) }));
      for (const n of nodes) n.spawn();
      await Promise.all(nodes.map((n) => n.waitHealthy()));
      const [leader, ...followers] = nodes;
      if (leader === undefined) throw new Error("no node1");
      const first = await waitForLeader(nodes);
      if (first !== leader) expect((await postJson(`${first.adminUrl}/admin/transfer-leader`, { id: leader.nodeId })).status).toBe(200);
      await waitFor("node1 to lead", async () => (await waitForLeader(nodes)) === leader);
      expect((await executeRaw(leader.clientUrl, ["CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"])).status).toBe(200);
      const term = (await getJson<{ term: number }>(`${leader.clientUrl}/health`)).term;

      fillTo(disk, join(disk, "filler"), 3 * MIB);
      // Writes until the leader refuses one at once; a write out when the followers stalled
      // waits (it commits once they have room, or times out: never a definite refusal).
      const value = "y".repeat(60_000);
      const acknowledged: number[] = [];
      const outstanding: Promise<unknown>[] = [];
      let refusal: Awaited<ReturnType<typeof executeRaw>> | null = null;
      const deadline = Date.now() + 60_000;
      for (let id = 1; refusal === null && Date.now() < deadline; id++) {
        const sent = executeRaw(leader.clientUrl, [{ sql: "INSERT INTO t (id, v) VALUES (?, ?)", params: [id, value] }], 90_000).then((r) => {
          if (r.status === 200) acknowledged.push(id);
          else if (r.status === 507 && r.body?.error?.code === "DISK_FULL") refusal ??= r;
          else if (r.body?.error?.code !== "WRITE_TIMEOUT") throw new Error(`write ${id} answered ${r.status}: ${r.text}`);
        });
        outstanding.push(sent);
        await Promise.race([sent, Bun.sleep(100)]);
      }
      if (refusal === null) throw new Error("the leader never refused a write while its followers' disks were full");
      const refused = refusal as Awaited<ReturnType<typeof executeRaw>>;
      expect(refused.body?.error?.message).toContain("node2");
      expect(refused.body?.error?.message).toContain("node3");
      for (const f of followers) await waitFor(`${f.nodeId} to log its stall`, () => /takes no more entries until/.test(f.log()));
      // A stalled follower cannot serve a linearizable read: it says so at once.
      const stalledRead = await queryRaw(followers[0]?.clientUrl ?? "", "SELECT count(*) FROM t", [], "linearizable");
      expect(stalledRead.status).toBe(507);
      expect(stalledRead.body?.error?.code).toBe("DISK_FULL");
      // The leader kept its followers: same leader, same term, linearizable reads answered.
      expect(await waitForLeader(nodes)).toBe(leader);
      expect((await getJson<{ term: number }>(`${leader.clientUrl}/health`)).term).toBe(term);
      const read = await queryRaw(leader.clientUrl, "SELECT count(*) FROM t", [], "linearizable");
      expect(read.status).toBe(200);
      expect(Number(read.body?.rows[0]?.[0])).toBeGreaterThanOrEqual(acknowledged.length);

      fs.rmSync(join(disk, "filler"));
      await waitFor("writes to go through again", async () => (await executeRaw(leader.clientUrl, [{ sql: "INSERT INTO t (id, v) VALUES (?, ?)", params: [1_000_000, "after"] }], 5_000)).status === 200, { deadlineMs: 60_000 });
      await Promise.all(outstanding);
      expect((await getJson<{ term: number }>(`${leader.clientUrl}/health`)).term).toBe(term);
      for (const n of nodes) {
        await waitFor(`${n.nodeId} to hold every acknowledged write`, async () => {
          const r = await queryRaw(n.clientUrl, "SELECT id FROM t", [], "stale");
          if (r.status !== 200) return false;
          const held = new Set((r.body?.rows ?? []).map((row) => Number(row[0])));
          return acknowledged.every((id) => held.has(id)) && held.has(1_000_000);
        }, { deadlineMs: 60_000 });
      }
      for (const n of nodes) expect(n.log()).not.toContain("fatal");
    });
  }, 240_000);

  procTest("a leader whose disk fills up hands leadership to another voter and does not take it back; writes through it go on", async (env) => {
    await withTmpfs(env, 24, async (disk) => {
      const configs = await clusterConfigs(env.dir, 3, { wal: { segmentSizeBytes: 1 * MIB } });
      const nodes = configs.map((c, i) => env.node(i === 0 ? { ...c, dataDir: join(disk, "node1") } : c));
      for (const n of nodes) n.spawn();
      await Promise.all(nodes.map((n) => n.waitHealthy()));
      const [full] = nodes;
      if (full === undefined) throw new Error("no node1");
      const first = await waitForLeader(nodes);
      if (first !== full) {
        const moved = await postJson(`${first.adminUrl}/admin/transfer-leader`, { id: full.nodeId });
        expect(moved.status).toBe(200);
      }
      await waitFor("node1 to lead", async () => (await waitForLeader(nodes)) === full);
      expect((await executeRaw(full.clientUrl, ["CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"])).status).toBe(200);

      fillTo(disk, join(disk, "filler"), 2 * MIB);
      const next = await waitFor("another voter to lead", async () => {
        const leader = await waitForLeader(nodes);
        return leader !== full ? leader : undefined;
      });
      expect((await getJson<{ disk: string }>(`${full.clientUrl}/health`)).disk).toBe("full");
      // A write sent to the full node goes to the new leader, whose disk has room.
      const through = await executeRaw(full.clientUrl, [{ sql: "INSERT INTO t (v) VALUES (?)", params: ["via node1"] }]);
      expect(through.status).toBe(200);
      expect((await executeRaw(next.clientUrl, [{ sql: "INSERT INTO t (v) VALUES (?)", params: ["at the leader"] }])).status).toBe(200);
      expect(await waitForLeader(nodes)).not.toBe(full);
      expect(full.running).toBe(true);

      fs.rmSync(join(disk, "filler"));
      await waitFor("node1 to see room again", async () => (await getJson<{ disk: string }>(`${full.clientUrl}/health`)).disk === "ok");
      await waitFor("node1 to apply both writes", async () => {
        const r = await queryRaw(full.clientUrl, "SELECT count(*) FROM t", [], "stale");
        return r.status === 200 && Number(r.body?.rows[0]?.[0]) === 2;
      });
    });
  }, 120_000);
});
