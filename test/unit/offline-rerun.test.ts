// What a stopped node's data directory holds after damage or an interrupted tool, and what
// running an offline tool again does: raft/checkpoint is checked (CRC, and against what the rest
// of raft/ holds) before the store is touched; init-cluster --bootstrap run twice gives one
// cluster; init-cluster takes --data-dir; a killed wal-replay's directory is removed later.

import { afterEach, beforeEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { parseConfig, renderConfigToml, type Config } from "../../src/config/index.ts";
import { loadState } from "../../src/node/index.ts";
import { dataPaths, inspectCheckpoint, readHardState, writeCheckpoint } from "../../src/storage/index.ts";
import { silentLogger, type SvcError } from "../../src/util/index.ts";
import { runSource, type Ran } from "../lib/source-cli.ts";

setDefaultTimeout(60_000);

let dir: string;

function svc(args: string[]): Ran {
  return runSource(args, dir);
}

function configText(dataDir: string): string {
  return renderConfigToml({
    nodeId: "node1",
    dataDir,
    listen: { client: "127.0.0.1:17878", admin: "127.0.0.1:19090", peer: "127.0.0.1:17879" },
    cluster: { bootstrap: true, members: [{ id: "node1", peer: "127.0.0.1:17879", client: "127.0.0.1:17878", admin: "127.0.0.1:19090" }] },
  });
}

function configFile(dataDir: string): string {
  const path = join(dir, `config-${fs.readdirSync(dir).length}.toml`);
  fs.writeFileSync(path, configText(dataDir));
  return path;
}

function configOf(dataDir: string): Config {
  const r = parseConfig(configText(dataDir), "test.toml");
  if (!r.ok) throw new Error(JSON.stringify(r.problems));
  return r.config;
}

/** Every file under `root` with a digest of its bytes: what a refused start must leave as it was. */
function snapshotOf(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string): void => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name !== "LOCK") out[relative(root, p)] = createHash("sha256").update(fs.readFileSync(p)).digest("hex");
    }
  };
  walk(root);
  return out;
}

function initialized(): string {
  const dataDir = join(dir, "data");
  const r = svc(["admin", "init-cluster", "--config", configFile(dataDir)]);
  expect(r.stderr).not.toContain("svc:");
  expect(r.code).toBe(0);
  return dataDir;
}

function clusterIdOf(r: Ran): string {
  const id = /cluster_id:\s*(\S+)/.exec(r.stdout)?.[1];
  if (id === undefined) throw new Error(`no cluster_id in ${r.stdout} ${r.stderr}`);
  return id;
}

/** A pid no process has now: one that ran and ended. */
function deadPid(): number {
  const p = Bun.spawnSync(["true"]);
  return p.pid;
}

beforeEach(() => {
  dir = fs.mkdtempSync(join(tmpdir(), "svc-offline-rerun-"));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

describe("raft/checkpoint", () => {
  test("is written with a CRC that a changed digit fails, and one written before the CRC is still read", () => {
    const raftDir = join(dir, "raft");
    fs.mkdirSync(raftDir);
    writeCheckpoint(raftDir, { index: 45942, term: 3, clusterId: "c1" });
    expect(inspectCheckpoint(raftDir)).toEqual({ kind: "ok", checkpoint: { index: 45942, term: 3, clusterId: "c1" }, checksummed: true });
    const path = join(raftDir, "checkpoint");
    fs.writeFileSync(path, fs.readFileSync(path, "utf8").replace('"index":45942', '"index":945942'));
    expect(inspectCheckpoint(raftDir).kind).toBe("damaged");
    fs.writeFileSync(path, '{"index":45942,"term":3,"clusterId":"c1"}\n');
    expect(inspectCheckpoint(raftDir)).toEqual({ kind: "ok", checkpoint: { index: 45942, term: 3, clusterId: "c1" }, checksummed: false });
  });

  test("a start with a checkpoint past all raft/ holds refuses on a lone node, names the file, and changes nothing", async () => {
    const dataDir = initialized();
    const paths = dataPaths(dataDir);
    const clusterId = readHardState(paths.hardStatePath)?.clusterId ?? "";
    // As a checkpoint written before the CRC was added, with a digit changed.
    fs.writeFileSync(join(paths.raftDir, "checkpoint"), `${JSON.stringify({ index: 945942, term: 1, clusterId })}\n`);
    const before = snapshotOf(dataDir);
    const error = await loadState(paths, configOf(dataDir), silentLogger).then(() => null, (e: unknown) => e as Error);
    expect(error?.message).toContain(`${join(paths.raftDir, "checkpoint")} says the store was durable up to entry 945942`);
    expect(error?.message).toContain("Nothing was changed");
    expect(snapshotOf(dataDir)).toEqual(before);
    const verify = svc(["admin", "verify-checksums", "--data-dir", dataDir]);
    expect(verify.code).toBe(1);
    expect(verify.stdout).toMatch(/BAD .*raft\/checkpoint: no crc .* its index 945942 lies past all raft\/ holds/);
  });

  test("a checkpoint whose CRC fails is ignored at start with a warning, and verify-checksums reports it", async () => {
    const dataDir = initialized();
    const paths = dataPaths(dataDir);
    const path = join(paths.raftDir, "checkpoint");
    writeCheckpoint(paths.raftDir, { index: 1, term: 1, clusterId: readHardState(paths.hardStatePath)?.clusterId ?? "" });
    fs.writeFileSync(path, fs.readFileSync(path, "utf8").replace(/"index":\d+/, '"index":945942'));
    const verify = svc(["admin", "verify-checksums", "--data-dir", dataDir]);
    expect(verify.code).toBe(1);
    expect(verify.stdout).toContain("raft/checkpoint: damaged: its CRC does not match its contents");
    const warnings: string[] = [];
    const logger = { ...silentLogger, warn: (m: string, f?: Record<string, unknown>) => warnings.push(`${m} ${JSON.stringify(f)}`), child: () => logger };
    const state = await loadState(paths, configOf(dataDir), logger);
    state.wal.close();
    state.store.close();
    expect(warnings.some((w) => w.includes("raft/checkpoint is damaged and is ignored") && w.includes(path))).toBe(true);
  });
});

describe("init-cluster", () => {
  test("--bootstrap run again on the data directory it initialized gives the same cluster id", () => {
    const dataDir = initialized();
    const config = configFile(dataDir);
    const first = svc(["admin", "init-cluster", "--bootstrap", "--force", "--config", config]);
    expect(first.code).toBe(0);
    const id = clusterIdOf(first);
    const again = svc(["admin", "init-cluster", "--bootstrap", "--config", config]);
    expect(again.stderr).not.toContain("svc:");
    expect(again.code).toBe(0);
    expect(clusterIdOf(again)).toBe(id);
    expect(clusterIdOf(svc(["admin", "init-cluster", "--bootstrap", "--force", "--config", config]))).toBe(id);
    expect(svc(["admin", "verify-checksums", "--data-dir", dataDir]).code).toBe(0);
  });

  test("--bootstrap on a data directory that holds no restored data is refused: a forgotten extraction does not become an empty cluster", () => {
    const empty = join(dir, "not-extracted");
    const r = svc(["admin", "init-cluster", "--bootstrap", "--config", configFile(empty)]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("holds no restored data");
    expect(r.stderr).toContain(`tar xzf svc-backup-….tar.gz -C ${empty} raft store`);
    // Nothing left open: a store mark left behind would make the archive extracted next look crashed.
    expect(fs.existsSync(join(empty, "store", "state.db-boot"))).toBe(false);
    // No cluster was made: the same directory then takes the archive, or init-cluster without --bootstrap.
    expect(svc(["admin", "init-cluster", "--config", configFile(empty)]).code).toBe(0);
  });

  test("takes --data-dir in place of the configuration's data_dir", () => {
    const elsewhere = join(dir, "configured");
    const given = join(dir, "given");
    const r = svc(["admin", "init-cluster", "--config", configFile(elsewhere), "--data-dir", given]);
    expect(r.stderr).not.toContain("svc:");
    expect(r.code).toBe(0);
    expect(fs.existsSync(join(given, "raft", "hardstate"))).toBe(true);
    expect(fs.existsSync(elsewhere)).toBe(false);
  });
});

describe("a process killed between an atomic write and its rename", () => {
  test("leaves <file>.tmp-<pid>, which the next start removes; the file it was to replace is intact", async () => {
    const dataDir = initialized();
    const hardState = fs.readFileSync(join(dataDir, "raft", "hardstate"));
    const leftovers = [join(dataDir, "raft", `hardstate.tmp-${deadPid()}`), join(dataDir, `MEMBER.tmp-${deadPid()}`)];
    for (const path of leftovers) fs.writeFileSync(path, "half");
    const ours = join(dataDir, "raft", `checkpoint.tmp-${process.pid}`); // a live process's: kept
    fs.writeFileSync(ours, "mine");
    const state = await loadState(dataPaths(dataDir), configOf(dataDir), silentLogger);
    state.wal.close();
    state.store.close();
    for (const path of leftovers) expect(fs.existsSync(path)).toBe(false);
    expect(fs.existsSync(ours)).toBe(true);
    expect(fs.readFileSync(join(dataDir, "raft", "hardstate"))).toEqual(hardState);
  });
});

describe("a wal-replay killed before it finished", () => {
  test("leaves raft/wal.replay-<pid>/, which the next start removes", async () => {
    const dataDir = initialized();
    const leftover = join(dataDir, "raft", `wal.replay-${deadPid()}`);
    fs.mkdirSync(leftover);
    fs.writeFileSync(join(leftover, "00000000000000000001.wal"), new Uint8Array(4096));
    const ours = join(dataDir, "raft", `wal.replay-${process.pid}`); // a live process's: kept
    fs.mkdirSync(ours);
    const warnings: string[] = [];
    const logger = { ...silentLogger, warn: (m: string) => warnings.push(m), child: () => logger };
    const state = await loadState(dataPaths(dataDir), configOf(dataDir), logger);
    state.wal.close();
    state.store.close();
    expect(fs.existsSync(leftover)).toBe(false);
    expect(fs.existsSync(ours)).toBe(true);
    expect(warnings.filter((w) => w.includes("wal-replay"))).toHaveLength(1);
  });

  test("leaves raft/wal.replay-<pid>/, which the next wal-replay removes and names", () => {
    const dataDir = initialized();
    const leftover = join(dataDir, "raft", `wal.replay-${deadPid()}`);
    fs.mkdirSync(leftover);
    const archive = join(dir, "archive");
    fs.mkdirSync(archive);
    // Refused (this raft/ holds more than a snapshot), after the lock: the leftover is gone all the same.
    const r = svc(["admin", "wal-replay", "--wal-dir", archive, "--until", "2030-01-01T00:00:00Z", "--data-dir", dataDir, "--json"]);
    expect(r.code).not.toBe(0);
    expect(fs.existsSync(leftover)).toBe(false);
  });
});

describe("a lone node whose store is damaged and is all there is (no snapshot, no WAL)", () => {
  test("refuses to start, and refuses again at the next start (the store set aside), rather than start empty", async () => {
    const dataDir = join(dir, "lone");
    fs.mkdirSync(join(dataDir, "store"), { recursive: true });
    fs.writeFileSync(join(dataDir, "store", "state.db"), Buffer.alloc(8192, 0x5a));
    for (const attempt of [1, 2]) {
      const error = await loadState(dataPaths(dataDir), configOf(dataDir), silentLogger).then(() => null, (e: unknown) => e as SvcError);
      expect({ attempt, code: error?.code }).toEqual({ attempt, code: "STORE_UNRECOVERABLE" });
      expect(error?.message).toContain("the only copy of the data");
    }
    expect(fs.readdirSync(dataDir).filter((n) => n.startsWith("store.damaged-"))).toHaveLength(1);
    expect(fs.existsSync(join(dataDir, "store", "state.db"))).toBe(false);
  });
});
