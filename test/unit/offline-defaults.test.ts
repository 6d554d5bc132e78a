// The offline commands find the data directory as init-cluster does: --data-dir, else data_dir
// in --config, else data_dir in the installed configuration (/etc/svc/config.toml; SVC_CONFIG
// points the same code path at a temp file here). A path that does not exist is named, with
// what to do, never a raw ENOENT.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { renderConfigToml } from "../../src/config/index.ts";
import { lockDataDir } from "../../src/storage/index.ts";

const REPO = resolve(import.meta.dir, "../..");
let dir: string;
let configPath: string;
let dataDir: string;

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

function svc(args: string[], env: Record<string, string> = {}): Ran {
  const r = Bun.spawnSync([process.execPath, "src/main.ts", ...args], {
    cwd: REPO,
    env: { ...process.env, NO_COLOR: "1", SVC_CONFIG: configPath, ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: r.exitCode ?? -1, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

function configWithDataDir(path: string, data: string): void {
  fs.writeFileSync(path, renderConfigToml({
    nodeId: "node1",
    dataDir: data,
    listen: { client: "127.0.0.1:17878", admin: "127.0.0.1:19090", peer: "127.0.0.1:17879" },
    cluster: { bootstrap: true, members: [{ id: "node1", peer: "127.0.0.1:17879", client: "127.0.0.1:17878", admin: "127.0.0.1:19090" }] },
  }));
}

beforeAll(() => {
  dir = fs.mkdtempSync(join(tmpdir(), "svc-offline-"));
  configPath = join(dir, "config.toml");
  dataDir = join(dir, "data");
  configWithDataDir(configPath, dataDir);
  // init-cluster reads the default configuration too: this creates the data directory.
  const init = svc(["admin", "init-cluster"]);
  expect(init.stderr).not.toContain("svc:");
  expect(init.code).toBe(0);
});

afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe("offline commands without --data-dir or --config", () => {
  test("wal-repair --skip-corrupted works on data_dir of the default configuration", () => {
    const r = svc(["admin", "wal-repair", "--skip-corrupted", "--dry-run"]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("no damaged WAL records found");
  });

  test("verify-checksums --offline checks data_dir of the default configuration", () => {
    const r = svc(["admin", "verify-checksums", "--offline", "--json"]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout) as { ok: boolean; findings: { target: string }[] };
    expect(report.ok).toBe(true);
    expect(report.findings.some((f) => f.target.startsWith(dataDir))).toBe(true);
  });

  test("verify-checksums --offline on a running node's data directory says to run it without --offline", () => {
    const lock = lockDataDir(dataDir, "a running node");
    try {
      const r = svc(["admin", "verify-checksums", "--offline"]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain("is in use by another svc process");
      expect(r.stderr).toContain("or run without --offline to check through the running node");
      expect(svc(["admin", "verify-checksums", "--data-dir", dataDir]).stderr).toContain("or run without --data-dir to check");
    } finally {
      lock.release();
    }
  });

  test("no default configuration: the message names its path and the flags to pass, exit 2", () => {
    const missing = join(dir, "absent.toml");
    for (const args of [["admin", "wal-repair", "--skip-corrupted"], ["admin", "verify-checksums", "--offline"]]) {
      const r = svc(args, { SVC_CONFIG: missing });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(missing);
      expect(r.stderr).toContain("--data-dir");
      expect(r.stderr).not.toContain("ENOENT");
    }
    const init = svc(["admin", "init-cluster"], { SVC_CONFIG: missing });
    expect(init.code).toBe(2);
    expect(init.stderr).toContain(`no configuration file at ${missing}`);
    expect(init.stderr).not.toContain("ENOENT");
  });
});

describe("offline commands given a path that does not exist", () => {
  test("--data-dir names the missing directory, exit 2, no raw ENOENT", () => {
    const missing = join(dir, "no-such-data");
    for (const args of [["admin", "wal-repair", "--skip-corrupted", "--data-dir", missing], ["admin", "verify-checksums", "--data-dir", missing]]) {
      const r = svc(args);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`the data directory ${missing} (--data-dir) does not exist`);
      expect(r.stderr).not.toContain("ENOENT");
    }
  });

  test("a configuration whose data_dir is missing names that directory and the file it came from", () => {
    const other = join(dir, "other.toml");
    const missing = join(dir, "gone");
    configWithDataDir(other, missing);
    const r = svc(["admin", "wal-repair", "--skip-corrupted", "--config", other]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`the data directory ${missing} (data_dir in ${other}) does not exist`);
    expect(r.stderr).not.toContain("ENOENT");
  });

  test("--config naming a missing file says so, exit 2, no raw ENOENT", () => {
    const missing = join(dir, "nope.toml");
    const r = svc(["admin", "wal-repair", "--skip-corrupted", "--config", missing]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`no configuration file at ${missing}`);
    expect(r.stderr).not.toContain("ENOENT");
  });
});
