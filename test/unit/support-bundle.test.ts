// `svc admin support-bundle`: one tar.gz with version, redacted configuration, log lines,
// cluster-status, stats, /metrics, disk usage and host facts. Secrets planted in the
// configuration (and repeated in the log), and the contents of the gossip key file, appear in
// none of the extracted files; a node that does not answer is recorded as such and the bundle
// is still written.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { extract } from "tar";
import { redactConfig } from "../../src/cli/admin/_redact.ts";
import { freePorts } from "../lib/proc-ports.ts";

const REPO = resolve(import.meta.dir, "../..");

/** Values that must not appear anywhere in a bundle. */
const SECRETS = [
  "AKIAIOSFODNN7EXAMPLE",
  "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
  "kms-9f8e7d6c5b4a",
  "hunter2-basic",
  "urlpass-0451",
  "tok_live_abcdef123456",
  "s3cr3t-env-quoted value",
];

/** The gossip key ([gossip] key_file): the file's contents are secret, wherever they appear. */
const GOSSIP_KEY = Buffer.from("0123456789abcdef0123456789ABCDEF").toString("base64");

const archiveCommand = [
  `AWS_ACCESS_KEY_ID=${SECRETS[0]} AWS_SECRET_ACCESS_KEY=${SECRETS[1]}`,
  `aws s3 cp %p s3://backups/wal/%f --sse-kms-key-id ${SECRETS[2]}`,
  `&& curl -u archiver:${SECRETS[3]} https://archiver:${SECRETS[4]}@backup.example/wal/%f`,
  `-H 'Authorization: Bearer ${SECRETS[5]}' && DB_PASSWORD=\\"${SECRETS[6]}\\" true`,
].join(" ");

let dir: string;
let node: ReturnType<typeof Bun.spawn> | null = null;
let adminPort: number;
let configPath: string;
let logPath: string;
let dataDir: string;
let gossipKeyPath: string;

function configText(ports: number[], data: string): string {
  return [
    'node_id = "node1"',
    `data_dir = "${data}"`,
    "[listen]",
    `client = "127.0.0.1:${ports[0]}"`,
    `admin = "127.0.0.1:${ports[1]}"`,
    `peer = "127.0.0.1:${ports[2]}"`,
    "[cluster]",
    "bootstrap = true",
    `members = [ { id = "node1", peer = "127.0.0.1:${ports[2]}", client = "127.0.0.1:${ports[0]}", admin = "127.0.0.1:${ports[1]}" } ]`,
    "[wal]",
    `archive_command = "${archiveCommand}"`,
    "[gossip]",
    `key_file = "${gossipKeyPath}"`,
    "",
  ].join("\n");
}

function svc(args: string[]): { code: number; stdout: string; stderr: string } {
  const r = Bun.spawnSync([process.execPath, "src/main.ts", ...args], { cwd: REPO, env: { ...process.env, NO_COLOR: "1", SVC_CONFIG: join(dir, "absent.toml") }, stdout: "pipe", stderr: "pipe" });
  return { code: r.exitCode ?? -1, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

/** The bundle's files, extracted: name → text. */
async function unpack(bundle: string): Promise<Map<string, string>> {
  const into = fs.mkdtempSync(join(dir, "x-"));
  await extract({ file: bundle, cwd: into });
  const [top] = fs.readdirSync(into);
  if (top === undefined) throw new Error("empty bundle");
  const files = new Map<string, string>();
  for (const name of fs.readdirSync(join(into, top))) files.set(name, fs.readFileSync(join(into, top, name), "utf8"));
  return files;
}

beforeAll(async () => {
  dir = fs.mkdtempSync(join(tmpdir(), "svc-bundle-"));
  const ports = await freePorts(3);
  adminPort = ports[1] ?? 0;
  dataDir = join(dir, "data");
  configPath = join(dir, "config.toml");
  gossipKeyPath = join(dir, "gossip.key");
  fs.writeFileSync(gossipKeyPath, `${GOSSIP_KEY}\n`, { mode: 0o600 });
  fs.writeFileSync(configPath, configText(ports, dataDir));
  logPath = join(dir, "svc.log");
  const logLines = Array.from({ length: 50 }, (_, i) => `2026-01-01T00:00:${String(i).padStart(2, "0")} INFO line ${i}`);
  logLines.push(`2026-01-01T00:01:00 WARN archive_command failed: ${archiveCommand}`);
  logLines.push(`2026-01-01T00:01:01 INFO an operator note quoting the gossip key ${GOSSIP_KEY}`);
  fs.writeFileSync(logPath, `${logLines.join("\n")}\n`);
  node = Bun.spawn([process.execPath, "src/main.ts", "serve", "--config", configPath], { cwd: REPO, stdout: "ignore", stderr: "ignore" });
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      const r = await fetch(`http://127.0.0.1:${adminPort}/health`, { signal: AbortSignal.timeout(1_000) });
      if (r.ok) break;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error("the node did not become healthy");
    await Bun.sleep(100);
  }
}, 60_000);

afterAll(async () => {
  node?.kill("SIGTERM");
  await node?.exited;
  fs.rmSync(dir, { recursive: true, force: true });
});

describe("svc admin support-bundle", () => {
  test("writes one tar.gz with every part, fetched from the running node", async () => {
    const out = join(dir, "bundle.tar.gz");
    const r = svc(["admin", "support-bundle", "--config", configPath, "--log-file", logPath, "--lines", "10", "--out", out]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout.trim().split("\n")).toHaveLength(1);
    expect(r.stdout).toContain(out);
    const files = await unpack(out);
    expect([...files.keys()].sort()).toEqual(["cluster-status.json", "config.toml", "disk-usage.json", "host.json", "log.txt", "manifest.json", "metrics.txt", "stats.json", "version.txt"]);
    expect(files.get("version.txt")).toMatch(/^svc \S+ \(\S+\)/);
    expect(files.get("log.txt")?.trim().split("\n")).toHaveLength(10);
    expect(files.get("metrics.txt")).toContain("tensor_chain_commit_index");
    expect(JSON.parse(files.get("stats.json") ?? "{}")).toHaveProperty("total_entries");
    const status = JSON.parse(files.get("cluster-status.json") ?? "{}") as {
      members: { id: string; reachable: boolean }[];
      cluster_status: { answered_by: string; groups: string[][]; members: { id: string; state: string }[]; healthy: boolean };
    };
    expect(status.members).toEqual([expect.objectContaining({ id: "node1", reachable: true })]);
    // cluster-status itself, as `--json` prints it: gossip states, groups, the verdict.
    expect(status.cluster_status.answered_by).toBe("node1");
    expect(status.cluster_status.groups).toEqual([["node1"]]);
    expect(status.cluster_status.members).toEqual([expect.objectContaining({ id: "node1", state: "alive" })]);
    expect(typeof status.cluster_status.healthy).toBe("boolean");
    const disk = JSON.parse(files.get("disk-usage.json") ?? "{}") as { dirs: { path: string }[] };
    expect(disk.dirs.map((d) => d.path)).toEqual(expect.arrayContaining(["raft", "raft/wal", "store"]));
    const host = JSON.parse(files.get("host.json") ?? "{}") as { cores: number; kernel: { release: string }; data_dir: { mount: { fsType: string; options: string } } };
    expect(host.cores).toBeGreaterThan(0);
    expect(host.kernel.release).not.toBe("");
    expect(host.data_dir.mount.options).not.toBe("");
    expect(files.get("config.toml")).toContain('node_id = "node1"');
  }, 60_000);

  test("no secret of the configuration appears in any file of the bundle, the log included", async () => {
    const out = join(dir, "secrets.tar.gz");
    const r = svc(["admin", "support-bundle", "--config", configPath, "--log-file", logPath, "--out", out, "--json"]);
    expect(r.code).toBe(0);
    const files = await unpack(out);
    for (const [name, text] of files) {
      for (const secret of [...SECRETS, GOSSIP_KEY]) expect({ name, leaked: text.includes(secret) ? secret : null }).toEqual({ name, leaked: null });
    }
    expect(files.get("config.toml")).toContain("[REDACTED]");
    expect(files.get("config.toml")).toContain("aws s3 cp %p s3://backups/wal/%f");
    expect(files.get("log.txt")).toContain("archive_command failed");
  }, 60_000);

  test("a node that does not answer is recorded as such and the bundle is still written", async () => {
    const ports = await freePorts(3);
    const other = join(dir, "down.toml");
    fs.writeFileSync(other, configText(ports, dataDir));
    const out = join(dir, "down.tar.gz");
    const r = svc(["admin", "support-bundle", "--config", other, "--log-file", logPath, "--out", out, "--json"]);
    expect(r.code).toBe(0);
    const manifest = JSON.parse(r.stdout) as { files: { name: string; ok: boolean; note?: string }[] };
    for (const name of ["cluster-status.json", "stats.json", "metrics.txt"]) {
      expect(manifest.files.find((f) => f.name === name)).toMatchObject({ ok: false, note: expect.stringContaining("did not answer") });
    }
    const files = await unpack(out);
    expect(JSON.parse(files.get("stats.json") ?? "{}")).toMatchObject({ reachable: false });
  }, 60_000);
});

describe("configuration redaction", () => {
  test("every key named like a secret, multi-line values and inline tables included, is redacted", () => {
    const text = [
      "# security settings",
      "[security]",
      'key = "k3y-material-1"',
      'api_token = "tok-000111"',
      "password = 'pa55word-x'",
      'tls.private_key = """',
      "-----BEGIN PRIVATE KEY-----",
      "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
      "-----END PRIVATE KEY-----",
      '"""',
      'peers = [ { id = "n1", secret = "inline-s3cret" } ]',
      'note = "token=plain-tok-9 rest"',
      'data_dir = "/var/lib/svc"',
    ].join("\n");
    const r = redactConfig(text);
    for (const s of ["k3y-material-1", "tok-000111", "pa55word-x", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "inline-s3cret", "plain-tok-9"]) expect(r.text).not.toContain(s);
    expect(r.text).toContain('data_dir = "/var/lib/svc"');
    expect(r.text).toContain('key = "[REDACTED]"');
    expect(r.secrets).toEqual(expect.arrayContaining(["k3y-material-1", "tok-000111", "pa55word-x", "inline-s3cret", "plain-tok-9"]));
  });

  test("secrets given to the tools an archive_command runs are redacted, and paths that look alike are not", () => {
    const command = "gpg --batch --passphrase Hunter2Secret -c %p && curl -H 'X-Api-Key: apikeyvalue987654' -T %p https://h/%f; " +
      "openssl enc -pass pass:OpenSecret1 -in %p; sshpass -p SshSecret9 scp %p h:/a/%f; aws s3 cp %p s3://bucket/key:1/%f";
    const r = redactConfig(`[wal]\narchive_command = "${command}"`);
    for (const secret of ["Hunter2Secret", "apikeyvalue987654", "OpenSecret1", "SshSecret9"]) expect(r.text).not.toContain(secret);
    expect(r.text).toContain("s3://bucket/key:1/%f");
    expect(r.text).toContain("https://h/%f");
  });
});
