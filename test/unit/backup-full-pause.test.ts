// backup full and a write pause an operator set before it, against a stand-in for the node's
// admin API with a clock of its own (the leader's): the backup's pause never ends the operator's
// sooner than it would have ended, and the end is put back by the leader's clock, not this host's.

import { afterEach, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FullBackup, notCounted, type BackupNodeApi } from "../../src/backup/index.ts";
import { snapshotDirName } from "../../src/storage/index.ts";

const dirs: string[] = [];
function tempDir(): string {
  const d = fs.mkdtempSync(join(tmpdir(), "svc-backup-pause-"));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

/** A node's admin API as the backup sees it; the cluster's pause is held on the leader's clock, `skewMs` off this host's. */
class FakeNode implements BackupNodeApi {
  /** The pause: null when writes are not paused; untilMs null for a pause with no end. */
  pause: { untilMs: number | null } | null = null;
  readonly leases: number[] = [];
  /** How long taking the image takes. */
  imageTakesMs = 0;
  private readonly imageDir: string;

  constructor(private readonly skewMs: number) {
    const dataDir = tempDir();
    this.imageDir = join(dataDir, "raft", "snapshots", snapshotDirName(1, 5));
    fs.mkdirSync(this.imageDir, { recursive: true });
    const state = Buffer.from("image at 5");
    fs.writeFileSync(join(this.imageDir, "state.db"), state);
    fs.writeFileSync(join(this.imageDir, "meta.json"), JSON.stringify({
      formatVersion: 1, clusterId: "c-1", index: 5, term: 1, membership: { voters: ["node1"], learners: [] },
      createdAt: new Date().toISOString(), stateSha256: createHash("sha256").update(state).digest("hex"), stateSizeBytes: state.length,
    }));
  }

  leaderNowMs(): number {
    return Date.now() + this.skewMs;
  }

  async clusterInfo(): Promise<Record<string, unknown>> {
    const until = this.pause?.untilMs;
    return { node_id: "node1", leader: "node1", writes_paused: this.pause !== null, ...(typeof until === "number" ? { writes_paused_until: new Date(until).toISOString() } : {}) };
  }

  async pauseWrites(leaseMs: number): Promise<{ index: number; untilMs: number | null }> {
    this.leases.push(leaseMs);
    this.pause = { untilMs: this.leaderNowMs() + leaseMs };
    return { index: 5, untilMs: this.pause.untilMs };
  }

  async resumeWrites(): Promise<void> {
    this.pause = null;
  }

  async appliedIndex(): Promise<number> {
    return 5;
  }

  async snapshotHere(): Promise<{ dir: string; index: number; term: number }> {
    await Bun.sleep(this.imageTakesMs);
    return { dir: this.imageDir, index: 5, term: 1 };
  }

  async totalEntries() {
    return notCounted;
  }
}

function runBackup(node: FakeNode, progress: string[] = []): Promise<unknown> {
  const dataDir = tempDir();
  const configDir = tempDir();
  fs.writeFileSync(join(configDir, "config.toml"), "");
  return new FullBackup(node, {
    to: tempDir(), dataDir, configDir, leaseMs: 3000, retainMs: null, offsite: null, offsiteRetainMs: null, nowMs: Date.now(),
    progress: (line) => progress.push(line),
  }).run();
}

describe("backup full under an operator's pause", () => {
  test("the backup pauses to the end of an operator's pause found ending after its own lease, not for that shorter lease: a backup killed -9 leaves the operator's pause as long as it was", async () => {
    const node = new FakeNode(0);
    const operatorUntilMs = node.leaderNowMs() + 600_000;
    node.pause = { untilMs: operatorUntilMs };
    await runBackup(node);
    const first = node.leases[0] ?? 0;
    expect(first).toBeGreaterThanOrEqual(595_000);
    for (const leaseMs of node.leases) expect(leaseMs).toBeGreaterThanOrEqual(3000);
  });

  for (const skewMs of [-300_000, 300_000]) {
    test(`an operator's end is put back as the leader's clock has it, with the leader's clock ${skewMs < 0 ? "behind" : "ahead of"} this host's by ${Math.abs(skewMs) / 1000} s`, async () => {
      const node = new FakeNode(skewMs);
      const operatorUntilMs = node.leaderNowMs() + 600_000;
      node.pause = { untilMs: operatorUntilMs };
      await runBackup(node);
      const after = node.pause?.untilMs ?? 0;
      // Never before the operator's end; after it by no more than the exchange with the node took.
      expect(after).toBeGreaterThanOrEqual(operatorUntilMs);
      expect(after - operatorUntilMs).toBeLessThan(5_000);
    });
  }
});

describe("backup full's progress once the image is taken", () => {
  const afterImage = (progress: string[]): string => progress.find((l) => l.endsWith("writing the archive")) ?? "";

  test("with nothing paused before it: writes resumed", async () => {
    const progress: string[] = [];
    await runBackup(new FakeNode(0), progress);
    expect(afterImage(progress)).toBe("writes resumed; writing the archive");
  });

  test("under an operator's pause with no end: writes left paused, not resumed", async () => {
    const node = new FakeNode(0);
    node.pause = { untilMs: null };
    const progress: string[] = [];
    await runBackup(node, progress);
    expect(node.pause).toEqual({ untilMs: null });
    expect(afterImage(progress)).toBe("writes left paused with no end, as they were before the backup; writing the archive");
  });

  test("under an operator's pause with an end to come: writes left paused until that end, not resumed", async () => {
    const node = new FakeNode(0);
    const operatorUntilMs = node.leaderNowMs() + 600_000;
    node.pause = { untilMs: operatorUntilMs };
    const progress: string[] = [];
    await runBackup(node, progress);
    expect(afterImage(progress)).toBe(`writes left paused until ${new Date(operatorUntilMs).toISOString()}, as they were before the backup; writing the archive`);
  });

  test("under an operator's pause whose end passed during the backup: writes resumed, naming that end", async () => {
    const node = new FakeNode(0);
    const operatorUntilMs = node.leaderNowMs() + 20;
    node.pause = { untilMs: operatorUntilMs };
    node.imageTakesMs = 200;
    const progress: string[] = [];
    await runBackup(node, progress);
    expect(node.pause).toBeNull();
    expect(afterImage(progress)).toBe(`writes resumed (the pause found before the backup ended at ${new Date(operatorUntilMs).toISOString()}); writing the archive`);
  });
});
