// SPEC §2.1 names the WAL directory /var/lib/svc/raft/wal/ "also /var/lib/svc/wal/", and the
// snapshot directory raft/snapshots/ "also /var/lib/svc/snapshots/". On a real node: both names
// lead there once it started (du and ls through them see the WAL and the images), a full backup
// and offline verify-checksums see each file once, and a directory an operator left at one of
// those names is kept as it is.

import * as fs from "node:fs";
import { join } from "node:path";
import { describe, expect } from "bun:test";
import * as tar from "tar";
import { execute, postJson, procTest, runBinary, singleNodeConfig, useCompiledBinary, useProcessCleanup, type NodeProcess } from "../lib/proc.ts";

useProcessCleanup();
useCompiledBinary();

async function writeRows(node: NodeProcess, count: number): Promise<void> {
  await execute(node.clientUrl, ["CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"]);
  for (let i = 1; i <= count; i++) await execute(node.clientUrl, [{ sql: "INSERT INTO t (id, v) VALUES (?, ?)", params: [i, `row-${i}`] }]);
}

/** `du -sk` of each path as given (du does not follow a link it is given, unless told: -D). */
function duKib(...args: string[]): number[] {
  const r = Bun.spawnSync(["du", "-sk", ...args]);
  if (r.exitCode !== 0) throw new Error(`du ${args.join(" ")} failed: ${r.stderr.toString()}`);
  return r.stdout.toString().trim().split("\n").map((l) => Number(l.split("\t")[0]));
}

describe("the wal and snapshots names of a node's data directory", () => {
  procTest("a started node answers to <data_dir>/wal and <data_dir>/snapshots; a full backup and verify-checksums see each file once", async (env) => {
    const node = await env.startSingleNode();
    await writeRows(node, 20);
    expect((await postJson(`${node.adminUrl}/admin/snapshot?wait=true`, {})).status).toBe(200);
    const data = node.dataDir;
    expect(fs.readlinkSync(join(data, "wal"))).toBe("raft/wal");
    expect(fs.readlinkSync(join(data, "snapshots"))).toBe("raft/snapshots");
    expect(node.log()).toContain(`made ${join(data, "wal")} a link to raft/wal`);
    // What an operator checks: the WAL's and the images' disk usage, the images by name.
    expect(fs.statSync(join(data, "wal")).ino).toBe(fs.statSync(join(data, "raft", "wal")).ino);
    const [walKib, snapshotsKib] = duKib("-D", join(data, "wal"), join(data, "snapshots"));
    expect(walKib).toBeGreaterThan(0);
    expect(walKib).toBe(duKib(join(data, "raft", "wal"))[0]);
    expect(snapshotsKib).toBe(duKib(join(data, "raft", "snapshots"))[0]);
    const images = fs.readdirSync(join(data, "snapshots")).filter((n) => /^[0-9a-f]{16}-[0-9a-f]{16}$/.test(n));
    expect(images.length).toBeGreaterThan(0);
    expect(images).toEqual(fs.readdirSync(join(data, "raft", "snapshots")).filter((n) => /^[0-9a-f]{16}-[0-9a-f]{16}$/.test(n)));

    // A full backup: the image once, no WAL, nothing under the other names.
    const etcDir = join(env.dir, "etc-svc");
    fs.mkdirSync(etcDir);
    fs.copyFileSync(node.configPath, join(etcDir, "config.toml"));
    const backups = join(env.dir, "backups");
    const made = await runBinary(["admin", "backup", "full", "--config", node.configPath, "--to", backups, "--etc-dir", etcDir, "--json"], { deadlineMs: 120_000 });
    expect(`${made.exitCode} ${made.stderr}`).toBe("0 ");
    const archive = (JSON.parse(made.stdout) as { archive: string }).archive;
    const listed: string[] = [];
    await tar.t({ file: archive, onReadEntry: (e) => listed.push(e.path) });
    expect(listed.length).toBe(new Set(listed).size);
    expect(listed.filter((p) => /(^|\/)wal(\/|$)/.test(p) || p.startsWith("snapshots"))).toEqual([]);
    expect(listed.filter((p) => p.endsWith("state.db"))).toHaveLength(1);

    // Offline, the links in place: every file checks, each once.
    expect(await node.stop()).toBe(0);
    const checked = await runBinary(["admin", "verify-checksums", "--data-dir", data, "--json"]);
    expect(checked.exitCode).toBe(0);
    const targets = (JSON.parse(checked.stdout) as { findings: { target: string }[] }).findings.map((f) => f.target);
    expect(targets.filter((t) => t.startsWith(join(data, "wal")) || t.startsWith(join(data, "snapshots")))).toEqual([]);
  }, 120_000);

  procTest("a wal directory an operator left in the data directory is kept as it is; the node says so and starts", async (env) => {
    const node = env.node(await singleNodeConfig(env.dir));
    const data = node.dataDir;
    fs.mkdirSync(join(data, "wal"), { recursive: true });
    fs.writeFileSync(join(data, "wal", "operator-notes.txt"), "kept");
    await node.start();
    await writeRows(node, 5);
    expect(fs.lstatSync(join(data, "wal")).isDirectory()).toBe(true);
    expect(fs.readdirSync(join(data, "wal"))).toEqual(["operator-notes.txt"]);
    expect(fs.readFileSync(join(data, "wal", "operator-notes.txt"), "utf8")).toBe("kept");
    expect(node.log()).toMatch(/WARN .* \S+\/wal is a directory, not a link to raft\/wal: left as it is/);
    expect(fs.readlinkSync(join(data, "snapshots"))).toBe("raft/snapshots");
    // The node's own WAL is where it always is.
    expect(fs.readdirSync(join(data, "raft", "wal")).some((n) => n.endsWith(".wal"))).toBe(true);
  }, 60_000);
});
