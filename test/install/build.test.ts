// `bun run build`: one executable with the version and commit stamped in, and its checksum.

import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pkg from "../../package.json" with { type: "json" };
import { freshBuild, REPO, removeFreshBuild, removeRoot, run } from "./_helpers.ts";

// Each test runs install.sh or the binary, some build it first; a loaded machine is slow.
setDefaultTimeout(120_000);

/** What the build stamps: the short commit of HEAD, or "unknown" outside a git checkout. */
function headCommit(): string {
  const r = run(["git", "rev-parse", "--short=12", "HEAD"]);
  return r.exitCode === 0 ? r.stdout.trim() : "unknown";
}

describe("bun run build", () => {
  afterAll(removeFreshBuild);

  test("the binary reports the package version and the git commit it was built from", () => {
    const r = run([freshBuild().binary, "--version"]);
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toStartWith(`svc ${pkg.version} (${headCommit()}`);
  }, 120_000);

  test("writes svc.sha256 beside the binary, which sha256sum -c accepts", () => {
    const { dir } = freshBuild();
    expect(fs.readFileSync(join(dir, "svc.sha256"), "utf8")).toMatch(/^[0-9a-f]{64} {2}svc\n$/);
    const r = run(["sha256sum", "-c", "svc.sha256"], { cwd: dir });
    expect(r.stdout.trim()).toBe("svc: OK");
    expect(r.exitCode).toBe(0);
  });

  test("SVC_VERSION and SVC_COMMIT stamp a release's own version and commit", () => {
    const dir = fs.mkdtempSync(join(tmpdir(), "svc-release-stamp-"));
    try {
      const b = run([process.execPath, "run", "build", "--outdir", dir], { cwd: REPO, env: { SVC_VERSION: "9.8.7", SVC_COMMIT: "0123456789ab" } });
      expect(b.exitCode).toBe(0);
      expect(run([join(dir, "svc"), "--version"]).stdout).toStartWith("svc 9.8.7 (0123456789ab)");
    } finally {
      removeRoot(dir);
    }
  }, 120_000);

  test("the binary acts as `svc admin` when invoked through a link named svc-admin", () => {
    const { dir, binary } = freshBuild();
    const link = join(fs.mkdtempSync(join(tmpdir(), "svc-admin-link-")), "svc-admin");
    try {
      fs.symlinkSync(binary, link);
      const r = run([link, "cleanup-wal-archive", "--dir", dir, "--dry-run"]);
      expect(r.stderr).toBe("");
      expect(r.stdout).toContain("cleanup-wal-archive (dry run)");
    } finally {
      removeRoot(join(link, ".."));
    }
  });
});
