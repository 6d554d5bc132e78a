// The retention commands as an operator and the timers run them: `svc admin cleanup-snapshots`
// and `svc admin cleanup-wal-archive`, through the real entry point.

import { afterEach, beforeEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

// Each test starts svc as a process; on a loaded machine that can take seconds.
setDefaultTimeout(120_000);

const MAIN = resolve(import.meta.dir, "../../src/main.ts");
const DAY_MS = 86_400_000;

function svc(...args: string[]): { exitCode: number; stdout: string; stderr: string } {
  const r = Bun.spawnSync([process.execPath, MAIN, ...args], { stdout: "pipe", stderr: "pipe", env: { ...process.env, NO_COLOR: "1" } });
  return { exitCode: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

let root: string;
beforeEach(() => {
  root = fs.mkdtempSync(join(tmpdir(), "svc-cleanup-cli-"));
});
afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

function snapshot(dataDir: string, index: number, ageDays: number): string {
  const name = `${"1".padStart(16, "0")}-${index.toString(16).padStart(16, "0")}`;
  const dir = join(dataDir, "raft", "snapshots", name);
  fs.mkdirSync(dir, { recursive: true });
  const state = Buffer.from(`state ${index}`);
  fs.writeFileSync(join(dir, "state.db"), state);
  fs.writeFileSync(join(dir, "meta.json"), JSON.stringify({
    formatVersion: 1, clusterId: "c", index, term: 1, membership: { voters: ["node1"] },
    createdAt: new Date(Date.now() - ageDays * DAY_MS).toISOString(),
    stateSha256: createHash("sha256").update(state).digest("hex"), stateSizeBytes: state.length,
  }));
  return dir;
}

function walFile(dir: string, name: string, ageDays: number): string {
  const path = join(dir, name);
  fs.writeFileSync(path, "segment");
  const t = (Date.now() - ageDays * DAY_MS) / 1000;
  fs.utimesSync(path, t, t);
  return path;
}

describe("svc admin cleanup-snapshots", () => {
  test("--dry-run prints one line per snapshot it would remove and a summary, and removes nothing", () => {
    const dataDir = join(root, "data");
    const old1 = snapshot(dataDir, 10, 20);
    const old2 = snapshot(dataDir, 20, 9);
    snapshot(dataDir, 30, 1);
    const r = svc("admin", "cleanup-snapshots", "--data-dir", dataDir, "--older-than", "7d", "--dry-run");
    expect(r.exitCode).toBe(0);
    const lines = r.stdout.trim().split("\n");
    expect(lines).toHaveLength(3);
    expect(lines[0]).toStartWith(`would remove ${old1} `);
    expect(lines[1]).toStartWith(`would remove ${old2} `);
    expect(lines[2]).toContain("dry run");
    expect(fs.existsSync(old1) && fs.existsSync(old2)).toBe(true);
  });

  test("removes old snapshots from the data_dir named in --config", () => {
    const dataDir = join(root, "data");
    const old = snapshot(dataDir, 10, 20);
    const newest = snapshot(dataDir, 30, 15);
    const config = join(root, "config.toml");
    fs.writeFileSync(config, `node_id = "node1"\ndata_dir = ${JSON.stringify(dataDir)}\n`);
    const r = svc("admin", "cleanup-snapshots", "--config", config, "--older-than", "7d");
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toContain(`removed ${old} `);
    expect(fs.existsSync(old)).toBe(false);
    expect(fs.existsSync(newest)).toBe(true);
  });

  test("--json prints the report as one JSON object", () => {
    const dataDir = join(root, "data");
    const old = snapshot(dataDir, 10, 20);
    const newest = snapshot(dataDir, 30, 1);
    const r = svc("admin", "cleanup-snapshots", "--data-dir", dataDir, "--json");
    expect(r.exitCode).toBe(0);
    const report = JSON.parse(r.stdout);
    expect(report.removed.map((e: { path: string }) => e.path)).toEqual([old]);
    expect(report.newestValid).toBe(newest.split("/").at(-1));
    expect(report.dryRun).toBe(false);
  });

  test("exits 1 and says why when snapshots exist but none verifies", () => {
    const dataDir = join(root, "data");
    const dir = snapshot(dataDir, 10, 20);
    fs.writeFileSync(join(dir, "state.db"), "damaged");
    const r = svc("admin", "cleanup-snapshots", "--data-dir", dataDir);
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain("verifies");
    expect(fs.existsSync(dir)).toBe(true);
  });

  test("a malformed --older-than is a usage error (exit 2)", () => {
    const r = svc("admin", "cleanup-snapshots", "--data-dir", root, "--older-than", "1 week");
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain("--older-than");
  });

  test("an invalid config file is a usage error that names the problem", () => {
    const config = join(root, "bad.toml");
    fs.writeFileSync(config, `node_id = "node1"\ndata_dirr = "/x"\n`);
    const r = svc("admin", "cleanup-snapshots", "--config", config);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain("data_dirr");
  });
});

/** As root, with this checkout readable by nobody (a checkout under a private home is not). */
function canRunAsNobody(): boolean {
  if (process.getuid?.() !== 0) return false;
  const r = Bun.spawnSync(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", process.execPath, "-e", `require(${JSON.stringify(MAIN)}.replace("main.ts", "version.ts"))`], { stdout: "ignore", stderr: "ignore" });
  return r.exitCode === 0;
}

describe("svc admin cleanup-wal-archive", () => {
  test("removes only old .wal files and prints each removed path", () => {
    const old = walFile(root, "0000000000000001-0000000000000001.wal", 31);
    const young = walFile(root, "0000000000000002-0000000000000100.wal", 2);
    const other = walFile(root, "notes.txt", 400);
    const r = svc("admin", "cleanup-wal-archive", "--dir", root, "--older-than", "30d");
    expect(r.exitCode).toBe(0);
    expect(r.stdout.split("\n")[0]).toStartWith(`removed ${old} `);
    expect([fs.existsSync(old), fs.existsSync(young), fs.existsSync(other)]).toEqual([false, true, true]);
  });

  test("--dry-run removes nothing", () => {
    const old = walFile(root, "a.wal", 31);
    const r = svc("admin", "cleanup-wal-archive", "--dir", root, "--dry-run");
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toContain(`would remove ${old} `);
    expect(fs.existsSync(old)).toBe(true);
  });

  test("a location of a scheme other than s3:// exits 2 naming the two it takes", () => {
    const r = svc("admin", "cleanup-wal-archive", "--dir", "gs://bucket/wal");
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain("s3://bucket/prefix");
  });

  test("a missing --dir is a usage error", () => {
    expect(svc("admin", "cleanup-wal-archive").exitCode).toBe(2);
  });

  test("--older-than below a day (0d, 0h, 0s, 23h) is refused with exit 2 and removes nothing: a point-in-time restore from the newest daily backup replays those segments", () => {
    const recent = walFile(root, "0000000000000101-0000000000000200-0000000000000001.wal", 0.5);
    const older = walFile(root, "0000000000000001-0000000000000100-0000000000000001.wal", 2);
    for (const age of ["0d", "0h", "0s", "23h", "1439m"]) {
      const r = svc("admin", "cleanup-wal-archive", "--dir", root, "--older-than", age);
      expect({ age, exitCode: r.exitCode, stdout: r.stdout }).toEqual({ age, exitCode: 2, stdout: "" });
      expect(r.stderr).toBe(`svc: --older-than ${age} removes archived WAL segments written since the newest daily full backup (all of them at 0), ` +
        "which a point-in-time restore from it replays (SPEC §4.5)\n  → give at least 1d; the weekly timer keeps 30d, as long as full backups are kept\n");
    }
    expect([fs.existsSync(recent), fs.existsSync(older)]).toEqual([true, true]);
    const day = svc("admin", "cleanup-wal-archive", "--dir", root, "--older-than", "24h");
    expect(day.exitCode).toBe(0);
    expect([fs.existsSync(recent), fs.existsSync(older)]).toEqual([true, false]);
  });

  test.skipIf(!canRunAsNobody())("a directory the user may list but not search fails with exit 1, naming the file and what to do", () => {
    const dir = join(root, "archive");
    fs.mkdirSync(dir);
    walFile(dir, "0000000000000001-0000000000000001.wal", 40);
    fs.chmodSync(root, 0o755);
    fs.chmodSync(dir, 0o644);
    // As nobody: root searches any directory.
    const r = Bun.spawnSync(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", process.execPath, MAIN, "admin", "cleanup-wal-archive", "--dir", dir], {
      stdout: "pipe", stderr: "pipe", env: { ...process.env, NO_COLOR: "1" },
    });
    expect(r.exitCode).toBe(1);
    expect(r.stderr.toString()).toContain("cannot read the age of");
    expect(r.stderr.toString()).toContain("chmod u+x");
  });

  test("a directory that does not exist fails with exit 1", () => {
    const r = svc("admin", "cleanup-wal-archive", "--dir", join(root, "missing"));
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain("does not exist");
  });
});
