// SPEC §2.2/§7: "lower snapshot_interval when the WAL grows too large". By default an image
// (which lets the WAL it covers go) waits until the WAL kept since the newest one is as large
// as the store; a lower snapshot_interval asks for that share of it, so the WAL stays smaller.

import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect } from "bun:test";
import { execute, metric, procTest, useCompiledBinary, useProcessCleanup, waitFor, type ProcEnv } from "../lib/proc.ts";

useProcessCleanup();
useCompiledBinary();

/** A node with 1 MiB WAL segments, after 16 MiB of writes (400 entries of 40 KiB); its images and WAL segments. */
async function afterWrites(env: ProcEnv, snapshotIntervalEntries: number): Promise<{ images: number; segments: number }> {
  const node = await env.startSingleNode({ snapshotIntervalEntries, wal: { segmentSizeBytes: 1024 * 1024 } });
  await execute(node.clientUrl, ["CREATE TABLE t (v BLOB)"]);
  for (let i = 0; i < 400; i++) await execute(node.clientUrl, [{ sql: "INSERT INTO t VALUES (?)", params: ["x".repeat(40 * 1024)] }]);
  const segments = () => readdirSync(join(node.dataDir, "raft", "wal")).filter((n) => n.endsWith(".wal")).length;
  if (snapshotIntervalEntries < 10_000) await waitFor("the WAL to be trimmed behind an image", () => segments() <= 10, { deadlineMs: 20_000 });
  const out = { images: await metric(node.adminUrl, "tensor_chain_snapshots_total"), segments: segments() };
  await node.stop();
  return out;
}

describe("snapshot_interval and the WAL's size", () => {
  procTest("lowered, it makes images often enough that the WAL stays within about eight segments", async (env) => {
    const lowered = await afterWrites(env, 100);
    expect(lowered.images).toBeGreaterThanOrEqual(1);
    expect(lowered.segments).toBeLessThanOrEqual(10);
  }, 120_000);

  procTest("at the default, the WAL waits for the store's size (here: no image, every segment kept)", async (env) => {
    const byDefault = await afterWrites(env, 10_000);
    expect(byDefault.images).toBe(0);
    expect(byDefault.segments).toBeGreaterThanOrEqual(16);
  }, 120_000);
});
