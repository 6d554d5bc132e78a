import { describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import {
  defaultConfig,
  formatProblem,
  loadConfigFile,
  parseConfig,
  renderConfigToml,
  summarizeConfig,
  type ConfigProblem,
  type ConfigResult,
} from "../../src/config/index.ts";
import { runSource } from "../lib/source-cli.ts";

const THREE_NODES = `node_id = "node1"
data_dir = "/var/lib/svc"
max_memory_mb = 2048
snapshot_interval = 10000          # log entries between automatic snapshots

[listen]                           # where this node binds
client = "0.0.0.0:7878"
admin  = "0.0.0.0:9090"
peer   = "0.0.0.0:7879"            # Raft over TCP and gossip over UDP

[cluster]
bootstrap = false
members = [
  { id = "node1", peer = "10.0.0.1:7879", client = "10.0.0.1:7878", admin = "10.0.0.1:9090" },
  { id = "node2", peer = "10.0.0.2:7879", client = "10.0.0.2:7878", admin = "10.0.0.2:9090" },
  { id = "node3", peer = "10.0.0.3:7879", client = "10.0.0.3:7878", admin = "10.0.0.3:9090" },
]

[wal]
archive_command = ""
archive_timeout = 60               # seconds
segment_size_mb = 64

[raft]
heartbeat_interval_ms = 100
election_timeout_ms = 1000
`;

function problemsOf(result: ConfigResult): readonly ConfigProblem[] {
  if (result.ok) throw new Error("expected problems, the config was accepted");
  return result.problems;
}

function only(text: string, keyPath: string): ConfigProblem {
  const found = problemsOf(parseConfig(text, "config.toml")).filter((p) => p.keyPath === keyPath);
  expect(found).toHaveLength(1);
  return found[0]!;
}

function lineOf(text: string, needle: string): number {
  const index = text.split("\n").findIndex((line) => line.includes(needle));
  expect(index).toBeGreaterThanOrEqual(0);
  return index + 1;
}

describe("config: a valid file", () => {
  test("the design's example file parses to a Config with units in names", () => {
    const result = parseConfig(THREE_NODES, "config.toml");
    if (!result.ok) throw new Error(JSON.stringify(result.problems));
    const c = result.config;
    expect(c.nodeId).toBe("node1");
    expect(c.maxMemoryBytes).toBe(2048 * 1024 * 1024);
    expect(c.snapshotIntervalEntries).toBe(10000);
    expect(c.listen.client).toEqual({ host: "0.0.0.0", port: 7878, raw: "0.0.0.0:7878" });
    expect(c.cluster.members).toHaveLength(3);
    expect(c.cluster.members[1]?.peer).toEqual({ host: "10.0.0.2", port: 7879, raw: "10.0.0.2:7879" });
    expect(c.wal.archiveTimeoutMs).toBe(60_000);
    expect(c.wal.segmentSizeBytes).toBe(64 * 1024 * 1024);
    expect(c.raft).toEqual({ heartbeatIntervalMs: 100, electionTimeoutMs: 1000 });
  });

  test("absent keys take the documented defaults", () => {
    const result = parseConfig(`node_id = "a"\n`, "config.toml");
    if (!result.ok) throw new Error(JSON.stringify(result.problems));
    const c = result.config;
    expect(c.dataDir).toBe("/var/lib/svc");
    expect(c.maxMemoryBytes).toBe(2048 * 1024 * 1024);
    expect(c.snapshotIntervalEntries).toBe(10000);
    // With no [tls] and [auth], listeners default to loopback.
    expect(c.listen.client.raw).toBe("127.0.0.1:7878");
    expect(c.listen.admin.raw).toBe("127.0.0.1:9090");
    expect(c.listen.peer.raw).toBe("127.0.0.1:7879");
    expect(c.tls).toBeNull();
    expect(c.auth).toBeNull();
    expect(c.cluster).toEqual({ bootstrap: false, members: [] });
    expect(c.wal).toEqual({ archiveCommand: "", archiveTimeoutMs: 60_000, segmentSizeBytes: 64 * 1024 * 1024 });
    expect(c.raft).toEqual({ heartbeatIntervalMs: 100, electionTimeoutMs: 1000 });
  });

  test("[limits] takes the documented defaults and refuses values out of range", () => {
    const result = parseConfig(`node_id = "a"\n`, "config.toml");
    if (!result.ok) throw new Error(JSON.stringify(result.problems));
    // The per-client request rate and connection caps are off unless configured.
    expect(result.config.limits).toEqual({ queryTimeoutMs: 5000, adminQueryTimeoutMs: 60_000, writeCheckTimeoutMs: 1000, clientRequestsPerSecond: 0, clientConnectionsMax: 0 });
    const text = `node_id = "a"\n[limits]\nquery_timeout_ms = 0\nwrite_check_timeout_ms = "1s"\n`;
    expect(only(text, "limits.query_timeout_ms").message).toBe("must be between 10 and 3600000 milliseconds, got 0");
    expect(only(text, "limits.write_check_timeout_ms").line).toBe(4);
  });

  test("the config is deeply frozen", () => {
    const result = parseConfig(THREE_NODES, "config.toml");
    if (!result.ok) throw new Error("rejected");
    expect(Object.isFrozen(result.config)).toBe(true);
    expect(Object.isFrozen(result.config.cluster.members)).toBe(true);
    expect(Object.isFrozen(result.config.cluster.members[0]?.peer)).toBe(true);
  });

  test("members may be written as [[cluster.members]] tables", () => {
    const text = `node_id = "n1"\n[[cluster.members]]\nid = "n1"\npeer = "h1:1"\nclient = "h1:2"\nadmin = "h1:3"\n`;
    const result = parseConfig(text, "config.toml");
    if (!result.ok) throw new Error(JSON.stringify(result.problems));
    expect(result.config.cluster.members[0]?.admin.port).toBe(3);
  });

  test("an IPv6 address in brackets is accepted", () => {
    const result = parseConfig(`node_id = "a"\n[listen]\nclient = "[::1]:7878"\n`, "config.toml");
    if (!result.ok) throw new Error(JSON.stringify(result.problems));
    expect(result.config.listen.client).toEqual({ host: "::1", port: 7878, raw: "[::1]:7878" });
  });

  test("summarizeConfig names the node, data dir, listeners, member count and bootstrap on one line", () => {
    const result = parseConfig(THREE_NODES, "config.toml");
    if (!result.ok) throw new Error("rejected");
    const line = summarizeConfig(result.config);
    expect(line).not.toContain("\n");
    expect(line).toBe("node_id=node1 data_dir=/var/lib/svc client=0.0.0.0:7878 admin=0.0.0.0:9090 peer=0.0.0.0:7879 members=3 bootstrap=false");
  });
});

describe("config: the embedded default", () => {
  test("runs one bootstrapping node on loopback with data in ./svc-data, as an absolute path", () => {
    const c = defaultConfig();
    expect(c.nodeId).toBe("node1");
    expect(c.dataDir).toBe(resolve("svc-data"));
    expect(c.listen.client.raw).toBe("127.0.0.1:7878");
    expect(c.listen.admin.raw).toBe("127.0.0.1:9090");
    expect(c.listen.peer.raw).toBe("127.0.0.1:7879");
    expect(c.cluster.bootstrap).toBe(true);
    expect(c.cluster.members).toEqual([
      {
        id: "node1",
        peer: { host: "127.0.0.1", port: 7879, raw: "127.0.0.1:7879" },
        client: { host: "127.0.0.1", port: 7878, raw: "127.0.0.1:7878" },
        admin: { host: "127.0.0.1", port: 9090, raw: "127.0.0.1:9090" },
      },
    ]);
  });
});

describe("config: rendering", () => {
  test("a rendered Config parses back to the same Config", () => {
    for (const source of [THREE_NODES, renderConfigToml(defaultConfig())]) {
      const first = parseConfig(source, "a.toml");
      if (!first.ok) throw new Error(JSON.stringify(first.problems));
      const again = parseConfig(renderConfigToml(first.config), "b.toml");
      if (!again.ok) throw new Error(JSON.stringify(again.problems));
      expect(again.config).toEqual(first.config);
    }
  });

  test("a partial draft is filled with defaults and parses", () => {
    const text = renderConfigToml({
      nodeId: "node2",
      dataDir: "/tmp/svc \"quoted\"\\dir",
      listen: { client: "127.0.0.1:17878", admin: "127.0.0.1:19090", peer: "127.0.0.1:17879" },
      wal: { archiveCommand: "cp %p /backup/%f" },
    });
    const result = parseConfig(text, "gen.toml");
    if (!result.ok) throw new Error(JSON.stringify(result.problems));
    expect(result.config.dataDir).toBe("/tmp/svc \"quoted\"\\dir");
    expect(result.config.wal.archiveCommand).toBe("cp %p /backup/%f");
    expect(result.config.listen.admin.port).toBe(19090);
    expect(result.config.raft.electionTimeoutMs).toBe(1000);
  });
});

describe("config: problems", () => {
  test("a TOML syntax error gives its line and column", () => {
    const problems = problemsOf(parseConfig(`node_id = "a"\nmax_memory_mb = = 3\n`, "config.toml"));
    expect(problems).toHaveLength(1);
    expect(problems[0]?.line).toBe(2);
    const firstColumn = problems[0]?.column;
    expect(firstColumn).toBeGreaterThan(1);
    expect(problems[0]?.message).toContain("TOML syntax error");
  });

  test("an unknown key is reported with a did-you-mean suggestion and its line", () => {
    const text = THREE_NODES.replace("heartbeat_interval_ms", "heartbeat_intervl_ms");
    const p = only(text, "raft.heartbeat_intervl_ms");
    expect(p.message).toContain('did you mean "heartbeat_interval_ms"');
    expect(p.line).toBe(lineOf(text, "heartbeat_intervl_ms"));
    expect(p.column).toBe(1);
  });

  test("an unknown key inside a member is reported at that member's line", () => {
    const text = THREE_NODES.replace('{ id = "node2", peer', '{ id = "node2", peeer');
    const p = only(text, "cluster.members[1].peeer");
    expect(p.message).toContain('did you mean "peer"');
    expect(p.line).toBe(lineOf(text, "peeer"));
    expect(p.column).toBe(text.split("\n")[p.line! - 1]!.indexOf("peeer") + 1);
  });

  test("a key in the wrong table says which table it belongs in", () => {
    const text = `node_id = "a"\narchive_command = "cp %p /x/%f"\n`;
    const p = only(text, "archive_command");
    expect(p.message).toContain("belongs in [wal]");
    expect(p.line).toBe(2);
  });

  test("unknown tables and unknown top-level keys are both reported", () => {
    const text = `node_id = "a"\nsnapshot_intervall = 5\n[raftt]\nx = 1\n`;
    const problems = problemsOf(parseConfig(text, "config.toml"));
    expect(problems.map((p) => p.keyPath).sort()).toEqual(["raftt", "snapshot_intervall"]);
    expect(problems.find((p) => p.keyPath === "raftt")?.message).toContain('did you mean "raft"');
  });

  test("a wrong type names the expected and the given type", () => {
    const text = `node_id = "a"\nmax_memory_mb = "abc"\n[cluster]\nbootstrap = "yes"\n[raft]\nheartbeat_interval_ms = 100.5\n`;
    expect(only(text, "max_memory_mb").message).toBe('expected an integer, got string "abc"');
    expect(only(text, "cluster.bootstrap").message).toContain('expected a boolean (true or false), got string "yes"');
    expect(only(text, "raft.heartbeat_interval_ms").message).toBe("expected an integer, got float 100.5");
  });

  test("an out-of-range value names the range and its unit", () => {
    const text = `node_id = "a"\nmax_memory_mb = 10\n[wal]\nsegment_size_mb = 4096\n`;
    expect(only(text, "max_memory_mb").message).toBe("must be between 64 and 1048576 megabytes, got 10");
    expect(only(text, "wal.segment_size_mb").message).toBe("must be between 1 and 1024 megabytes, got 4096");
    expect(only(text, "wal.segment_size_mb").line).toBe(4);
  });

  test("a bad node_id and a missing node_id are problems", () => {
    expect(only(`node_id = "no spaces"\n`, "node_id").message).toContain("A-Z a-z 0-9 _ . -");
    expect(only(`data_dir = "/x"\n`, "node_id").message).toContain("required");
  });

  test("a malformed address or port is reported", () => {
    const text = `node_id = "a"\n[listen]\nclient = "localhost"\nadmin = "localhost:70000"\n`;
    expect(only(text, "listen.client").message).toContain('expected "host:port"');
    expect(only(text, "listen.admin").message).toContain("between 1 and 65535");
  });

  test("the same port twice in [listen] is a problem even on different hosts", () => {
    const text = `node_id = "a"\n[listen]\nclient = "127.0.0.1:7000"\nadmin = "0.0.0.0:7000"\n`;
    const p = only(text, "listen.admin");
    expect(p.message).toContain("port 7000 is also used by listen.client");
    expect(p.line).toBe(4);
  });

  test("election_timeout_ms under 5 × heartbeat_interval_ms is a problem that says so", () => {
    const text = `node_id = "a"\n[raft]\nheartbeat_interval_ms = 300\nelection_timeout_ms = 1000\n`;
    const p = only(text, "raft.election_timeout_ms");
    expect(p.message).toContain("at least 5 × raft.heartbeat_interval_ms (5 × 300 = 1500)");
  });

  test("duplicate member ids are reported at the second one", () => {
    const text = THREE_NODES.replace('{ id = "node3"', '{ id = "node2"');
    const p = only(text, "cluster.members[2].id");
    expect(p.message).toContain('duplicate member id "node2"');
    expect(p.line).toBe(lineOf(text, '{ id = "node2", peer = "10.0.0.3'));
  });

  test("duplicate member addresses are reported, across kinds too", () => {
    const text = THREE_NODES.replace('peer = "10.0.0.3:7879"', 'peer = "10.0.0.2:7879"').replace('client = "10.0.0.3:7878"', 'client = "10.0.0.1:9090"');
    expect(only(text, "cluster.members[2].peer").message).toContain("also cluster.members[1].peer");
    expect(only(text, "cluster.members[2].client").message).toContain("also cluster.members[0].admin");
  });

  test("a member address on 0.0.0.0 is a problem: other nodes cannot dial it", () => {
    const text = THREE_NODES.replace('peer = "10.0.0.2:7879"', 'peer = "0.0.0.0:7879"');
    expect(only(text, "cluster.members[1].peer").message).toContain("bind-all");
  });

  test("a member missing a required key is reported at the member", () => {
    const text = THREE_NODES.replace(', admin = "10.0.0.2:9090"', "");
    const p = only(text, "cluster.members[1].admin");
    expect(p.message).toContain("required");
    expect(p.line).toBe(lineOf(text, '{ id = "node2"'));
  });

  test("node_id missing from a non-empty member list says to add it or fix node_id", () => {
    const text = THREE_NODES.replace('node_id = "node1"', 'node_id = "node4"');
    const p = only(text, "cluster.members");
    expect(p.message).toContain('node_id "node4" is not among the members (node1, node2, node3)');
    expect(p.message).toContain("add a member");
    expect(p.message).toContain("fix node_id");
    expect(p.line).toBe(lineOf(text, "members = ["));
  });

  test("bootstrap with members that leave out this node names bootstrap", () => {
    const text = THREE_NODES.replace('node_id = "node1"', 'node_id = "node4"').replace("bootstrap = false", "bootstrap = true");
    expect(only(text, "cluster.members").message).toStartWith("bootstrap = true but");
  });

  test("bootstrap with no members is a problem", () => {
    const text = `node_id = "a"\n[cluster]\nbootstrap = true\n`;
    const p = only(text, "cluster.bootstrap");
    expect(p.message).toContain("needs cluster.members");
    expect(p.line).toBe(3);
  });

  test("every problem in a file is reported, not only the first", () => {
    const text = THREE_NODES
      .replace("max_memory_mb = 2048", "max_memory_mb = 1")
      .replace('admin  = "0.0.0.0:9090"', 'admin  = "0.0.0.0:7878"')
      .replace("segment_size_mb = 64", "segment_size_mb = \"big\"")
      .replace("election_timeout_ms = 1000", "election_timeout_ms = 100")
      .replace('{ id = "node3"', '{ id = "node2"')
      .replace("[wal]", "[wal]\narchive_comand = \"x\"");
    const keys = problemsOf(parseConfig(text, "config.toml")).map((p) => p.keyPath).sort();
    expect(keys).toEqual([
      "cluster.members[2].id",
      "listen.admin",
      "max_memory_mb",
      "raft.election_timeout_ms",
      "wal.archive_comand",
      "wal.segment_size_mb",
    ]);
  });

  test("formatProblem renders file:line:column: key path: message", () => {
    expect(formatProblem({ line: 12, column: 3, keyPath: "cluster.members[1].peer", message: "bad" }, "config.toml")).toBe(
      "config.toml:12:3: cluster.members[1].peer: bad",
    );
    expect(formatProblem({ keyPath: "node_id", message: "required key is missing" }, "c.toml")).toBe("c.toml: node_id: required key is missing");
    expect(formatProblem({ line: 2, column: 5, keyPath: "", message: "TOML syntax error: x" }, "c.toml")).toBe("c.toml:2:5: TOML syntax error: x");
  });

  test("locations survive multi-line strings and comments with brackets", () => {
    const text = `node_id = "a"\ndata_dir = """\n/x\n[not a table]\n"""\n# [raft] in a comment\n[raft]\nheartbeat_interval_ms = "x"\n`;
    expect(only(text, "raft.heartbeat_interval_ms").line).toBe(8);
  });
});

describe("config: this node's own member entry against its [listen] addresses", () => {
  const own = (listen: string, entry: string) => THREE_NODES
    .replace(/\[listen\][\s\S]*?\n\n/, `[listen]\n${listen}\n\n`)
    .replace('{ id = "node1", peer = "10.0.0.1:7879", client = "10.0.0.1:7878", admin = "10.0.0.1:9090" }', entry);
  const parsed = (text: string) => {
    const r = parseConfig(text, "config.toml");
    if (!r.ok) throw new Error(`expected the file to parse: ${JSON.stringify(r.problems)}`);
    return { problems: r.selfEntryProblems ?? [], warnings: r.selfEntryWarnings ?? [] };
  };

  test("an entry whose ports are those it listens on, on a bind-all address, is no problem and no warning", () => {
    expect(parsed(THREE_NODES)).toEqual({ problems: [], warnings: [] });
  });

  test("a port other than the one it listens on, at the very address it binds (or at loopback), is a problem naming both, at the entry's line", () => {
    const text = own('client = "127.0.0.1:7878"\nadmin = "0.0.0.0:9090"\npeer = "10.0.0.1:7879"',
      '{ id = "node1", peer = "10.0.0.1:7999", client = "127.0.0.1:7000", admin = "127.0.0.1:9999" }');
    const { problems, warnings } = parsed(text);
    expect(problems.map((p) => p.keyPath)).toEqual(["cluster.members[0].peer", "cluster.members[0].client", "cluster.members[0].admin"]);
    expect(problems[0]).toMatchObject({ line: lineOf(text, '"10.0.0.1:7999"') });
    expect(problems[0]?.message).toContain('gives peer = "10.0.0.1:7999", but listen.peer = "10.0.0.1:7879"');
    expect(problems[0]?.message).toContain("cannot reach this node");
    expect(warnings).toEqual([]);
  });

  test("where the network may forward it (NAT, a container's port mapping), another port or address is a warning, not a problem", () => {
    // Bound to all: the entry's address may be a mapping of it (docker -p 17879:7879).
    const mapped = parsed(own('client = "0.0.0.0:7878"\nadmin = "0.0.0.0:9090"\npeer = "0.0.0.0:7879"',
      '{ id = "node1", peer = "10.0.0.1:17879", client = "10.0.0.1:7878", admin = "10.0.0.1:9090" }'));
    expect(mapped.problems).toEqual([]);
    expect(mapped.warnings.map((w) => w.keyPath)).toEqual(["cluster.members[0].peer"]);
    expect(mapped.warnings[0]?.message).toContain("unless the network forwards 10.0.0.1:17879 to it");
    // A public address in front of the private one bound.
    const nat = parsed(own('client = "10.0.0.5:7878"\nadmin = "[0:0::1]:9090"\npeer = "10.0.0.2:7879"',
      '{ id = "node1", peer = "203.0.113.7:7879", client = "node1.example:7878", admin = "[::1]:9090" }'));
    expect(nat.problems).toEqual([]);
    // The host name and the IPv6 address written another way say nothing.
    expect(nat.warnings.map((w) => w.keyPath)).toEqual(["cluster.members[0].peer"]);
  });

  test("hosts that cannot be compared are not: host names, IPv6 against IPv4, a zone id", () => {
    const entry = '{ id = "node1", peer = "[fe80::1%eth0]:7879", client = "node1.example:7878", admin = "[::1]:9090" }';
    expect(parsed(own('client = "127.0.0.1:7878"\nadmin = "127.0.0.1:9090"\npeer = "[fe80::1%eth0]:7879"', entry))).toEqual({ problems: [], warnings: [] });
    expect(parsed(own('client = "0.0.0.0:7878"\nadmin = "[::]:9090"\npeer = "[::]:7879"', entry))).toEqual({ problems: [], warnings: [] });
  });

  test("with other problems in the file, the entry's mismatch is listed among them", () => {
    const text = own('client = "127.0.0.1:7878"\nadmin = "0.0.0.0:9090"\npeer = "0.0.0.0:7879"',
      '{ id = "node1", peer = "10.0.0.1:7879", client = "127.0.0.1:7000", admin = "10.0.0.1:9090" }').replace("max_memory_mb = 2048", "max_memory_mb = -1");
    expect(problemsOf(parseConfig(text, "config.toml")).map((p) => p.keyPath).sort()).toEqual(["cluster.members[0].client", "max_memory_mb"]);
  });
});

describe("config: values that would be taken differently than written are refused", () => {
  test("an address whose host is not a valid IP address or host name is refused, naming the key", () => {
    for (const bad of ["999.1.1.1:7878", "10.0.1:7878", "256.0.0.1:7878", "[zz]:7878", "bad host:7878"]) {
      const text = THREE_NODES.replace('client = "0.0.0.0:7878"', `client = ${JSON.stringify(bad)}`);
      expect(only(text, "listen.client").message).toContain(JSON.stringify(bad));
    }
    const member = THREE_NODES.replace('peer = "10.0.0.2:7879"', 'peer = "10.0.0.999:7879"');
    expect(only(member, "cluster.members[1].peer").message).toContain("not a valid IPv4 address");
    for (const good of ["127.0.0.1:7878", "[::1]:7878", "localhost:7878", "db-1.example.com:7878", "svc_node1:7878"]) {
      expect(parseConfig(THREE_NODES.replace('client = "0.0.0.0:7878"', `client = ${JSON.stringify(good)}`), "config.toml").ok).toBe(true);
    }
  });

  test("a relative data_dir is refused, naming the key", () => {
    for (const relative of ["svc-data", "./svc-data", "../data"]) {
      const text = THREE_NODES.replace('data_dir = "/var/lib/svc"', `data_dir = ${JSON.stringify(relative)}`);
      const problem = only(text, "data_dir");
      expect(problem.message).toContain("absolute path");
      expect(problem.line).toBe(lineOf(text, "data_dir"));
    }
  });

  test("a data_dir that is an existing file is refused as a file", () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-config-"));
    try {
      const file = join(dir, "not-a-dir");
      writeFileSync(file, "x");
      const problem = only(THREE_NODES.replace('data_dir = "/var/lib/svc"', `data_dir = ${JSON.stringify(file)}`), "data_dir");
      expect(problem.message).toContain("is a file");
      expect(parseConfig(THREE_NODES.replace('data_dir = "/var/lib/svc"', `data_dir = ${JSON.stringify(dir)}`), "config.toml").ok).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("config: a data_dir on a file system that holds no files", () => {
  const withDataDir = (dataDir: string): string => THREE_NODES.replace('data_dir = "/var/lib/svc"', `data_dir = ${JSON.stringify(dataDir)}`);

  /** The type of the file system mounted at `point` (the last mount there), as this host has it. */
  const mountedType = (point: string): string | undefined =>
    readFileSync("/proc/self/mountinfo", "utf8").split("\n").map((l) => l.split(" ")).filter((f) => f[4] === point).map((f) => f[f.indexOf("-", 6) + 1]).at(-1);

  test("one under /proc, /sys or /dev (devtmpfs) is refused, naming the file system", () => {
    const cases = [["/proc/svc", "proc"], ["/proc", "proc"], ["/sys/kernel/svc", "sysfs"], ["/dev/svc-data", "devtmpfs"]] as const;
    // A container may mount /sys otherwise, or /dev as tmpfs: only what this host has is asked.
    for (const [dataDir, fsType] of cases.filter(([d, t]) => d.startsWith("/proc") || mountedType(`/${d.split("/")[1]}`) === t)) {
      const problem = only(withDataDir(dataDir), "data_dir");
      expect(problem.message).toContain(fsType);
      expect(problem.message).toContain("holds no files");
    }
  });

  test("it is the file system that counts, not the path: a link into /proc is refused, /dev/shm (tmpfs) is not", () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-config-"));
    try {
      symlinkSync("/proc/self", join(dir, "link"));
      expect(only(withDataDir(join(dir, "link", "data")), "data_dir").message).toContain("proc");
      expect(parseConfig(withDataDir(join(dir, "data")), "config.toml").ok).toBe(true);
      if (existsSync("/dev/shm")) expect(parseConfig(withDataDir("/dev/shm/svc-data"), "config.toml").ok).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("--validate refuses it, exit 2", () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-config-"));
    try {
      const path = join(dir, "config.toml");
      writeFileSync(path, withDataDir("/proc/svc"));
      const r = runSource(["--config", path, "--validate"], dir);
      expect(r.code).toBe(2);
      expect(r.stderr + r.stdout).toContain("data_dir");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("config: loading a file", () => {
  test("loadConfigFile reads and validates a file", () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-config-"));
    try {
      const path = join(dir, "config.toml");
      writeFileSync(path, THREE_NODES);
      expect(loadConfigFile(path).ok).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a file that is not UTF-8 is refused at the line of the bad byte, not decoded with replacement characters", () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-config-"));
    try {
      const path = join(dir, "config.toml");
      const text = THREE_NODES.replace('archive_command = ""', 'archive_command = "cp %p /backup/X"');
      const bytes = new TextEncoder().encode(text);
      bytes[bytes.indexOf("X".charCodeAt(0), text.indexOf("/backup/"))] = 0xe9;
      writeFileSync(path, bytes);
      const problems = problemsOf(loadConfigFile(path));
      expect(problems).toHaveLength(1);
      expect(problems[0]?.message).toContain("not valid UTF-8");
      expect(problems[0]?.line).toBe(lineOf(text, "archive_command"));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a missing file is one problem that says it cannot be read", () => {
    const problems = problemsOf(loadConfigFile("/nonexistent/svc/config.toml"));
    expect(problems).toHaveLength(1);
    expect(problems[0]?.message).toContain("cannot read the config file");
  });
});
