// install.sh into a staging root (--root): every file, mode, owner and link as stated; the
// generated config validates; systemd accepts the units and timer schedules; a rerun changes
// nothing; --uninstall takes back what it installed and keeps the data.

import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import * as fs from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { parseConfig } from "../../src/config/index.ts";
import { hostViewArgv } from "./_host-view.ts";
import {
  accountIds, attrs, install, releaseBinary, removeRoot, run, stagingRoot, treeSnapshot, UNITS, type Run,
} from "./_helpers.ts";

// Each test runs install.sh or the binary, some build it first; a loaded machine is slow.
setDefaultTimeout(120_000);

/** `[Section] Key=value` lines of a unit file, each key with all its values in order. */
function unitKeys(text: string): Map<string, string[]> {
  const keys = new Map<string, string[]>();
  let section = "";
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    if (line.startsWith("[")) {
      section = line;
      continue;
    }
    const eq = line.indexOf("=");
    const key = `${section}${line.slice(0, eq)}`;
    keys.set(key, [...(keys.get(key) ?? []), line.slice(eq + 1)]);
  }
  return keys;
}

function readUnit(root: string, unit: string): Map<string, string[]> {
  return unitKeys(fs.readFileSync(join(root, "etc/systemd/system", unit), "utf8"));
}

/** systemd-analyze verify accepts every unit and timer under `root` (it exits 0 on unknown keys and bad values: its stderr is the verdict). */
function expectUnitsVerified(root: string): void {
  const paths = UNITS.map((u) => `/etc/systemd/system/${u}`);
  const r = run(hostViewArgv(root, ["systemd-analyze", "verify", "--man=no", ...paths]));
  expect(r.stderr).toBe("");
  expect(r.exitCode).toBe(0);
}

/** The node id install.sh derives from this host's name. */
function expectedNodeId(): string {
  return (hostname().split(".")[0] ?? "").replace(/[^A-Za-z0-9_.-]/g, "-").slice(0, 64) || "node1";
}

describe("install.sh --root", () => {
  let root: string;
  let first: Run;
  let svc: { uid: number; gid: number };

  beforeAll(() => {
    releaseBinary();
    root = stagingRoot();
    first = install(root);
    svc = accountIds(root, "svc");
  }, 120_000); // the first call builds the release binary
  afterAll(() => removeRoot(root));

  test("succeeds and lists what it changed", () => {
    expect(first.stderr).toBe("");
    expect(first.exitCode).toBe(0);
    expect(first.stdout).toContain("installed /usr/local/bin/svc");
    expect(first.stdout).toContain("created user svc");
  });

  test("creates the system group and user svc with no login shell and no home", () => {
    const user = fs.readFileSync(join(root, "etc/passwd"), "utf8").split("\n").find((l) => l.startsWith("svc:"));
    const [, , uid, gid, , home, shell] = (user ?? "").split(":");
    expect(Number(uid)).toBeLessThan(1000); // a system account
    expect(shell).toBe("/usr/sbin/nologin");
    expect(home).toBe("/nonexistent");
    expect(fs.existsSync(join(root, "nonexistent"))).toBe(false);
    const group = fs.readFileSync(join(root, "etc/group"), "utf8").split("\n").find((l) => l.startsWith("svc:"));
    expect(group?.split(":")[2]).toBe(gid);
    const shadow = fs.readFileSync(join(root, "etc/shadow"), "utf8").split("\n").find((l) => l.startsWith("svc:"));
    expect(shadow?.split(":")[1]).toMatch(/^[!*]/); // no password can log in
  });

  test("installs the binary 0755 root:root, identical to the build, and svc-admin as a link to it", () => {
    const bin = join(root, "usr/local/bin/svc");
    expect(attrs(bin)).toEqual({ mode: "755", uid: 0, gid: 0 });
    expect(Buffer.compare(fs.readFileSync(bin), fs.readFileSync(releaseBinary()))).toBe(0);
    expect(fs.readlinkSync(join(root, "usr/local/bin/svc-admin"))).toBe("svc");
  });

  test("the installed svc-admin link acts as `svc admin`", () => {
    const archive = join(root, "var/backups/svc/wal");
    const r = run([join(root, "usr/local/bin/svc-admin"), "cleanup-wal-archive", "--dir", archive, "--dry-run"]);
    expect(r.stderr).toBe("");
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toContain("cleanup-wal-archive (dry run)");
  });

  test("creates /var/lib/svc 0750 owned by svc:svc, and the WAL archive directory likewise", () => {
    expect(attrs(join(root, "var/lib/svc"))).toEqual({ mode: "750", ...svc });
    expect(attrs(join(root, "var/backups/svc/wal"))).toEqual({ mode: "750", ...svc });
  });

  test("writes /etc/svc/config.toml readable by the svc group and writable by root only", () => {
    expect(attrs(join(root, "etc/svc"))).toEqual({ mode: "750", uid: 0, gid: svc.gid });
    expect(attrs(join(root, "etc/svc/config.toml"))).toEqual({ mode: "640", uid: 0, gid: svc.gid });
  });

  test("the generated config passes `svc --validate` and holds this host's node id and the defaults", () => {
    const path = join(root, "etc/svc/config.toml");
    const r = run([releaseBinary(), "--config", path, "--validate"]);
    expect(r.stderr).toBe("");
    expect(r.exitCode).toBe(0);
    const parsed = parseConfig(fs.readFileSync(path, "utf8"), path);
    if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
    expect(parsed.config.nodeId).toBe(expectedNodeId());
    expect(parsed.config.dataDir).toBe("/var/lib/svc");
    expect(parsed.config.listen.admin.port).toBe(9090);
    expect(parsed.config.listen.client.port).toBe(7878);
    expect(parsed.config.listen.peer.port).toBe(7879);
    // No [tls] and no [auth]: nothing listens beyond this machine.
    expect([parsed.config.listen.client.host, parsed.config.listen.admin.host, parsed.config.listen.peer.host]).toEqual(["127.0.0.1", "127.0.0.1", "127.0.0.1"]);
    expect(parsed.config.cluster.bootstrap).toBe(false);
  });

  test("--listen HOST binds the generated config there, and --validate warns loudly while it has no TLS and no tokens", () => {
    const other = stagingRoot();
    try {
      const r = install(other, "--listen", "0.0.0.0", "--no-start");
      expect(r.exitCode).toBe(0);
      const path = join(other, "etc/svc/config.toml");
      const parsed = parseConfig(fs.readFileSync(path, "utf8"), path);
      if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
      expect(parsed.config.listen.client.raw).toBe("0.0.0.0:7878");
      const v = run([releaseBinary(), "--config", path, "--validate"]);
      expect(v.exitCode).toBe(0);
      expect(v.stderr).toContain("WARNING: UNPROTECTED LISTENER: listen.client = 0.0.0.0:7878");
      expect(v.stderr).toContain("listen.admin = 0.0.0.0:9090");
    } finally {
      removeRoot(other);
    }
  });

  test("writes the unit and the timers 0644 root:root", () => {
    for (const unit of UNITS) expect(attrs(join(root, "etc/systemd/system", unit))).toEqual({ mode: "644", uid: 0, gid: 0 });
  });

  test("the unit runs `svc serve --config /etc/svc/config.toml` as svc and restarts it on failure", () => {
    const unit = readUnit(root, "svc.service");
    expect(unit.get("[Service]ExecStart")).toEqual(["/usr/local/bin/svc serve --config /etc/svc/config.toml"]);
    expect(unit.get("[Service]User")).toEqual(["svc"]);
    expect(unit.get("[Service]Group")).toEqual(["svc"]);
    expect(unit.get("[Service]Restart")).toEqual(["on-failure"]);
    // A node that stops with a message naming what to repair (exit 3) or a wrong configuration
    // (exit 2) is not restarted every few seconds for ever.
    expect(unit.get("[Service]RestartPreventExitStatus")).toEqual(["2 3"]);
    expect(unit.get("[Unit]RequiresMountsFor")).toEqual(["/var/lib/svc"]);
    expect(Number(unit.get("[Service]LimitNOFILE")?.[0])).toBeGreaterThanOrEqual(65536);
    // A follower catching up at nice 10 may go back to nice 0 (catch-up-priority.ts).
    expect(unit.get("[Service]LimitNICE")).toEqual(["20"]);
    expect(unit.get("[Install]WantedBy")).toEqual(["multi-user.target"]);
    // Type=notify only with a node that sends READY=1 whenever it runs; this node sends it
    // once healthy, which a node waiting for its cluster never is.
    expect(unit.get("[Service]Type")).toEqual(["exec"]);
  });

  test("the unit is hardened, with the data directory writable and the JIT left alone", () => {
    const unit = readUnit(root, "svc.service");
    expect(unit.get("[Service]ProtectSystem")).toEqual(["strict"]);
    expect(unit.get("[Service]ReadWritePaths")?.[0]?.split(" ")).toContain("/var/lib/svc");
    expect(unit.get("[Service]NoNewPrivileges")).toEqual(["yes"]);
    expect(unit.get("[Service]PrivateTmp")).toEqual(["yes"]);
    expect(unit.get("[Service]ProtectHome")).toEqual(["yes"]);
    expect(unit.get("[Service]CapabilityBoundingSet")).toEqual([""]);
    expect(unit.has("[Service]MemoryDenyWriteExecute")).toBe(false);
  });

  test("systemd-analyze verify accepts the unit and the timers without a warning", () => {
    expectUnitsVerified(root);
  });

  test("the timers fire daily at 02:00 and weekly on Sunday at 03:00, backups daily at 01:00 and off-site weekly, and catch up missed runs", () => {
    const schedules = {
      "svc-cleanup-snapshots.timer": "*-*-* 02:00:00",
      "svc-cleanup-wal-archive.timer": "Sun *-*-* 03:00:00",
      "svc-backup-full.timer": "*-*-* 01:00:00",
      "svc-backup-offsite.timer": "Sun *-*-* 04:00:00",
    };
    for (const [timer, normalized] of Object.entries(schedules)) {
      const keys = readUnit(root, timer);
      expect(keys.get("[Timer]Persistent")).toEqual(["true"]);
      expect(keys.get("[Install]WantedBy")).toEqual(["timers.target"]);
      const calendar = keys.get("[Timer]OnCalendar") ?? [];
      expect(calendar).toHaveLength(1);
      const r = run(["systemd-analyze", "calendar", calendar[0] ?? ""]);
      expect(r.stderr).toBe("");
      expect(r.exitCode).toBe(0);
      expect(r.stdout).toContain(`Normalized form: ${normalized}`);
    }
  });

  test("the timers' services run the cleanup commands as svc", () => {
    const snapshots = readUnit(root, "svc-cleanup-snapshots.service");
    expect(snapshots.get("[Service]ExecStart")).toEqual(["/usr/local/bin/svc admin cleanup-snapshots --config /etc/svc/config.toml --older-than 7d"]);
    const wal = readUnit(root, "svc-cleanup-wal-archive.service");
    expect(wal.get("[Service]ExecStart")).toEqual(["/usr/local/bin/svc admin cleanup-wal-archive --dir /var/backups/svc/wal --older-than 30d"]);
    for (const unit of [snapshots, wal]) {
      expect(unit.get("[Service]Type")).toEqual(["oneshot"]);
      expect(unit.get("[Service]User")).toEqual(["svc"]);
    }
  });

  test("the backup timers' services run on every node as svc, the leader only taking the backup, credentials from backup.env", () => {
    const full = readUnit(root, "svc-backup-full.service");
    expect(full.get("[Service]ExecStart")).toEqual(["/usr/local/bin/svc admin backup full --config /etc/svc/config.toml --if-leader"]);
    const offsite = readUnit(root, "svc-backup-offsite.service");
    expect(offsite.get("[Service]ExecStart")).toEqual(["/usr/local/bin/svc admin backup offsite --config /etc/svc/config.toml --if-leader"]);
    for (const unit of [full, offsite]) {
      expect(unit.get("[Service]Type")).toEqual(["oneshot"]);
      expect(unit.get("[Service]User")).toEqual(["svc"]);
      expect(unit.get("[Service]EnvironmentFile")).toEqual(["-/etc/svc/backup.env"]);
    }
  });

  test("the backup commands the timers run do nothing, successfully, until [backup] names a destination", () => {
    for (const unit of ["svc-backup-full.service", "svc-backup-offsite.service"]) {
      const execStart = readUnit(root, unit).get("[Service]ExecStart")?.[0] ?? "";
      const r = run(hostViewArgv(root, execStart.split(" "), { user: svc }));
      expect(r.stderr).toBe("");
      expect(r.exitCode).toBe(0);
      expect(r.stdout).toContain("skipped: [backup]");
    }
  });

  test("the cleanup commands the timers run work as svc on the installed layout", () => {
    for (const unit of ["svc-cleanup-snapshots.service", "svc-cleanup-wal-archive.service"]) {
      const execStart = readUnit(root, unit).get("[Service]ExecStart")?.[0] ?? "";
      const r = run(hostViewArgv(root, [...execStart.split(" "), "--dry-run"], { user: svc }));
      expect(r.stderr).toBe("");
      expect(r.exitCode).toBe(0);
      expect(r.stdout).toContain("(dry run): would remove 0");
    }
  });

  test("a second run changes nothing", () => {
    const before = treeSnapshot(root);
    const again = install(root);
    expect(again.exitCode).toBe(0);
    expect(again.stdout).toContain("nothing to change");
    expect(treeSnapshot(root)).toEqual(before);
  });
});

describe("install.sh --wal-archive-dir s3://bucket/prefix", () => {
  let root: string;
  let first: Run;

  beforeAll(() => {
    root = stagingRoot();
    first = install(root, "--wal-archive-dir", "s3://svc-backups/cluster1/wal");
  }, 120_000);
  afterAll(() => removeRoot(root));

  test("the weekly job cleans the object store with backup.env's credentials, and no local archive directory is made", () => {
    expect(first.stderr).toBe("");
    expect(first.exitCode).toBe(0);
    const wal = readUnit(root, "svc-cleanup-wal-archive.service");
    expect(wal.get("[Service]ExecStart")).toEqual(["/usr/local/bin/svc admin cleanup-wal-archive --dir s3://svc-backups/cluster1/wal --older-than 30d"]);
    expect(wal.get("[Service]EnvironmentFile")).toEqual(["-/etc/svc/backup.env"]);
    expect(wal.get("[Unit]After")).toEqual(["network-online.target"]);
    expect(wal.get("[Unit]ConditionPathIsDirectory")).toBeUndefined();
    expect(fs.existsSync(join(root, "s3:"))).toBe(false);
    expect(fs.existsSync(join(root, "var/backups/svc/wal"))).toBe(false);
    const unit = readUnit(root, "svc.service");
    expect(unit.get("[Service]ReadWritePaths")).toEqual(["/var/lib/svc"]);
    expect(fs.readFileSync(join(root, "usr/lib/tmpfiles.d/svc.conf"), "utf8")).not.toContain("s3:");
    expect(fs.readFileSync(join(root, "etc/svc/config.toml"), "utf8")).toContain("/usr/local/bin/svc admin wal-archive-put %p s3://svc-backups/cluster1/wal/%f");
  });

  test("systemd-analyze verify accepts the units", () => {
    expectUnitsVerified(root);
  });

  test("a location that is neither an absolute path nor s3:// is a usage error", () => {
    const other = stagingRoot();
    try {
      for (const bad of ["gs://bucket/wal", "relative/wal", "s3://", "s3://bucket/with space"]) {
        const r = install(other, "--wal-archive-dir", bad);
        expect(r.exitCode).toBe(2);
        expect(r.stderr).toContain("--wal-archive-dir");
      }
    } finally {
      removeRoot(other);
    }
  });
});

describe("install.sh --generate-certs", () => {
  test("makes a CA, the node's certificate (naming its node id), a gossip key and an admin token, 0600 svc:svc, and a config with [tls], [auth] and [gossip] that validates; a rerun changes nothing", () => {
    const root = stagingRoot();
    try {
      const r = install(root, "--generate-certs", "--node-id", "alpha", "--no-start");
      expect(r.stderr).toBe("");
      expect(r.exitCode).toBe(0);
      const svc = accountIds(root, "svc");
      const tls = join(root, "etc/svc/tls");
      for (const f of ["ca.crt", "ca.key", "node.crt", "node.key", "gossip.key"]) expect(attrs(join(tls, f))).toEqual({ mode: "600", ...svc });
      for (const f of ["etc/svc/tokens", "etc/svc/admin-token"]) expect(attrs(join(root, f))).toEqual({ mode: "600", ...svc });
      const verify = run(["openssl", "verify", "-CAfile", join(tls, "ca.crt"), join(tls, "node.crt")]);
      expect(verify.exitCode).toBe(0);
      expect(run(["openssl", "x509", "-in", join(tls, "node.crt"), "-noout", "-ext", "subjectAltName"]).stdout).toContain("URI:svc://alpha");
      // The token file holds the token; the tokens file only its hash.
      const token = fs.readFileSync(join(root, "etc/svc/admin-token"), "utf8").trim();
      const tokens = fs.readFileSync(join(root, "etc/svc/tokens"), "utf8");
      expect(tokens).not.toContain(token);
      expect(tokens).toContain(`sha256:${new Bun.CryptoHasher("sha256").update(token).digest("hex")} admin`);
      const text = fs.readFileSync(join(root, "etc/svc/config.toml"), "utf8");
      const underRoot = text.replaceAll('= "/etc/svc/', `= "${join(root, "etc/svc")}/`);
      const parsed = parseConfig(underRoot, "config.toml");
      if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
      expect(parsed.config.tls?.peerCaFile).toBe(join(root, "etc/svc/tls/ca.crt"));
      expect(parsed.config.auth?.tokenFile).toBe(join(root, "etc/svc/admin-token"));
      expect(parsed.config.gossip?.keyFile).toBe(join(root, "etc/svc/tls/gossip.key"));
      const before = treeSnapshot(root);
      const again = install(root, "--generate-certs", "--node-id", "alpha", "--no-start");
      expect(again.exitCode).toBe(0);
      expect(treeSnapshot(root)).toEqual(before);
    } finally {
      removeRoot(root);
    }
  });
});

describe("install.sh keeps what the operator has", () => {
  test("an existing config is never overwritten, nor its mode changed", () => {
    const root = stagingRoot();
    try {
      fs.mkdirSync(join(root, "etc/svc"), { recursive: true });
      const mine = 'node_id = "db-7"\ndata_dir = "/var/lib/svc"\n';
      fs.writeFileSync(join(root, "etc/svc/config.toml"), mine, { mode: 0o600 });
      const r = install(root);
      expect(r.exitCode).toBe(0);
      expect(r.stdout).toContain("kept /etc/svc/config.toml");
      expect(fs.readFileSync(join(root, "etc/svc/config.toml"), "utf8")).toBe(mine);
      expect(attrs(join(root, "etc/svc/config.toml"))).toEqual({ mode: "600", uid: 0, gid: 0 });
    } finally {
      removeRoot(root);
    }
  });

  test("a rerun gives back to svc the files under /var/lib/svc that another owner left there", () => {
    const root = stagingRoot();
    try {
      expect(install(root).exitCode).toBe(0);
      const svc = accountIds(root, "svc");
      fs.mkdirSync(join(root, "var/lib/svc/raft/snapshots"), { recursive: true });
      fs.writeFileSync(join(root, "var/lib/svc/raft/hardstate"), "restored as root");
      const r = install(root);
      expect(r.exitCode).toBe(0);
      for (const p of ["raft", "raft/snapshots", "raft/hardstate"]) {
        const a = attrs(join(root, "var/lib/svc", p));
        expect({ uid: a.uid, gid: a.gid }).toEqual(svc);
      }
    } finally {
      removeRoot(root);
    }
  });

  test("a /var/lib/svc that is a link to a data disk: what it links to, and all in it, is given to svc; the run after changes nothing", () => {
    const root = stagingRoot();
    try {
      const disk = join(root, "data-disk", "svc");
      fs.mkdirSync(join(disk, "raft"), { recursive: true, mode: 0o755 });
      fs.writeFileSync(join(disk, "raft", "hardstate"), "restored as root");
      fs.mkdirSync(join(root, "var/lib"), { recursive: true });
      fs.symlinkSync(disk, join(root, "var/lib/svc"));
      const r = install(root);
      expect(r.exitCode).toBe(0);
      const svc = accountIds(root, "svc");
      expect(attrs(disk)).toEqual({ mode: "750", ...svc });
      for (const p of ["raft", "raft/hardstate"]) {
        const a = attrs(join(disk, p));
        expect({ uid: a.uid, gid: a.gid }).toEqual(svc);
      }
      const again = install(root);
      expect(again.exitCode).toBe(0);
      expect(again.stdout).toContain("nothing to change");
    } finally {
      removeRoot(root);
    }
  });

  test("--node-id names the node in a generated config", () => {
    const root = stagingRoot();
    try {
      expect(install(root, "--node-id", "node2").exitCode).toBe(0);
      expect(fs.readFileSync(join(root, "etc/svc/config.toml"), "utf8")).toContain('node_id = "node2"');
    } finally {
      removeRoot(root);
    }
  });
});

describe("install.sh --uninstall", () => {
  test("removes the binary, the link and the units, and keeps data, config and the user", () => {
    const root = stagingRoot();
    try {
      expect(install(root).exitCode).toBe(0);
      fs.writeFileSync(join(root, "var/lib/svc/precious"), "data");
      const r = install(root, "--uninstall");
      expect(r.exitCode).toBe(0);
      for (const gone of ["usr/local/bin/svc", "usr/local/bin/svc-admin", ...UNITS.map((u) => `etc/systemd/system/${u}`)]) {
        expect(fs.existsSync(join(root, gone))).toBe(false);
      }
      expect(fs.readFileSync(join(root, "var/lib/svc/precious"), "utf8")).toBe("data");
      expect(fs.existsSync(join(root, "etc/svc/config.toml"))).toBe(true);
      expect(accountIds(root, "svc").uid).toBeGreaterThan(0);
      const again = install(root, "--uninstall");
      expect(again.exitCode).toBe(0);
      expect(again.stdout).toContain("nothing to remove");
    } finally {
      removeRoot(root);
    }
  });

  test("--purge also removes data, config, the empty archive directory, and the user and group", () => {
    const root = stagingRoot();
    try {
      expect(install(root).exitCode).toBe(0);
      const r = install(root, "--uninstall", "--purge");
      expect(r.exitCode).toBe(0);
      for (const gone of ["var/lib/svc", "etc/svc", "var/backups/svc", "usr/local/bin/svc"]) expect(fs.existsSync(join(root, gone))).toBe(false);
      expect(fs.readFileSync(join(root, "etc/passwd"), "utf8")).not.toContain("svc:");
      expect(fs.readFileSync(join(root, "etc/group"), "utf8")).not.toContain("svc:");
    } finally {
      removeRoot(root);
    }
  });

  test("--purge keeps archived WAL segments", () => {
    const root = stagingRoot();
    try {
      expect(install(root).exitCode).toBe(0);
      fs.writeFileSync(join(root, "var/backups/svc/wal/0000000000000001-0000000000000001.wal"), "segment");
      expect(install(root, "--uninstall", "--purge").exitCode).toBe(0);
      expect(fs.existsSync(join(root, "var/backups/svc/wal/0000000000000001-0000000000000001.wal"))).toBe(true);
    } finally {
      removeRoot(root);
    }
  });
});
