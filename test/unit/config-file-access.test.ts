// A configuration file the process may not read is refused saying who svc runs as, who owns
// the file and with what mode, and what lets it be read: EACCES alone names no way out. The
// way out is right for whoever runs it: an operator outside the service's group is not told
// to give the file to their own group, which would keep the service from reading it; on a host
// with no group svc (svc runs as a user of its own), the file goes to the process's own group.

import { afterAll, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const MAIN = resolve(import.meta.dir, "../../src/main.ts");
const dir = fs.mkdtempSync(join(tmpdir(), "svc-config-access-"));
fs.chmodSync(dir, 0o755);
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** As root, with this checkout readable by nobody (a checkout under a private home is not). */
function canRunAsNobody(): boolean {
  if (process.getuid?.() !== 0) return false;
  const r = Bun.spawnSync(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", process.execPath, "-e", `require(${JSON.stringify(MAIN)}.replace("main.ts", "version.ts"))`], { stdout: "ignore", stderr: "ignore" });
  return r.exitCode === 0;
}

function validateAsNobody(path: string): { exitCode: number; stderr: string } {
  const r = Bun.spawnSync(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", process.execPath, MAIN, "--config", path, "--validate"], {
    env: { ...process.env, NO_COLOR: "1" }, stdout: "pipe", stderr: "pipe",
  });
  return { exitCode: r.exitCode ?? -1, stderr: r.stderr.toString() };
}

/** The gid the service's group svc has in /etc/group as the commands below see it. */
const svcGid = 4242;
const hostGroups = fs.readFileSync("/etc/group", "utf8").split("\n").filter((l) => l !== "" && !l.startsWith("svc:")).join("\n");
/** /etc/group of a host install.sh ran on: it names the group svc. */
const groupFile = join(dir, "group");
fs.writeFileSync(groupFile, `${hostGroups}\nsvc:x:${svcGid}:\n`, { mode: 0o644 });
/** /etc/group of a host with no group svc: svc runs there as a user of the operator's choosing. */
const groupFileWithoutSvc = join(dir, "group-without-svc");
fs.writeFileSync(groupFileWithoutSvc, `${hostGroups}\n`, { mode: 0o644 });

/** `--config path --validate` as nobody, with `groups` bound over /etc/group in a mount namespace of its own. */
function validateAsNobodyWithGroups(path: string, groups: string): { exitCode: number; stderr: string } {
  const r = Bun.spawnSync([
    "unshare", "--mount", "--", "sh", "-c", 'mount --bind "$0" /etc/group && exec "$@"', groups,
    "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", process.execPath, MAIN, "--config", path, "--validate",
  ], { env: { ...process.env, NO_COLOR: "1" }, stdout: "pipe", stderr: "pipe" });
  return { exitCode: r.exitCode ?? -1, stderr: r.stderr.toString() };
}

/** `--config path --validate` as nobody on a host whose /etc/group names the group svc. */
function validateAsNobodyWithSvcGroup(path: string): { exitCode: number; stderr: string } {
  return validateAsNobodyWithGroups(path, groupFile);
}

function canBindGroupFile(): boolean {
  if (!canRunAsNobody()) return false;
  const r = Bun.spawnSync(["unshare", "--mount", "--", "sh", "-c", 'mount --bind "$0" /etc/group && grep -q "^svc:x:$1:" /etc/group', groupFile, String(svcGid)], { stdout: "ignore", stderr: "ignore" });
  return r.exitCode === 0;
}

test.skipIf(!canBindGroupFile())("a file the service user may not read names that user, the file's owner and mode, and the chmod that lets the service's group read it", () => {
  const path = join(dir, "config.toml");
  fs.writeFileSync(path, 'node_id = "node1"\n', { mode: 0o600 });
  fs.chmodSync(path, 0o600);
  const r = validateAsNobodyWithSvcGroup(path);
  expect(r.exitCode).toBe(2);
  expect(r.stderr).toContain("uid 65534");
  expect(r.stderr).toContain("mode 0600");
  expect(r.stderr).toContain("owner root");
  expect(r.stderr).toContain(`chgrp svc ${path} && chmod 640 ${path}`);
  expect(r.stderr).not.toContain("chgrp nogroup");
});

test.skipIf(!canBindGroupFile())("on a host with no group svc, a file the process may not read is given to the process's own group, and no user or group svc is named", () => {
  const path = join(dir, "no-svc-group.toml");
  fs.writeFileSync(path, 'node_id = "node1"\n', { mode: 0o600 });
  fs.chmodSync(path, 0o600);
  const r = validateAsNobodyWithGroups(path, groupFileWithoutSvc);
  expect(r.exitCode).toBe(2);
  expect(r.stderr).toContain("uid 65534");
  expect(r.stderr).toContain("owner root, group root, mode 0600");
  // nobody's own group (nogroup, gid 65534, or the number where the host does not name it).
  const ownGroup = fs.readFileSync("/etc/group", "utf8").split("\n").find((l) => l.split(":")[2] === "65534")?.split(":")[0] ?? "65534";
  expect(r.stderr).toContain(`chgrp ${ownGroup} ${path} && chmod 640 ${path}`);
  expect(r.stderr).not.toContain("chgrp svc");
  expect(r.stderr).not.toContain("sudo -u svc");
  expect(r.stderr).not.toContain("usermod");
});

test.skipIf(!canBindGroupFile())("a caller outside the service's group, on a file that group reads (0640 root:svc), is told to run as the service's user or join the group, not to regroup the file", () => {
  const path = join(dir, "svc-group.toml");
  fs.writeFileSync(path, 'node_id = "node1"\n', { mode: 0o640 });
  fs.chmodSync(path, 0o640);
  fs.chownSync(path, 0, svcGid);
  const r = validateAsNobodyWithSvcGroup(path);
  expect(r.exitCode).toBe(2);
  expect(r.stderr).toContain("group svc, mode 0640");
  expect(r.stderr).toContain("sudo -u svc");
  expect(r.stderr).toContain("usermod -aG svc nobody");
  expect(r.stderr).not.toContain("chgrp");
});

test.skipIf(!canBindGroupFile())("a file its group may read but that group is not the service's is given to the service's group, never to the caller's", () => {
  const path = join(dir, "root-group.toml");
  fs.writeFileSync(path, 'node_id = "node1"\n', { mode: 0o640 });
  fs.chmodSync(path, 0o640);
  fs.chownSync(path, 0, 0);
  const r = validateAsNobodyWithSvcGroup(path);
  expect(r.exitCode).toBe(2);
  expect(r.stderr).toContain(`chgrp svc ${path} && chmod 640 ${path}`);
  expect(r.stderr).not.toContain("chgrp nogroup");
  // nobody is not in svc either: after the chgrp it still could not read the file itself.
  expect(r.stderr).toContain("sudo -u svc");
});

test.skipIf(!canRunAsNobody())("a file behind a directory the service user may not enter says so", () => {
  const closed = join(dir, "closed");
  fs.mkdirSync(closed, { mode: 0o700 });
  fs.chmodSync(closed, 0o700);
  const path = join(closed, "config.toml");
  fs.writeFileSync(path, 'node_id = "node1"\n', { mode: 0o644 });
  const r = validateAsNobody(path);
  expect(r.exitCode).toBe(2);
  expect(r.stderr).toContain("uid 65534");
  expect(r.stderr).toContain(`namei -l ${path}`);
});
