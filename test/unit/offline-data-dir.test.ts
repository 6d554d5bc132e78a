// The offline tools pointed at a directory that is not a svc data directory (/etc, an empty
// directory, a typo in data_dir): they refuse, exit 2, name what a data directory holds and
// what to fix, and write nothing into it. The read-only ones (verify-checksums, wal-repair
// --dry-run) write nothing into a real data directory either. init-cluster still makes a new
// data directory where there is none, or in an empty one.

import { afterEach, beforeEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { renderConfigToml } from "../../src/config/index.ts";
import { runSource, type Ran } from "../lib/source-cli.ts";

// Each test starts svc as a process or two; on a loaded machine that can take seconds.
setDefaultTimeout(60_000);

let dir: string;

function svc(args: string[]): Ran {
  return runSource(args, dir);
}

/** Every path under `root`, relative to it, sorted: what a command must leave as it found it. */
function tree(root: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      out.push(relative(root, p));
      if (e.isDirectory()) walk(p);
    }
  };
  walk(root);
  return out.sort();
}

/** A directory like /etc: files and folders, none of them svc's. */
function notADataDir(): string {
  const d = join(dir, "etc");
  fs.mkdirSync(join(d, "ssh"), { recursive: true });
  fs.writeFileSync(join(d, "hosts"), "127.0.0.1 localhost\n");
  fs.writeFileSync(join(d, "ssh", "sshd_config"), "PermitRootLogin no\n");
  return d;
}

function emptyDir(): string {
  const d = join(dir, "empty");
  fs.mkdirSync(d);
  return d;
}

function configFor(dataDir: string): string {
  const path = join(dir, `config-${fs.readdirSync(dir).length}.toml`);
  fs.writeFileSync(path, renderConfigToml({
    nodeId: "node1",
    dataDir,
    listen: { client: "127.0.0.1:17878", admin: "127.0.0.1:19090", peer: "127.0.0.1:17879" },
    cluster: { bootstrap: true, members: [{ id: "node1", peer: "127.0.0.1:17879", client: "127.0.0.1:17878", admin: "127.0.0.1:19090" }] },
  }));
  return path;
}

function expectRefused(r: Ran, target: string): void {
  expect(r.code).toBe(2);
  expect(r.stderr).toContain(`${target} (--data-dir) is not a svc data directory: it holds no raft/ or store/`);
  expect(r.stderr).toContain("data_dir");
  expect(r.stdout).not.toContain("all checks passed");
}

beforeEach(() => {
  dir = fs.mkdtempSync(join(tmpdir(), "svc-offline-dir-"));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

describe("offline tools given a directory that is not a svc data directory", () => {
  test("verify-checksums --data-dir refuses it with exit 2 and creates nothing in it", () => {
    for (const target of [notADataDir(), emptyDir()]) {
      const before = tree(target);
      const r = svc(["admin", "verify-checksums", "--data-dir", target]);
      expectRefused(r, target);
      expect(tree(target)).toEqual(before);
    }
  });

  test("verify-checksums --offline names the configuration whose data_dir is wrong", () => {
    const target = notADataDir();
    const config = configFor(target);
    const before = tree(target);
    const r = svc(["admin", "verify-checksums", "--offline", "--config", config]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${target} (data_dir in ${config}) is not a svc data directory`);
    expect(tree(target)).toEqual(before);
  });

  test("wal-repair --skip-corrupted refuses it, with --dry-run or without, and creates nothing in it", () => {
    for (const target of [notADataDir(), emptyDir()]) {
      const before = tree(target);
      for (const extra of [["--dry-run"], []]) {
        const r = svc(["admin", "wal-repair", "--skip-corrupted", ...extra, "--data-dir", target]);
        expectRefused(r, target);
        expect(r.stdout).toBe("");
        expect(tree(target)).toEqual(before);
      }
    }
  });

  test("wal-replay refuses it and creates nothing in it", () => {
    const archive = join(dir, "archive");
    fs.mkdirSync(archive);
    for (const target of [notADataDir(), emptyDir()]) {
      const before = tree(target);
      const r = svc(["admin", "wal-replay", "--wal-dir", archive, "--until", "2026-01-01T00:00:00Z", "--data-dir", target]);
      expectRefused(r, target);
      expect(tree(target)).toEqual(before);
    }
  });

  test("cleanup-snapshots refuses it instead of reporting that it removed nothing; a data directory no node has started in yet has nothing to clean", () => {
    const target = notADataDir();
    const before = tree(target);
    const r = svc(["admin", "cleanup-snapshots", "--data-dir", target]);
    expectRefused(r, target);
    expect(r.stdout).toBe("");
    expect(tree(target)).toEqual(before);
    // As install.sh leaves it: the daily timer runs before the node's first start too.
    const fresh = emptyDir();
    const clean = svc(["admin", "cleanup-snapshots", "--data-dir", fresh]);
    expect({ code: clean.code, stderr: clean.stderr }).toEqual({ code: 0, stderr: "" });
    expect(tree(fresh)).toEqual([]);
  });

  test("init-cluster refuses a data_dir that holds other files and writes nothing into it", () => {
    const target = notADataDir();
    const config = configFor(target);
    const before = tree(target);
    const r = svc(["admin", "init-cluster", "--config", config]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${target} (data_dir in ${config}) is not a svc data directory`);
    expect(r.stderr).toContain("hosts");
    expect(tree(target)).toEqual(before);
  });
});

describe("the read-only tools on a real data directory", () => {
  test("verify-checksums and wal-repair --dry-run write nothing into a stopped node's data directory", () => {
    const dataDir = join(dir, "data");
    const init = svc(["admin", "init-cluster", "--config", configFor(dataDir)]);
    expect(init.stderr).not.toContain("svc:");
    expect(init.code).toBe(0);
    // As a restored copy is: no LOCK (no node has run on it here), no empty snapshots folder.
    fs.rmSync(join(dataDir, "LOCK"));
    fs.rmSync(join(dataDir, "raft", "snapshots"), { recursive: true });
    const before = tree(dataDir);
    const verify = svc(["admin", "verify-checksums", "--data-dir", dataDir]);
    expect(verify.stderr).toBe("");
    expect(verify.code).toBe(0);
    expect(verify.stdout).toContain("all checks passed");
    expect(tree(dataDir)).toEqual(before);
    const repair = svc(["admin", "wal-repair", "--skip-corrupted", "--dry-run", "--data-dir", dataDir]);
    expect(repair.stderr).toBe("");
    expect(repair.code).toBe(0);
    expect(tree(dataDir)).toEqual(before);
  });
});

describe("wal-repair --dry-run", () => {
  test("looks without --skip-corrupted, which only a repair that removes entries needs, and writes nothing", () => {
    const dataDir = join(dir, "data");
    expect(svc(["admin", "init-cluster", "--config", configFor(dataDir)]).code).toBe(0);
    fs.rmSync(join(dataDir, "LOCK"));
    const before = tree(dataDir);
    const look = svc(["admin", "wal-repair", "--dry-run", "--data-dir", dataDir]);
    expect(look.stderr).toBe("");
    expect(look.code).toBe(0);
    expect(tree(dataDir)).toEqual(before);
    // A repair itself still asks for the acknowledgement.
    const repair = svc(["admin", "wal-repair", "--data-dir", dataDir]);
    expect(repair.code).toBe(2);
    expect(repair.stderr).toContain("--skip-corrupted");
  });
});

describe("init-cluster makes a new data directory", () => {
  test("in an empty directory, or one holding only lost+found (a fresh file system)", () => {
    for (const [name, prepare] of [["empty", () => {}], ["mount", (d: string) => fs.mkdirSync(join(d, "lost+found"))]] as const) {
      const dataDir = join(dir, name);
      fs.mkdirSync(dataDir);
      prepare(dataDir);
      const r = svc(["admin", "init-cluster", "--config", configFor(dataDir)]);
      expect(r.stderr).not.toContain("svc:");
      expect(r.code).toBe(0);
      expect(fs.existsSync(join(dataDir, "raft"))).toBe(true);
      expect(svc(["admin", "verify-checksums", "--data-dir", dataDir]).code).toBe(0);
    }
  });
});
