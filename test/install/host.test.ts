// install.sh without --root, on this host's own paths: accounts through the host's useradd,
// and systemctl to enable and start the units. Every change is caught in a scratch directory
// (see hostOverlayArgv), so the host itself is never touched; systemctl is a stand-in.

import { afterEach, beforeEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { hostOverlayArgv } from "./_host-view.ts";
import { INSTALL_SH, releaseBinary, removeRoot, run, type Run } from "./_helpers.ts";

// Each test runs install.sh or the binary, some build it first; a loaded machine is slow.
setDefaultTimeout(120_000);

const FAKE_SYSTEMCTL = resolve(import.meta.dir, "_fake-systemctl.sh");
const SERVICE_AND_TIMERS = ["svc.service", "svc-cleanup-snapshots.timer", "svc-cleanup-wal-archive.timer", "svc-backup-full.timer", "svc-backup-offsite.timer"];

let scratch: string;
beforeEach(() => {
  scratch = fs.mkdtempSync(join(tmpdir(), "svc-host-"));
});
afterEach(() => removeRoot(scratch));

/** The svc uid and gid in the host's passwd as install.sh left it (the overlay's upper layer). */
function svcIds(): { uid: number; gid: number } | undefined {
  const path = join(scratch, "etc-upper/passwd");
  if (!fs.existsSync(path)) return undefined;
  const fields = fs.readFileSync(path, "utf8").split("\n").find((l) => l.startsWith("svc:"))?.split(":");
  return fields === undefined ? undefined : { uid: Number(fields[2]), gid: Number(fields[3]) };
}

function installOnHost(args: string[], fakeSystemd = false): Run {
  const argv = hostOverlayArgv(scratch, ["sh", INSTALL_SH, "--binary", releaseBinary(), ...args], { fakeSystemd });
  if (!fakeSystemd) return run(argv);
  const bin = join(scratch, "fake-bin");
  const state = join(scratch, "systemd-state");
  fs.mkdirSync(bin, { recursive: true });
  fs.mkdirSync(state, { recursive: true });
  fs.copyFileSync(FAKE_SYSTEMCTL, join(bin, "systemctl"));
  fs.chmodSync(join(bin, "systemctl"), 0o755);
  fs.writeFileSync(join(state, "calls"), "");
  return run(argv, { env: { PATH: `${bin}:${process.env.PATH ?? "/usr/bin:/bin"}`, FAKE_SYSTEMD_DIR: state } });
}

/** systemctl calls of the last run that changed something (queries left out). */
function systemctlChanges(): string[] {
  const calls = fs.readFileSync(join(scratch, "systemd-state/calls"), "utf8").split("\n").filter((l) => l !== "");
  return calls.filter((c) => !c.startsWith("is-enabled") && !c.startsWith("is-active"));
}

describe("install.sh on the host's own paths", () => {
  test("creates the user with the host's tools and installs everything, then a rerun changes nothing", () => {
    expect(run(["getent", "passwd", "svc"]).exitCode).not.toBe(0); // else this host has a real svc install
    const first = installOnHost([]);
    expect(first.stderr).toBe("");
    expect(first.exitCode).toBe(0);
    expect(first.stdout).toContain("systemd is not running here");
    const ids = svcIds();
    expect(ids).toBeDefined();
    const data = fs.statSync(join(scratch, "var-lib/svc"));
    expect({ mode: data.mode & 0o777, uid: data.uid, gid: data.gid }).toEqual({ mode: 0o750, uid: ids?.uid ?? -1, gid: ids?.gid ?? -1 });
    expect(fs.readlinkSync(join(scratch, "usr-local-bin/svc-admin"))).toBe("svc");
    expect(fs.existsSync(join(scratch, "etc-upper/svc/config.toml"))).toBe(true);
    expect(fs.existsSync(join(scratch, "etc-upper/systemd/system/svc.service"))).toBe(true);

    const second = installOnHost([]);
    expect(second.exitCode).toBe(0);
    expect(second.stdout).toContain("nothing to change");

    const purge = installOnHost(["--uninstall", "--purge"]);
    expect(purge.exitCode).toBe(0);
    expect(svcIds()).toBeUndefined();
    expect(fs.existsSync(join(scratch, "usr-local-bin/svc"))).toBe(false);
    expect(fs.existsSync(join(scratch, "var-lib/svc"))).toBe(false);
  }, 120_000);

  test("with systemd running it enables and starts the unit and the timers once", () => {
    const first = installOnHost([], true);
    expect(first.exitCode).toBe(0);
    expect(systemctlChanges()).toEqual([
      "daemon-reload",
      ...SERVICE_AND_TIMERS.map((u) => `enable --quiet ${u}`),
      "start svc-cleanup-snapshots.timer",
      "start svc-cleanup-wal-archive.timer",
      "start svc-backup-full.timer",
      "start svc-backup-offsite.timer",
      "start svc.service",
    ]);
    fs.writeFileSync(join(scratch, "systemd-state/calls"), "");
    const second = installOnHost([], true);
    expect(second.stdout).toContain("nothing to change");
    expect(systemctlChanges()).toEqual([]);
  }, 120_000);

  test("a changed unit is reloaded and the running node restarted", () => {
    expect(installOnHost([], true).exitCode).toBe(0);
    const unit = join(scratch, "etc-upper/systemd/system/svc.service");
    fs.writeFileSync(unit, fs.readFileSync(unit, "utf8").replace("Restart=on-failure", "Restart=no"));
    const again = installOnHost([], true);
    expect(again.exitCode).toBe(0);
    expect(systemctlChanges()).toEqual(["daemon-reload", "restart svc.service"]);
  }, 120_000);

  test("--no-start enables the units and starts nothing", () => {
    expect(installOnHost(["--no-start"], true).exitCode).toBe(0);
    expect(systemctlChanges()).toEqual(["daemon-reload", ...SERVICE_AND_TIMERS.map((u) => `enable --quiet ${u}`)]);
  }, 120_000);

  test("--uninstall stops and disables the timers and the unit before removing them", () => {
    expect(installOnHost([], true).exitCode).toBe(0);
    const r = installOnHost(["--uninstall"], true);
    expect(r.exitCode).toBe(0);
    expect(systemctlChanges()).toEqual([
      "disable --now --quiet svc-cleanup-snapshots.timer",
      "disable --now --quiet svc-cleanup-wal-archive.timer",
      "disable --now --quiet svc-backup-full.timer",
      "disable --now --quiet svc-backup-offsite.timer",
      "disable --now --quiet svc.service",
      "daemon-reload",
    ]);
    expect(fs.existsSync(join(scratch, "etc-upper/systemd/system/svc.service"))).toBe(false);
    expect(fs.existsSync(join(scratch, "var-lib/svc"))).toBe(true);
  }, 120_000);
});
