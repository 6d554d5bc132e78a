// install.sh refuses what it cannot do well before it changes anything: no root, a damaged
// binary, a wrong option. And it stays plain POSIX sh.

import { describe, expect, setDefaultTimeout, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { asUser, INSTALL_SH, install, NOBODY, releaseBinary, removeRoot, run, stagingRoot } from "./_helpers.ts";

// Each test runs install.sh or the binary, some build it first; a loaded machine is slow.
setDefaultTimeout(120_000);

/** Host paths an install would create; none may appear from a refused run. */
const HOST_PATHS = ["/usr/local/bin/svc", "/usr/local/bin/svc-admin", "/etc/svc", "/var/lib/svc", "/etc/systemd/system/svc.service"];

function hostState(): string {
  const exists = HOST_PATHS.map((p) => `${p}:${fs.existsSync(p)}`);
  const user = run(["getent", "passwd", "svc"]).stdout;
  return `${exists.join(" ")} user=${user}`;
}

/** Copies of install.sh and the binary in a directory that any user can read. */
function readableCopies(): { dir: string; script: string; binary: string } {
  const dir = fs.mkdtempSync(join(tmpdir(), "svc-install-sh-"));
  fs.chmodSync(dir, 0o755);
  const script = join(dir, "install.sh");
  fs.copyFileSync(INSTALL_SH, script);
  fs.chmodSync(script, 0o755);
  const binary = join(dir, "svc");
  fs.copyFileSync(releaseBinary(), binary);
  fs.chmodSync(binary, 0o755);
  return { dir, script, binary };
}

describe("install.sh guards", () => {
  test("as non-root without --root it says it needs root and exits non-zero before changing anything", () => {
    const { dir, script, binary } = readableCopies();
    try {
      const before = hostState();
      const r = run(asUser(NOBODY, ["sh", script, "--binary", binary]), { cwd: dir });
      expect(r.exitCode).not.toBe(0);
      expect(r.stderr).toContain("needs root");
      expect(r.stderr).toContain("--root");
      expect(r.stdout).toBe("");
      expect(hostState()).toBe(before);
      expect(fs.readdirSync(dir).sort()).toEqual(["install.sh", "svc"]);
    } finally {
      removeRoot(dir);
    }
  }, 120_000);

  test("as non-root with --root it stages the files and leaves the user and ownership to the post-install step", () => {
    const { dir, script, binary } = readableCopies();
    const root = stagingRoot({ accounts: false });
    try {
      fs.chownSync(root, NOBODY.uid, NOBODY.gid);
      const r = run(asUser(NOBODY, ["sh", script, "--root", root, "--binary", binary]), { cwd: dir });
      expect(r.stderr).toBe("");
      expect(r.exitCode).toBe(0);
      expect(r.stdout).toContain("post-install");
      expect(fs.existsSync(join(root, "usr/local/bin/svc"))).toBe(true);
      expect(fs.statSync(join(root, "var/lib/svc")).mode & 0o777).toBe(0o750);
      expect(fs.existsSync(join(root, "etc/passwd"))).toBe(false);
    } finally {
      removeRoot(root);
      removeRoot(dir);
    }
  });

  test("a staging root without etc/passwd gets every file but no accounts", () => {
    const root = stagingRoot({ accounts: false });
    try {
      const r = install(root);
      expect(r.exitCode).toBe(0);
      expect(r.stdout).toContain("post-install");
      expect(fs.existsSync(join(root, "etc/passwd"))).toBe(false);
      expect(fs.existsSync(join(root, "etc/systemd/system/svc.service"))).toBe(true);
      expect(fs.existsSync(join(root, "etc/svc/config.toml"))).toBe(true);
    } finally {
      removeRoot(root);
    }
  });

  test("refuses a binary that does not match the svc.sha256 beside it, before changing anything", () => {
    const dir = fs.mkdtempSync(join(tmpdir(), "svc-bad-binary-"));
    const root = stagingRoot();
    try {
      const binary = join(dir, "svc");
      fs.copyFileSync(releaseBinary(), binary);
      fs.chmodSync(binary, 0o755);
      fs.writeFileSync(`${binary}.sha256`, `${"0".repeat(64)}  svc\n`);
      const before = fs.readdirSync(root).sort();
      const r = run(["sh", INSTALL_SH, "--root", root, "--binary", binary]);
      expect(r.exitCode).toBe(1);
      expect(r.stderr).toContain("svc.sha256");
      expect(fs.readdirSync(root).sort()).toEqual(before);
    } finally {
      removeRoot(dir);
      removeRoot(root);
    }
  });

  test("refuses a binary that does not run here", () => {
    const dir = fs.mkdtempSync(join(tmpdir(), "svc-bad-binary-"));
    const root = stagingRoot();
    try {
      const binary = join(dir, "svc");
      fs.writeFileSync(binary, "#!/bin/sh\nexit 3\n", { mode: 0o755 });
      const r = run(["sh", INSTALL_SH, "--root", root, "--binary", binary]);
      expect(r.exitCode).toBe(1);
      expect(r.stderr).toContain("does not run here");
      expect(fs.existsSync(join(root, "usr"))).toBe(true); // only the staging root's own usr/sbin
      expect(fs.existsSync(join(root, "usr/local"))).toBe(false);
    } finally {
      removeRoot(dir);
      removeRoot(root);
    }
  });

  test("an unknown option, or --purge without --uninstall, is a usage error (exit 2)", () => {
    const root = stagingRoot();
    try {
      for (const args of [["--frobnicate"], ["--purge"], ["--root"]]) {
        const r = run(["sh", INSTALL_SH, ...args]);
        expect(r.exitCode).toBe(2);
        expect(r.stderr).toContain("--help");
      }
      expect(run(["sh", INSTALL_SH, "--help"]).exitCode).toBe(0);
    } finally {
      removeRoot(root);
    }
  });

  test("install.sh is POSIX sh: shellcheck finds nothing and dash parses it", () => {
    const sc = run(["shellcheck", "--shell=sh", "--severity=style", INSTALL_SH]);
    expect(sc.stdout + sc.stderr).toBe("");
    expect(sc.exitCode).toBe(0);
    expect(run(["dash", "-n", INSTALL_SH]).exitCode).toBe(0);
  });
});
