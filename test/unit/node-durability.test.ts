// The node acknowledges a write only after the fdatasync that covers its WAL record, and a
// failed sync acknowledges nothing.

import { afterEach, describe, expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseConfig, renderConfigToml, type Config } from "../../src/config/index.ts";
import { SvcNode } from "../../src/node/index.ts";
import { Wal, writeHardState } from "../../src/storage/index.ts";
import { Store } from "../../src/store/index.ts";
import type { Entry } from "../../src/raft/types.ts";
import { silentLogger, type Logger, type SvcError } from "../../src/util/index.ts";
import { freePort } from "../lib/proc-ports.ts";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** `absentPeers`: further members, at ports where nothing answers. */
async function testConfig(extra: { snapshotIntervalEntries?: number; absentPeers?: number } = {}): Promise<Config> {
  const { absentPeers = 0, ...rest } = extra;
  const dir = fs.mkdtempSync(join(tmpdir(), "svc-node-"));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  // Only the peer port is bound (by the node's transport); client and admin are not.
  const peer = `127.0.0.1:${await freePort()}`;
  const others = await Promise.all(Array.from({ length: absentPeers }, async (_, i) => {
    const port = await freePort();
    return { id: `n${i + 2}`, peer: `127.0.0.1:${port}`, client: `127.0.0.1:${port + 1}`, admin: `127.0.0.1:${port + 2}` };
  }));
  const text = renderConfigToml({
    nodeId: "n1",
    dataDir: join(dir, "data"),
    listen: { client: "127.0.0.1:1", admin: "127.0.0.1:2", peer },
    cluster: { bootstrap: true, members: [{ id: "n1", peer, client: "127.0.0.1:1", admin: "127.0.0.1:2" }, ...others] },
    wal: { segmentSizeBytes: 1024 * 1024 },
    ...rest,
  });
  const result = parseConfig(text, "test.toml");
  if (!result.ok) throw new Error(JSON.stringify(result.problems));
  return result.config;
}

async function startNode(config: Config, logger: Logger = silentLogger): Promise<SvcNode> {
  const node = await SvcNode.start(config, logger);
  cleanups.push(() => node.stop());
  const deadline = Date.now() + 10_000;
  while (node.recoveryState !== "healthy") {
    if (Date.now() > deadline) throw new Error(`node stuck in ${node.recoveryState}`);
    await Bun.sleep(5);
  }
  return node;
}

describe("node durability", () => {
  test("group commit never acknowledges a record before the sync that covers it", async () => {
    let appendedIndex = 0;
    let syncedIndex = 0;
    const realAppend = Wal.prototype.append;
    const realSync = Wal.prototype.syncAsync;
    const appendSpy = spyOn(Wal.prototype, "append").mockImplementation(function (this: Wal, entries: readonly Entry[]) {
      realAppend.call(this, entries);
      appendedIndex = Math.max(appendedIndex, entries.at(-1)?.index ?? 0);
    });
    const syncSpy = spyOn(Wal.prototype, "syncAsync").mockImplementation(async function (this: Wal) {
      const covered = appendedIndex;
      await realSync.call(this);
      syncedIndex = Math.max(syncedIndex, covered);
    });
    cleanups.push(() => { appendSpy.mockRestore(); syncSpy.mockRestore(); });

    const node = await startNode(await testConfig());
    await node.execute([{ sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)", params: [] }]);
    const violations: string[] = [];
    let acknowledged = 0;
    const client = async (c: number): Promise<void> => {
      for (let i = 0; i < 25; i++) {
        const outcome = await node.execute([{ sql: "INSERT INTO t (v) VALUES (?)", params: [`${c}-${i}`] }]);
        if (outcome.index > syncedIndex) violations.push(`index ${outcome.index} acknowledged with only ${syncedIndex} synced`);
        acknowledged++;
      }
    };
    await Promise.all(Array.from({ length: 40 }, (_, c) => client(c)));
    expect(violations).toEqual([]);
    expect(acknowledged).toBe(1000);
    // Writes were grouped: fewer syncs than writes.
    expect(syncSpy.mock.calls.length).toBeLessThan(1000);
    expect(node.stats().totalEntries).toBe(1000);
  });

  test("a failed WAL sync acknowledges nothing and stops the node from serving", async () => {
    const node = await startNode(await testConfig());
    await node.execute([{ sql: "CREATE TABLE t (v)", params: [] }]);
    const syncSpy = spyOn(Wal.prototype, "syncAsync").mockImplementation(() => Promise.reject(Object.assign(new Error("EIO: i/o error, fdatasync"), { code: "EIO" })));
    cleanups.push(() => syncSpy.mockRestore());
    let fatal: unknown = null;
    node.onFatal = (e) => { fatal = e; };
    const results = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => node.execute([{ sql: "INSERT INTO t VALUES (?)", params: [i] }])));
    expect(results.every((r) => r.status === "rejected")).toBe(true);
    expect(fatal).not.toBeNull();
    expect(node.fatal?.message).toContain("EIO");
    await expect(node.execute([{ sql: "INSERT INTO t VALUES (1)", params: [] }])).rejects.toThrow(/EIO/);
    syncSpy.mockRestore();
    expect(node.stats().totalEntries).toBe(0);
  });

  test("a restart replays the WAL into the store: acknowledged writes survive", async () => {
    const config = await testConfig();
    const first = await startNode(config);
    await first.execute([{ sql: "CREATE TABLE t (v)", params: [] }]);
    for (let i = 0; i < 20; i++) await first.execute([{ sql: "INSERT INTO t VALUES (?)", params: [i] }]);
    await first.stop();
    fs.rmSync(join(config.dataDir, "store"), { recursive: true, force: true });
    const second = await startNode(config);
    expect(second.stats().totalEntries).toBe(20);
    const r = await second.query("SELECT sum(v) FROM t", [], "linearizable");
    expect(r.rows).toEqual([[190]]);
  });

  test("a member restarted with nothing left to replay is past replaying_wal at once, its peers down", async () => {
    // Bootstrapped with two members that never start: the membership entry is applied, and a
    // restart finds its store holding all its log committed.
    const config = await testConfig({ absentPeers: 1 });
    const first = await SvcNode.start(config, silentLogger);
    const deadline = Date.now() + 10_000;
    while (first.status().appliedIndex < 1 || first.status().appliedIndex < first.status().commitIndex) {
      if (Date.now() > deadline) throw new Error("the bootstrap entries were never applied");
      await Bun.sleep(5);
    }
    await first.stop();
    const second = await SvcNode.start(config, silentLogger);
    cleanups.push(() => second.stop());
    expect(second.recoveryState).toBe("joining");
  });

  test("a node whose hard state was lost with its log intact (a crash during bootstrap) resumes in the log's term", async () => {
    const config = await testConfig();
    const first = await startNode(config);
    await first.execute([{ sql: "CREATE TABLE t (v)", params: [] }, { sql: "INSERT INTO t VALUES (1)", params: [] }]);
    await first.stop();
    fs.rmSync(join(config.dataDir, "raft", "hardstate"));
    const second = await startNode(config);
    expect(second.stats().totalEntries).toBe(1);
    await second.execute([{ sql: "INSERT INTO t VALUES (2)", params: [] }]);
    expect(second.stats().totalEntries).toBe(2);
  });

  test("a hard state behind the log it sits beside (copied from another cluster) is named as the file to fix, not as WAL damage", async () => {
    const config = await testConfig();
    const first = await startNode(config);
    await first.execute([{ sql: "CREATE TABLE t (v)", params: [] }]);
    const term = first.status().term;
    await first.stop();
    writeHardState(join(config.dataDir, "raft", "hardstate"), { term: term - 1, vote: null, commit: 0, clusterId: "another-cluster" });
    const refused = await startNode(config).then(() => null, (e: unknown) => e as Error);
    expect(refused?.message).toContain("hardstate is not this node's");
    expect(refused?.message).toContain("another-cluster");
    expect(refused?.message).not.toContain("wal-repair");
  });

  test("a lone node whose raft/ and store/ are gone but whose MEMBER says it belonged to a cluster refuses to start empty, until MEMBER goes too", async () => {
    const config = await testConfig();
    const first = await startNode(config);
    await first.execute([{ sql: "CREATE TABLE t (v)", params: [] }]);
    const clusterId = first.status().clusterId;
    await first.stop();
    for (const d of ["raft", "store"]) fs.rmSync(join(config.dataDir, d), { recursive: true, force: true });
    const refused = await startNode(config).then(() => null, (e: unknown) => e as Error & { code?: string });
    expect(refused?.code).toBe("DATA_GONE");
    expect(refused?.message).toContain(`this lone node belonged to cluster ${clusterId}`);
    // Asked for on purpose: a new, empty cluster.
    fs.rmSync(join(config.dataDir, "MEMBER"));
    const fresh = await startNode(config);
    expect(fresh.status().clusterId).not.toBe(clusterId);
    await fresh.stop();
  });

  test("a data directory on a file system the kernel makes up (proc) is refused at start as invalid, nothing made there", async () => {
    const config = await testConfig();
    // /proc only: every Linux host mounts proc there, while /sys may be another file system
    // (where a start would make the directory); config.test.ts covers the others, by their mounts.
    for (const dataDir of ["/proc/svc-data"]) {
      const refused = await SvcNode.start({ ...config, dataDir }, silentLogger).then((n) => {
        cleanups.push(() => n.stop());
        return null;
      }, (e: unknown) => e as SvcError);
      expect(refused?.code).toBe("DATA_DIR_INVALID");
      expect(refused?.message).toContain(dataDir);
      expect(fs.existsSync(dataDir)).toBe(false);
    }
  });

  test("a directory where svc keeps a file, or a WAL segment that is a link leading nowhere, is named at start instead of a bare EISDIR or ENOENT", async () => {
    const config = await testConfig();
    const first = await startNode(config);
    await first.execute([{ sql: "CREATE TABLE t (v)", params: [] }]);
    await first.stop();
    const hardstate = join(config.dataDir, "raft", "hardstate");
    fs.renameSync(hardstate, `${hardstate}.kept`);
    fs.mkdirSync(hardstate);
    const dangling = join(config.dataDir, "raft", "wal", "0000000000000009-0000000000009999.wal");
    fs.symlinkSync(join(config.dataDir, "nowhere"), dangling);
    const refused = await startNode(config).then(() => null, (e: unknown) => e as Error & { code?: string });
    expect(refused?.code).toBe("DATA_DIR_INVALID");
    expect(refused?.message).toContain(`${hardstate} (a directory where svc keeps a file)`);
    expect(refused?.message).toContain(`${dangling} (a link that leads nowhere)`);
    // Put right, it starts as before.
    fs.rmdirSync(hardstate);
    fs.renameSync(`${hardstate}.kept`, hardstate);
    fs.rmSync(dangling);
    const again = await startNode(config);
    await again.stop();
  });

  test("a hard state of another cluster, in a term no older than the log's, is refused as not this node's rather than adopted with its cluster id", async () => {
    const config = await testConfig();
    const first = await startNode(config);
    await first.execute([{ sql: "CREATE TABLE t (v)", params: [] }]);
    await first.takeSnapshot();
    const { term, clusterId } = first.status();
    await first.stop();
    writeHardState(join(config.dataDir, "raft", "hardstate"), { term, vote: null, commit: 0, clusterId: "another-cluster" });
    const refused = await startNode(config).then(() => null, (e: unknown) => e as Error & { code?: string });
    expect(refused?.code).toBe("RAFT_STATE_INVALID");
    expect(refused?.message).toContain(`it belongs to cluster another-cluster, while this node and its newest snapshot belong to ${clusterId}`);
    expect(fs.readFileSync(join(config.dataDir, "MEMBER"), "utf8")).toContain(clusterId);
  });

  test("an old copy of its own hard state is refused though the store applied everything (no entry after it to compare): its vote would be forgotten", async () => {
    const config = await testConfig();
    const first = await startNode(config);
    await first.execute([{ sql: "CREATE TABLE t (v)", params: [] }]);
    const { term, clusterId } = first.status();
    await first.stop();
    writeHardState(join(config.dataDir, "raft", "hardstate"), { term: term - 1, vote: null, commit: 0, clusterId });
    const refused = await startNode(config).then(() => null, (e: unknown) => e as Error);
    expect(refused?.message).toContain(`hardstate is not this node's: it says term ${term - 1}, but its WAL holds entries of term ${term}`);
  });

  test("a checkpoint every snapshot_interval entries makes the store durable there; the WAL is kept until an image covers it", async () => {
    const config = await testConfig({ snapshotIntervalEntries: 100 });
    const node = await startNode(config);
    await node.execute([{ sql: "CREATE TABLE t (v TEXT)", params: [] }]);
    const big = "x".repeat(4000);
    for (let i = 0; i < 600; i++) await node.execute([{ sql: "INSERT INTO t VALUES (?)", params: [big] }]);
    const deadline = Date.now() + 10_000;
    while (node.status().checkpointIndex < 500 && Date.now() < deadline) await Bun.sleep(10);
    const status = node.status();
    expect(status.checkpointIndex).toBeGreaterThanOrEqual(500);
    // A checkpoint still running when the next comes due is not doubled: the next one covers
    // both (on a loaded machine one may cover several intervals).
    expect(node.metrics.registry.render()).toMatch(/^tensor_chain_checkpoints_total [1-9]/m);
    // Checkpoints copy nothing: no image was made, and the WAL is whole back to entry 1.
    expect(node.stats().snapshots.count).toBe(0);
    expect(node.stats().wal.firstIndex).toBe(1);
    // The log in memory was dropped behind the checkpoint; the WAL still holds it.
    expect(status.memoryLogStartIndex).toBeGreaterThanOrEqual(500);
    await node.stop();
    // What the restart says of its store, should it not start from it (seen once on a loaded host).
    const said: string[] = [];
    const note = (level: string) => (message: string, fields?: Record<string, unknown>): void => void said.push(`${level} ${message} ${JSON.stringify(fields ?? {})}`);
    const startLog: Logger = { error: note("ERROR"), warn: note("WARN"), info: note("INFO"), debug() {}, trace() {}, enabled: (l) => l !== "debug" && l !== "trace", child: () => startLog };
    const again = await startNode(config, startLog);
    expect(again.stats().totalEntries).toBe(600);
    // A restart reads into memory only what lies after the store's applied index (the leader's
    // first entry of its new term came after).
    const memoryLogStartIndex = again.status().memoryLogStartIndex;
    if (memoryLogStartIndex < 601) throw new Error(`the restart's log in memory starts at ${memoryLogStartIndex}; its start said:\n${said.filter((l) => /recovery|store|checkpoint|WAL/i.test(l)).join("\n")}`);
    // An image (POST /admin/snapshot) is what lets the WAL go.
    const image = await again.takeSnapshot();
    expect(image.index).toBe(again.status().appliedIndex);
    expect(again.stats().wal.firstIndex).toBeGreaterThan(1);
  });

  test("a start that lacks entries because the one image holding them is damaged says so, naming the image and why", async () => {
    const config = await testConfig();
    const node = await startNode(config);
    await node.execute([{ sql: "CREATE TABLE t (v TEXT)", params: [] }]);
    const big = "x".repeat(4000);
    for (let i = 0; i < 600; i++) await node.execute([{ sql: "INSERT INTO t VALUES (?)", params: [big] }]);
    const image = await node.takeSnapshot();
    expect(node.stats().wal.firstIndex).toBeGreaterThan(1);
    await node.stop();
    // Its meta.json edited (or a bit of it flipped), and the store gone: nothing holds the
    // entries before the WAL's first. It used to say only that they were missing.
    const metaPath = join(image.dir, "meta.json");
    fs.writeFileSync(metaPath, fs.readFileSync(metaPath, "utf8").replace(`"index": ${image.index}`, `"index": ${image.index + 1}`));
    fs.rmSync(join(config.dataDir, "store"), { recursive: true, force: true });
    const refused = await startNode(config).then(() => null, (e: unknown) => e as SvcError);
    expect(refused?.code).toBe("LOG_GAP");
    expect(refused?.message).toContain(`a snapshot that may have held them could not be used: ${image.dir}: meta.json does not match its own checksum`);
  });

  test("a store that raft/ does not vouch for is rebuilt from the snapshot and the WAL, never trusted", async () => {
    const config = await testConfig();
    const node = await startNode(config);
    await node.execute([{ sql: "CREATE TABLE t (v TEXT)", params: [] }]);
    await node.execute([{ sql: "INSERT INTO t VALUES ('kept')", params: [] }]);
    await node.takeSnapshot();
    await node.execute([{ sql: "INSERT INTO t VALUES ('after the snapshot')", params: [] }]);
    await node.stop();
    // SPEC §4.5: raft/ is cleared and the snapshot copied back in; store/ is left as it was.
    const raft = join(config.dataDir, "raft");
    for (const name of fs.readdirSync(raft)) if (name !== "snapshots") fs.rmSync(join(raft, name), { recursive: true, force: true });
    const again = await startNode(config);
    const rows = await again.query("SELECT v FROM t ORDER BY rowid", [], "stale");
    expect(rows.rows).toEqual([["kept"]]);
  });
});

describe("a restart costs what changed, not the store's size", () => {
  test("a clean restart neither hashes the newest image nor checks the whole store; a damaged image is reported once serving, and a rebuild takes an older one that checks", async () => {
    const config = await testConfig();
    const node = await startNode(config);
    await node.execute([{ sql: "CREATE TABLE t (v TEXT)", params: [] }]);
    await node.execute([{ sql: "INSERT INTO t VALUES ('in the first image')", params: [] }]);
    await node.takeSnapshot();
    await node.execute([{ sql: "INSERT INTO t VALUES ('in the second image')", params: [] }]);
    const second = await node.takeSnapshot();
    await node.execute([{ sql: "INSERT INTO t VALUES ('after both')", params: [] }]);
    await node.stop();
    // The newest image goes bad on disk (its size kept, a byte changed).
    const snapshotsDir = join(config.dataDir, "raft", "snapshots");
    const newest = fs.readdirSync(snapshotsDir).sort().at(-1) ?? "";
    expect(newest).toContain(second.index.toString(16));
    const imagePath = join(snapshotsDir, newest, "state.db");
    const fd = fs.openSync(imagePath, "r+");
    fs.writeSync(fd, new Uint8Array([0x5a]), 0, 1, 200);
    fs.closeSync(fd);
    const hashed = spyOn(Bun.CryptoHasher.prototype, "update");
    const integrity = spyOn(Store.prototype, "integrityProblems");
    const logged: string[] = [];
    const logger = { ...silentLogger, error: (m: string) => void logged.push(m), child: () => logger };
    // As for a store past the size that is quick_checked at every start (64 MiB).
    process.env["SVC_TEST_STORE_START_CHECK_BYTES_MAX"] = "0";
    const again = await SvcNode.start(config, logger).finally(() => delete process.env["SVC_TEST_STORE_START_CHECK_BYTES_MAX"]);
    cleanups.push(() => again.stop());
    // Started without reading the image (no hashing before it serves) or quick_check of the store.
    const hashedAtStart = hashed.mock.calls.length;
    const checkedAtStart = integrity.mock.calls.length;
    hashed.mockRestore();
    integrity.mockRestore();
    expect(checkedAtStart).toBe(0);
    expect(hashedAtStart).toBe(0);
    const rows = await again.query("SELECT count(*) FROM t", [], "linearizable");
    expect(rows.rows).toEqual([[3]]);
    // The background check finds the damage.
    const deadline = Date.now() + 10_000;
    while (!logged.includes("the newest snapshot image is damaged") && Date.now() < deadline) await Bun.sleep(10);
    expect(logged).toContain("the newest snapshot image is damaged");
    await again.stop();
    // A rebuild hashes the images and takes the older one that checks; the WAL gives the rest.
    fs.rmSync(join(config.dataDir, "store"), { recursive: true, force: true });
    const rebuilt = await startNode(config);
    const all = await rebuilt.query("SELECT v FROM t ORDER BY rowid", [], "linearizable");
    expect(all.rows).toEqual([["in the first image"], ["in the second image"], ["after both"]]);
  });
});

describe("node metrics", () => {
  test("a running node's /metrics text passes promtool check metrics", async () => {
    const promtool = Bun.which("promtool");
    const node = await startNode(await testConfig());
    await node.execute([{ sql: "CREATE TABLE t (v)", params: [] }]);
    await node.takeSnapshot();
    const text = node.metrics.registry.render();
    for (const name of ["tensor_chain_commit_index", "tensor_chain_applied_index", "tensor_chain_snapshot_index", "tensor_chain_write_latency_seconds_count", "tensor_chain_memory_rss_bytes"]) {
      expect(text).toMatch(new RegExp(`^${name} [0-9.e+]+$`, "m"));
    }
    if (promtool === null) {
      console.warn("promtool is not installed (Debian package prometheus): only the names were checked");
      return;
    }
    const check = Bun.spawnSync([promtool, "check", "metrics"], { stdin: new TextEncoder().encode(text) });
    expect(check.stderr.toString() + check.stdout.toString()).toBe("");
    expect(check.exitCode).toBe(0);
  });
});

describe("a lone node's store with raft/ removed", () => {
  test("is kept only when its own membership is this node alone: grown into a cluster at run time, it is rebuilt from the others", async () => {
    const { loadState, prepareDataDir } = await import("../../src/node/index.ts");
    for (const [voters, kept] of [[["n1"], true], [["n1", "n2", "n3"], false]] as const) {
      const config = await testConfig();
      const paths = prepareDataDir(config.dataDir);
      const store = Store.open(paths.storePath);
      store.apply([{ term: 1, index: 1, kind: "normal", timestampMs: 0, data: new TextEncoder().encode(JSON.stringify({ op: "execute", statements: [{ sql: "CREATE TABLE t (v)", params: [] }] })) }]);
      store.setMembership({ voters: [...voters], learners: [] });
      store.close();
      // raft/ holds nothing: removed whole, as SPEC §7's full rebuild says.
      const state = await loadState(paths, config, silentLogger);
      expect({ voters, applied: state.store.meta.appliedIndex }).toEqual({ voters, applied: kept ? 1 : 0 });
      state.store.close();
      state.wal.close();
    }
  });
});
