// What the compiled binary does when it cannot or must not start: a clear message on stderr,
// a non-zero exit code, and the data directory left as it was. Also the root flags
// (--version, --validate) and the svc-admin name.

import * as fs from "node:fs";
import * as net from "node:net";
import { join } from "node:path";
import { describe, expect } from "bun:test";
import { renderConfigToml, type ConfigDraft } from "../../src/config/index.ts";
import pkg from "../../package.json" with { type: "json" };
import { makeCa, makeLeaf } from "../lib/certs.ts";
import {
  ensureBinary, execute, getJson, kvSchema, procTest, query, request, runBinary, singleNodeConfig, useCompiledBinary, useProcessCleanup,
  type ProcEnv,
} from "../lib/proc.ts";

useProcessCleanup();
useCompiledBinary();

function writeConfig(env: ProcEnv, config: ConfigDraft, name = `${config.nodeId}.toml`): string {
  const path = join(env.dir, name);
  fs.writeFileSync(path, renderConfigToml(config));
  return path;
}

function portOf(address: string | { raw: string } | undefined): number {
  const text = typeof address === "string" ? address : address?.raw ?? "";
  return Number(text.slice(text.lastIndexOf(":") + 1));
}

/** A listening TCP socket on 127.0.0.1:port, held until closed. */
async function holdPort(port: number): Promise<net.Server> {
  const server = net.createServer((socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host: "127.0.0.1", port, exclusive: true }, resolve);
  });
  return server;
}

function dataDirOf(config: ConfigDraft): string {
  if (config.dataDir === undefined) throw new Error("the test config has a data_dir");
  return config.dataDir;
}

describe("svc serve refuses to start, and says why", () => {

  for (const role of ["client", "admin"] as const) {
    procTest(`${role === "admin" ? "an" : "a"} ${role} port already in use stops serve with exit 1, names the address, and touches no data`, async (env) => {
      const config = await singleNodeConfig(env.dir);
      const port = portOf(config.listen?.[role]);
      const holder = await holdPort(port);
      try {
        const r = await runBinary(["serve", "--config", writeConfig(env, config)], { cwd: env.dir });
        expect(r.exitCode).toBe(1);
        expect(r.stderr).toContain(`127.0.0.1:${port}`);
        expect(r.stderr).toContain(`${role} port`);
        expect(r.stderr).toContain("already in use");
        // The ports are bound before the data directory is looked at.
        expect(fs.existsSync(dataDirOf(config))).toBe(false);
      } finally {
        holder.close();
      }
    });
  }

  procTest("the peer port's number held over UDP (gossip) stops serve with exit 1, naming it, rather than serve without gossip", async (env) => {
    const config = await singleNodeConfig(env.dir);
    const port = portOf(config.listen?.peer);
    const holder = await Bun.udpSocket({ hostname: "127.0.0.1", port });
    try {
      const r = await runBinary(["serve", "--config", writeConfig(env, config)], { cwd: env.dir, deadlineMs: 30_000 });
      expect(r.exitCode).toBe(1);
      expect(r.stderr).toContain(`cannot listen for gossip on UDP 127.0.0.1:${port} (the peer port's number): the address is already in use`);
      expect(r.stderr).toContain(`ss -ulpn 'sport = :${port}'`);
    } finally {
      holder.close();
    }
  });

  procTest("a peer port already in use stops serve with exit 1, names the address, and writes no Raft or store data", async (env) => {
    const config = await singleNodeConfig(env.dir);
    const port = portOf(config.listen?.peer);
    const holder = await holdPort(port);
    try {
      const r = await runBinary(["serve", "--config", writeConfig(env, config)], { cwd: env.dir });
      expect(r.exitCode).toBe(1);
      // Said in the words the client and admin ports use (it was Bun's bare "Failed to listen").
      expect(r.stderr).toContain(`cannot listen on 127.0.0.1:${port} (peer port): the address is already in use`);
      expect(r.stderr).toContain(`ss -tlpn 'sport = :${port}'`);
      // The peer port is bound once the data directory is locked, but before anything is
      // read or written in it: no WAL segment, no hard state, no store.
      const written = fs.existsSync(dataDirOf(config))
        ? fs.readdirSync(dataDirOf(config), { recursive: true }).map(String).filter((p) => /\.wal$|hardstate$|state\.db/.test(p))
        : [];
      expect(written).toEqual([]);
    } finally {
      holder.close();
    }
  });

  procTest("a port below 1024 that the service user may not bind stops serve with exit 3 (a restart binds it no better), naming the user and CAP_NET_BIND_SERVICE", async (env) => {
    const unprivilegedFrom = Number(fs.readFileSync("/proc/sys/net/ipv4/ip_unprivileged_port_start", "utf8"));
    if (!(unprivilegedFrom > 1)) return; // this host lets anyone bind any port
    fs.chmodSync(env.dir, 0o755);
    const privileged = `127.0.0.1:${unprivilegedFrom - 1}`;
    const nobodyUid = Bun.spawnSync(["id", "-u", "nobody"]).stdout.toString().trim();
    for (const role of ["client", "admin", "peer"] as const) {
      const config = await singleNodeConfig(env.dir);
      // The peer port is bound once the data directory is locked: it must be the user's.
      fs.mkdirSync(dataDirOf(config), { recursive: true });
      fs.chownSync(dataDirOf(config), Number(nobodyUid), Number(Bun.spawnSync(["id", "-g", "nobody"]).stdout.toString().trim()));
      const self = { ...config.cluster!.members![0]!, [role]: privileged };
      const path = writeConfig(env, { ...config, listen: { ...config.listen, [role]: privileged }, cluster: { ...config.cluster, members: [self] } }, `${role}.toml`);
      fs.chmodSync(path, 0o644);
      const r = await runBinary(["serve", "--config", path], { cwd: env.dir, runAs: { user: "nobody", group: "nogroup" } });
      expect({ role, exit: r.exitCode }).toEqual({ role, exit: 3 });
      expect(r.stderr).toContain(`cannot listen on ${privileged} (${role} port): this user (nobody, uid ${nobodyUid}) may not bind port ${unprivilegedFrom - 1}`);
      expect(r.stderr).toContain("CAP_NET_BIND_SERVICE");
      expect(r.stderr).toContain(`set listen.${role} to a port from 1024 up`);
    }
  });

  procTest("a file or directory below the data directory the service user cannot use stops serve at start with exit 3, named with the chown that fixes it", async (env) => {
    fs.chmodSync(env.dir, 0o755);
    const config = await singleNodeConfig(env.dir);
    const dataDir = dataDirOf(config);
    const nobody = Number(Bun.spawnSync(["id", "-u", "nobody"]).stdout.toString().trim());
    const nogroup = Number(Bun.spawnSync(["id", "-g", "nobody"]).stdout.toString().trim());
    for (const d of ["", "raft", "raft/wal", "raft/snapshots", "store"]) {
      fs.mkdirSync(join(dataDir, d), { recursive: true, mode: 0o750 });
      fs.chownSync(join(dataDir, d), nobody, nogroup);
    }
    const path = writeConfig(env, config);
    fs.chmodSync(path, 0o644);
    // What is not svc's stays out of it: a data directory that is a mount point has root's lost+found.
    fs.mkdirSync(join(dataDir, "lost+found"), { mode: 0o700 });
    // A WAL directory left to root: the node used to start, serve, and stop hours later when a
    // new segment was due, with a hint about the disk.
    fs.chownSync(join(dataDir, "raft", "wal"), 0, 0);
    const wal = await runBinary(["serve", "--config", path], { cwd: env.dir, runAs: { user: "nobody", group: "nogroup" } });
    // Exit 3: starting it again unchanged cannot help (the unit does not restart it).
    expect(wal.exitCode).toBe(3);
    expect(wal.stderr).toContain(`${join(dataDir, "raft", "wal")} (owner uid 0, mode 0750)`);
    // The user and group it runs as, not the svc:svc install.sh makes (this one runs as nobody).
    expect(wal.stderr).toContain(`chown -R nobody:nogroup ${dataDir}`);
    // A file no one may read (a chmod 000): named, not a bare EACCES from deep in the start.
    fs.chownSync(join(dataDir, "raft", "wal"), nobody, nogroup);
    fs.writeFileSync(join(dataDir, "raft", "hardstate"), "x", { mode: 0o000 });
    fs.chownSync(join(dataDir, "raft", "hardstate"), nobody, nogroup);
    const file = await runBinary(["serve", "--config", path], { cwd: env.dir, runAs: { user: "nobody", group: "nogroup" } });
    expect(file.exitCode).toBe(3);
    expect(file.stderr).toContain(`${join(dataDir, "raft", "hardstate")} (owner uid ${nobody}, mode 0000)`);
    expect(file.stderr).toContain("chmod -R u+rwX");
    // Fixed, it serves, root's lost+found beside its files notwithstanding (the server runs until stopped).
    fs.rmSync(join(dataDir, "raft", "hardstate"));
    const ran = await runBinary(["serve", "--config", path], { cwd: env.dir, runAs: { user: "nobody", group: "nogroup" }, deadlineMs: 10_000 })
      .then((r) => `exited ${r.exitCode}: ${r.stderr}`, (e: Error) => e.message);
    expect(ran).toContain("serving");
    expect(ran).not.toContain("cannot read and write");
  });

  procTest("a data directory the service user cannot write stops serve with exit 3, naming its owner and the chown that fixes it", async (env) => {
    // Root writes anywhere, so the node runs as nobody against a root-owned 0700 directory;
    // the test dir itself must be traversable and the config readable for nobody.
    fs.chmodSync(env.dir, 0o755);
    const config = await singleNodeConfig(env.dir);
    const dataDir = dataDirOf(config);
    fs.mkdirSync(dataDir, { mode: 0o700 });
    fs.chmodSync(dataDir, 0o700);
    const path = writeConfig(env, config);
    fs.chmodSync(path, 0o644);
    const r = await runBinary(["serve", "--config", path], { cwd: env.dir, runAs: { user: "nobody", group: "nogroup" } });
    expect(r.exitCode).toBe(3);
    expect(r.stderr).toContain(dataDir);
    // Who owns it, who svc runs as, and the chown that fixes it (the wording is svc's own).
    expect(r.stderr).toMatch(/uid 0\b/);
    expect(r.stderr).toContain(Bun.spawnSync(["id", "-u", "nobody"]).stdout.toString().trim());
    expect(r.stderr).toContain(`chown -R`);
    expect(r.stderr).toMatch(new RegExp(`chown -R \\S+ ${dataDir.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`));
    expect(fs.readdirSync(dataDir)).toEqual([]);
  });

  procTest("TLS files that do not go together, or a peer certificate the members would refuse: --validate and serve say so alike", async (env) => {
    const config = await singleNodeConfig(env.dir);
    const ca = makeCa(env.dir, "ca");
    const node1 = makeLeaf(env.dir, "node1", ca);
    const other = makeLeaf(env.dir, "other", ca);
    const foreign = makeLeaf(env.dir, "foreign", makeCa(env.dir, "foreign-ca"), { san: "URI:svc://node1" });
    const cases = [
      { name: "a key that is not the certificate's", tls: { certFile: node1.cert, keyFile: other.key, clientCaFile: "", caFile: "", peerCaFile: "" }, says: "cannot be used together" },
      { name: "a peer certificate naming another node", tls: { certFile: other.cert, keyFile: other.key, clientCaFile: "", caFile: "", peerCaFile: ca.cert }, says: "not this node (node1)" },
      { name: "a peer certificate from another CA", tls: { certFile: foreign.cert, keyFile: foreign.key, clientCaFile: "", caFile: "", peerCaFile: ca.cert }, says: "was not issued by a CA in" },
    ];
    for (const c of cases) {
      const path = writeConfig(env, { ...config, tls: c.tls });
      const validated = await runBinary(["--config", path, "--validate"], { cwd: env.dir });
      expect({ case: c.name, exit: validated.exitCode, says: validated.stderr.includes(c.says) }).toEqual({ case: c.name, exit: 2, says: true });
      const served = await runBinary(["serve", "--config", path], { cwd: env.dir });
      expect({ case: c.name, exit: served.exitCode, says: served.stderr.includes(c.says) }).toEqual({ case: c.name, exit: 1, says: true });
    }
    const good = writeConfig(env, { ...config, tls: { certFile: node1.cert, keyFile: node1.key, clientCaFile: "", caFile: "", peerCaFile: ca.cert } });
    expect((await runBinary(["--config", good, "--validate"], { cwd: env.dir })).exitCode).toBe(0);
  });

  procTest("a tokens file the service user cannot read: --validate and serve say so; token create gives a new file to the data directory's owner", async (env) => {
    fs.chmodSync(env.dir, 0o755);
    const config = await singleNodeConfig(env.dir);
    const dataDir = dataDirOf(config);
    const tokensFile = join(env.dir, "tokens");
    const path = writeConfig(env, { ...config, auth: { tokensFile, tokenFile: "", metricsOpen: false } });
    fs.chmodSync(path, 0o644);
    // Missing: refused by --validate as serve would refuse it.
    const missing = await runBinary(["--config", path, "--validate"], { cwd: env.dir });
    expect(missing.exitCode).toBe(2);
    expect(missing.stderr).toContain("tokens_file");
    // Made by root with no data directory yet: owned by root, with a warning naming the fix.
    const made = await runBinary(["admin", "token", "create", "--role", "admin", "--config", path], { cwd: env.dir });
    expect(made.exitCode).toBe(0);
    expect(made.stderr).toContain("created owned by root");
    expect((await runBinary(["--config", path, "--validate"], { cwd: env.dir })).exitCode).toBe(0);
    // The node, run as another user, refuses it with the owner and the chown.
    fs.mkdirSync(dataDir, { mode: 0o700 });
    const nobody = Number(Bun.spawnSync(["id", "-u", "nobody"]).stdout.toString().trim());
    const nogroup = Number(Bun.spawnSync(["id", "-g", "nobody"]).stdout.toString().trim());
    fs.chownSync(dataDir, nobody, nogroup);
    const refused = await runBinary(["serve", "--config", path], { cwd: env.dir, runAs: { user: "nobody", group: "nogroup" } });
    // Exit 1: restarted, as a tokens file another unit may still be writing would want.
    expect(refused.exitCode).toBe(1);
    expect(refused.stderr).toContain("cannot read the tokens file");
    expect(refused.stderr).toContain(`chown nobody:nogroup ${tokensFile}`);
    // A new file made once the data directory exists goes to its owner.
    fs.rmSync(tokensFile);
    expect((await runBinary(["admin", "token", "create", "--role", "admin", "--config", path], { cwd: env.dir })).exitCode).toBe(0);
    expect(fs.statSync(tokensFile).uid).toBe(nobody);
  });

  procTest("a second node on a data directory in use fails with the lock message while the first keeps serving", async (env) => {
    const first = await env.startSingleNode();
    await execute(first.clientUrl, [kvSchema, { sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: ["a", "1"] }]);
    const lockBefore = fs.readFileSync(join(first.dataDir, "LOCK"), "utf8");

    const second = await singleNodeConfig(env.dir, { dataDir: first.dataDir }, "node2");
    const r = await runBinary(["serve", "--config", writeConfig(env, second)], { cwd: env.dir });
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain(`data directory ${first.dataDir} is in use by another svc process`);
    expect(r.stderr).toContain(`pid ${first.pid}`);

    // The first node noticed nothing: it still holds the lock and serves reads and writes.
    expect(fs.readFileSync(join(first.dataDir, "LOCK"), "utf8")).toBe(lockBefore);
    expect((await request(`${first.clientUrl}/health`)).status).toBe(200);
    await execute(first.clientUrl, [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: ["b", "2"] }]);
    expect(await query(first.clientUrl, "SELECT k, v FROM kv ORDER BY k")).toEqual([["a", "1"], ["b", "2"]]);
  });
});

/** A config with three problems, on lines 3, 4 and 6. */
const badConfigText = [
  'node_id = "node1"',
  'data_dir = "DATA_DIR"',
  "snapshot_intervall = 5",
  'max_memory_mb = "lots"',
  "[listen]",
  'client = "127.0.0.1:notaport"',
  "",
].join("\n");

describe("configuration checks", () => {
  procTest("serve with a config file that has errors exits 2 and lists every problem with its line", async (env) => {
    const dataDir = join(env.dir, "data");
    const path = join(env.dir, "bad.toml");
    fs.writeFileSync(path, badConfigText.replace("DATA_DIR", dataDir));
    const r = await runBinary(["serve", "--config", path], { cwd: env.dir });
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain(`${path}:3:1: snapshot_intervall: unknown key`);
    expect(r.stderr).toContain('did you mean "snapshot_interval"');
    expect(r.stderr).toContain(`${path}:4:1: max_memory_mb:`);
    expect(r.stderr).toContain(`${path}:6:1: listen.client:`);
    expect(fs.existsSync(dataDir)).toBe(false);
  });

  procTest("--validate exits 0 with a one-line summary for a good file", async (env) => {
    const config = await singleNodeConfig(env.dir);
    const path = writeConfig(env, config);
    const r = await runBinary(["--config", path, "--validate"], { cwd: env.dir });
    expect(r.exitCode).toBe(0);
    const lines = r.stdout.trimEnd().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`${path}: ok:`);
    expect(lines[0]).toContain("node_id=node1");
    expect(lines[0]).toContain(`client=${String(config.listen?.client)}`);
    expect(fs.existsSync(dataDirOf(config))).toBe(false);
  });

  procTest("--validate exits 2 when this node's own member entry names a port it does not listen on, naming both and the file", async (env) => {
    const config = await singleNodeConfig(env.dir);
    const entry = config.cluster?.members?.[0];
    if (entry === undefined) throw new Error("no member entry");
    const wrong = "127.0.0.1:1";
    const path = writeConfig(env, { ...config, cluster: { ...config.cluster, members: [{ ...entry, peer: wrong }] } });
    const r = await runBinary(["--config", path, "--validate"], { cwd: env.dir });
    expect(r.exitCode).toBe(2);
    expect(r.stderr.split("\n").some((l) => /^:\d+:\d+: cluster\.members\[0\]\.peer: /.test(l.slice(path.length)) && l.startsWith(path))).toBe(true);
    expect(r.stderr).toContain(`gives peer = "${wrong}", but listen.peer = "${String(config.listen?.peer)}"`);
    expect(r.stderr).toContain("1 problem");
    expect(r.stdout).toBe("");
    // Another address and port, which NAT or a port mapping may forward here: a warning, exit 0.
    const mapped = writeConfig(env, { ...config, cluster: { ...config.cluster, members: [{ ...entry, peer: "203.0.113.7:17879" }] } });
    const warned = await runBinary(["--config", mapped, "--validate"], { cwd: env.dir });
    expect(warned.exitCode).toBe(0);
    expect(warned.stderr).toMatch(/:\d+:\d+: WARNING: cluster\.members\[0\]\.peer: .*unless the network forwards 203\.0\.113\.7:17879 to it/);
  });

  procTest("--validate exits 2 for a bad file and lists every problem", async (env) => {
    const path = join(env.dir, "bad.toml");
    fs.writeFileSync(path, badConfigText.replace("DATA_DIR", join(env.dir, "data")));
    const r = await runBinary(["--config", path, "--validate"], { cwd: env.dir });
    expect(r.exitCode).toBe(2);
    const problemLines = r.stderr.split("\n").filter((l) => l.startsWith(`${path}:`) && /^.*:\d+:\d+: /.test(l));
    expect(problemLines.map((l) => l.slice(path.length + 1).split(":")[0])).toEqual(["3", "4", "6"]);
    expect(r.stderr).toContain("3 problems");
  });

  procTest("an option the command does not know exits 2 naming it, and runs nothing; --config before the command is that command's", async (env) => {
    const dataDir = join(env.dir, "data");
    const path = join(env.dir, "bad.toml");
    fs.writeFileSync(path, badConfigText.replace("DATA_DIR", dataDir));
    // `serve --validate` would have started a node.
    const validate = await runBinary(["serve", "--config", path, "--validate"], { cwd: env.dir });
    expect(validate.exitCode).toBe(2);
    expect(validate.stderr).toContain("unknown option --validate for `svc serve`");
    // A misspelt lease would have paused writes until resumed.
    const lease = await runBinary(["admin", "pause-writes", "--node", "http://127.0.0.1:1", "--leese", "5s"], { cwd: env.dir });
    expect(lease.exitCode).toBe(2);
    expect(lease.stderr).toContain("unknown option --leese for `svc admin pause-writes`");
    // A command given one level too high is named where it is (it said "unknown option --wal-dir for `svc`").
    const high = await runBinary(["wal-replay", "--wal-dir", env.dir], { cwd: env.dir });
    expect({ exit: high.exitCode, stderr: high.stderr }).toEqual({ exit: 2, stderr: "svc: unknown command wal-replay for `svc`: it is `svc admin wal-replay`; see `svc admin wal-replay --help`\n" });
    expect((await runBinary(["admin", "frob"], { cwd: env.dir })).stderr).toBe("svc: unknown command frob for `svc admin`; see `svc admin --help`\n");
    // The root's --config before `serve` is read, not dropped for the built-in defaults.
    const before = await runBinary(["--config", path, "serve"], { cwd: env.dir });
    expect(before.exitCode).toBe(2);
    expect(before.stderr).toContain(`${path}:3:1: snapshot_intervall: unknown key`);
    const both = await runBinary(["--config", path, "--validate", "serve"], { cwd: env.dir });
    expect(both.exitCode).toBe(2);
    expect(both.stderr).toContain("--validate takes no command");
    expect(fs.existsSync(dataDir)).toBe(false);
    expect(fs.existsSync(join(env.dir, "svc-data"))).toBe(false);
  });

  procTest("--version prints the version", async () => {
    const r = await runBinary(["--version"]);
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^svc ${pkg.version.replaceAll(".", "\\.")} \\([0-9a-z-]+\\) bun \\d+\\.\\d+\\.\\d+\\n$`));
  });

  procTest("the binary invoked through a symlink named svc-admin acts as svc admin", async (env) => {
    const node = await env.startSingleNode();
    await execute(node.clientUrl, [kvSchema, { sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: ["a", "1"] }]);
    const link = join(env.dir, "svc-admin");
    fs.symlinkSync(ensureBinary(), link);

    const stats = await runBinary(["stats", "--node", node.adminUrl], { executable: link });
    expect(stats.stderr).toBe("");
    expect(stats.exitCode).toBe(0);
    expect(stats.stdout).toMatch(/^total_entries:\s+1$/m);
    expect(stats.stdout).toContain("table kv: 1 rows");

    const info = await runBinary(["cluster-info", "--node", node.adminUrl, "--json"], { executable: link });
    expect(info.exitCode).toBe(0);
    const { total_entries: totalEntries, total_entries_applied_index: _, ...parsed } = JSON.parse(info.stdout) as { node_id: string; total_entries: number; total_entries_applied_index: number };
    expect(parsed.node_id).toBe("node1");
    expect(totalEntries).toBe(1);
    expect(parsed).toEqual(await getJson(`${node.adminUrl}/admin/cluster-info`));
  });
});
