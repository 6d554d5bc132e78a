// install.sh --root into a staging tree without etc/passwd (how packages are built) still
// declares the svc user and its directories: a sysusers.d entry and a tmpfiles.d entry, which
// systemd-sysusers and systemd-tmpfiles turn into the same user and directories that an install
// on a host with accounts makes.

import { describe, expect, setDefaultTimeout, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { attrs, install, removeRoot, run, stagingRoot } from "./_helpers.ts";

// Each test runs install.sh or the binary, some build it first; a loaded machine is slow.
setDefaultTimeout(120_000);

describe("install.sh --root without accounts", () => {
  test("writes usr/lib/sysusers.d/svc.conf and usr/lib/tmpfiles.d/svc.conf, 0644", () => {
    const root = stagingRoot({ accounts: false });
    try {
      expect(install(root).exitCode).toBe(0);
      const sysusers = fs.readFileSync(join(root, "usr/lib/sysusers.d/svc.conf"), "utf8");
      expect(sysusers).toContain('u svc - "svc data store" /nonexistent /usr/sbin/nologin');
      const tmpfiles = fs.readFileSync(join(root, "usr/lib/tmpfiles.d/svc.conf"), "utf8");
      expect(tmpfiles).toContain("d /var/lib/svc 0750 svc svc -");
      expect(tmpfiles).toContain("d /var/backups/svc/wal 0750 svc svc -");
      for (const p of ["usr/lib/sysusers.d/svc.conf", "usr/lib/tmpfiles.d/svc.conf"]) expect(attrs(join(root, p)).mode).toBe("644");
    } finally {
      removeRoot(root);
    }
  });

  test("systemd-sysusers and systemd-tmpfiles make the svc user and /var/lib/svc 0750 svc:svc from them", () => {
    const root = stagingRoot({ accounts: false });
    try {
      expect(install(root).exitCode).toBe(0);
      fs.rmSync(join(root, "var/lib/svc"), { recursive: true });
      const users = run(["systemd-sysusers", "--root", root]);
      expect(users.exitCode).toBe(0);
      const user = fs.readFileSync(join(root, "etc/passwd"), "utf8").split("\n").find((l) => l.startsWith("svc:"));
      const [, , uid, gid, , home, shell] = (user ?? "").split(":");
      expect(Number(uid)).toBeLessThan(1000);
      expect({ home, shell }).toEqual({ home: "/nonexistent", shell: "/usr/sbin/nologin" });
      const dirs = run(["systemd-tmpfiles", "--root", root, "--create"]);
      expect(dirs.exitCode).toBe(0);
      expect(attrs(join(root, "var/lib/svc"))).toEqual({ mode: "750", uid: Number(uid), gid: Number(gid) });
    } finally {
      removeRoot(root);
    }
  });

  test("the config written before the accounts existed gets the svc group on the run after them (the package's post-install run)", () => {
    const root = stagingRoot({ accounts: false });
    try {
      expect(install(root).exitCode).toBe(0);
      expect(attrs(join(root, "etc/svc/config.toml"))).toEqual({ mode: "640", uid: 0, gid: 0 });
      expect(run(["systemd-sysusers", "--root", root]).exitCode).toBe(0);
      const group = fs.readFileSync(join(root, "etc/group"), "utf8").split("\n").find((l) => l.startsWith("svc:"));
      const r = install(root);
      expect(r.exitCode).toBe(0);
      expect(r.stdout).toContain("group svc on /etc/svc/config.toml");
      expect(attrs(join(root, "etc/svc/config.toml"))).toEqual({ mode: "640", uid: 0, gid: Number((group ?? "").split(":")[2]) });
      // And the run after changes nothing.
      expect(install(root).stdout).not.toContain("group svc on");
    } finally {
      removeRoot(root);
    }
  });

  test("--uninstall removes both entries", () => {
    const root = stagingRoot({ accounts: false });
    try {
      expect(install(root).exitCode).toBe(0);
      expect(install(root, "--uninstall").exitCode).toBe(0);
      expect(fs.existsSync(join(root, "usr/lib/sysusers.d/svc.conf"))).toBe(false);
      expect(fs.existsSync(join(root, "usr/lib/tmpfiles.d/svc.conf"))).toBe(false);
    } finally {
      removeRoot(root);
    }
  });
});
