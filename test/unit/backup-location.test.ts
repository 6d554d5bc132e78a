// Where backups and archived WAL go is a directory or s3://BUCKET/PREFIX. A location that
// starts like a URL but is not one svc reads (s3:/bucket with one slash, S3://…, gs://…) is a
// mistake, refused before anything is written: taken as a directory, it made a local folder
// named "s3:" and reported an off-site backup as done. In [backup] of the configuration it is
// refused by the backup commands that read it there, and only a warning to --validate: the node
// never reads [backup], and it starts with the file it started with before.

import { afterAll, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { locationProblem, parseConfig } from "../../src/config/index.ts";
import { parseObjectUrl } from "../../src/backup/index.ts";

const REPO = resolve(import.meta.dir, "../..");
const dir = fs.mkdtempSync(join(tmpdir(), "svc-backup-location-"));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function svc(args: string[]): { code: number; stderr: string } {
  const env: Record<string, string | undefined> = { ...process.env, NO_COLOR: "1", SVC_CONFIG: join(dir, "absent.toml") };
  delete env.SVC_TOKEN;
  const r = Bun.spawnSync([process.execPath, join(REPO, "src/main.ts"), ...args], { cwd: dir, env, stdout: "pipe", stderr: "pipe" });
  return { code: r.exitCode ?? -1, stderr: r.stderr.toString() };
}

const config = join(dir, "etc", "config.toml");
fs.mkdirSync(join(dir, "etc"));
// Its node's admin port is port 1 on loopback, where nothing answers: a command that got as far as asking it fails otherwise.
fs.writeFileSync(config, `node_id = "node1"\ndata_dir = "${join(dir, "data")}"\n[listen]\nadmin = "127.0.0.1:1"\n`);

const misspelt = ["s3:/bucket/full", "s3:bucket", "S3://bucket/full", "gs://bucket/full", "s3://B/x"];

test("backup full and backup snapshot refuse such a --to, exit 2, and write nothing", () => {
  for (const to of misspelt) {
    for (const command of ["full", "snapshot"]) {
      const r = svc(["admin", "backup", command, "--config", config, "--to", to]);
      expect({ to, command, code: r.code, said: r.stderr.includes("s3://bucket/prefix") }).toEqual({ to, command, code: 2, said: true });
    }
  }
  expect(fs.readdirSync(dir).sort()).toEqual(["etc"]);
});

test("backup full refuses such an --offsite, backup offsite such a --from or --to", () => {
  expect(svc(["admin", "backup", "full", "--config", config, "--to", join(dir, "bk"), "--offsite", "s3:/bucket/offsite"]).code).toBe(2);
  expect(svc(["admin", "backup", "offsite", "--from", join(dir, "bk"), "--to", "s3:/bucket/offsite"]).code).toBe(2);
  expect(svc(["admin", "backup", "offsite", "--from", "S3://bucket/full", "--to", join(dir, "off")]).code).toBe(2);
  expect(fs.existsSync(join(dir, "bk"))).toBe(false);
});

test("wal-replay, cleanup-wal-archive, backup verify and backup fetch refuse such a location", () => {
  expect(svc(["admin", "wal-replay", "--wal-dir", "s3:/bucket/wal", "--until", "2026-11-22T21:30:00Z", "--data-dir", join(dir, "data")]).code).toBe(2);
  expect(svc(["admin", "cleanup-wal-archive", "--dir", "s3:/bucket/wal", "--older-than", "30d"]).code).toBe(2);
  expect(svc(["admin", "backup", "verify", "s3:/bucket/full/svc-backup-20261122.tar.gz"]).code).toBe(2);
  expect(svc(["admin", "backup", "fetch", "S3://bucket/offsite/latest.tar.gz", "--out", join(dir, "latest.tar.gz")]).code).toBe(2);
});

const badBackupLocations = [["dir", "s3:/bucket/full"], ["offsite", "S3://bucket/offsite"], ["dir", "backups"]] as const;

test("a [backup] dir or offsite that is no absolute directory or s3://BUCKET/PREFIX is a warning, and the node's configuration still loads", () => {
  for (const [key, value] of badBackupLocations) {
    const r = parseConfig(`node_id = "node1"\ndata_dir = "/var/lib/svc"\n[backup]\n${key} = "${value}"\n`, "config.toml");
    expect({ key, value, ok: r.ok, warnings: r.ok ? (r.warnings ?? []).map((w) => w.keyPath) : null }).toEqual({ key, value, ok: true, warnings: [`backup.${key}`] });
  }
  for (const value of ["", "/var/backups/svc", "s3://bucket/full"]) {
    const r = parseConfig(`node_id = "node1"\ndata_dir = "/var/lib/svc"\n[backup]\ndir = "${value}"\n`, "config.toml");
    expect({ value, ok: r.ok, warnings: r.ok ? (r.warnings ?? []).length : null }).toEqual({ value, ok: true, warnings: 0 });
  }
});

/** The test's configuration with a [backup] table. */
function withBackup(name: string, table: string): string {
  const path = join(dir, "etc", name);
  fs.writeFileSync(path, `${fs.readFileSync(config, "utf8")}[backup]\n${table}`);
  return path;
}

test("--validate warns about such a [backup] location, naming its key, and passes the file", () => {
  const path = withBackup("validate.toml", 'dir = "s3:/bucket/full"\n');
  const r = Bun.spawnSync([process.execPath, join(REPO, "src/main.ts"), "--config", path, "--validate"], { cwd: dir, env: { ...process.env, NO_COLOR: "1" }, stdout: "pipe", stderr: "pipe" });
  expect(r.exitCode).toBe(0);
  expect(r.stderr.toString()).toContain("WARNING: backup.dir");
  expect(r.stderr.toString()).toContain("s3://bucket/prefix");
});

test("the backup timers' commands refuse a [backup] location they read from the configuration that is none, exit 2, naming the key", () => {
  const full = withBackup("full.toml", 'dir = "s3:/bucket/full"\n');
  const relative = withBackup("relative.toml", 'dir = "backups"\n');
  const from = withBackup("from.toml", `dir = "gs://bucket/full"\noffsite = "${join(dir, "off")}"\n`);
  const offsite = withBackup("offsite.toml", `dir = "${join(dir, "bk")}"\noffsite = "S3://bucket/offsite"\n`);
  for (const [path, command, key] of [[full, "full", "dir"], [full, "snapshot", "dir"], [relative, "full", "dir"], [from, "offsite", "dir"], [offsite, "offsite", "offsite"]] as const) {
    const r = svc(["admin", "backup", command, "--config", path, "--if-leader"]);
    expect({ path, command, code: r.code, said: r.stderr.includes(`[backup] ${key} in ${path}`) }).toEqual({ path, command, code: 2, said: true });
  }
  expect(fs.readdirSync(dir).sort()).toEqual(["etc"]);
});

test("a location the configuration takes as an object store is one the object store's client parses, and no other", () => {
  const urls = ["s3://bucket", "s3://bucket/", "s3://bucket/full/daily", "s3://a.b-c/x", "s3://abc", "s3://ab", "s3://B/x", "s3://-bucket/x", "s3://bucket-/x", `s3://${"a".repeat(63)}/x`, `s3://${"a".repeat(64)}/x`, "s3://bucket\n/x", "s3:///x"];
  for (const url of urls) {
    let parsed: boolean;
    try {
      parseObjectUrl(url);
      parsed = true;
    } catch {
      parsed = false;
    }
    expect({ url, taken: locationProblem(url) === null }).toEqual({ url, taken: parsed });
  }
});
