// Shared by the install tests: the release binary (built once per test run with the real build
// script), staging roots that look like a Debian host's /etc, install.sh runs, and a snapshot
// of a tree that tells whether anything changed.

import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { ensureBinary } from "../lib/proc-binary.ts";

export const REPO = resolve(import.meta.dir, "../..");
export const INSTALL_SH = join(REPO, "install.sh");
export const UNITS = [
  "svc.service",
  "svc-cleanup-snapshots.service",
  "svc-cleanup-snapshots.timer",
  "svc-cleanup-wal-archive.service",
  "svc-cleanup-wal-archive.timer",
  "svc-backup-full.service",
  "svc-backup-full.timer",
  "svc-backup-offsite.service",
  "svc-backup-offsite.timer",
] as const;

export interface Run {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** Runs a command to completion; its output is collected, never inherited. */
export function run(argv: string[], options: { cwd?: string; env?: Record<string, string> } = {}): Run {
  const r = Bun.spawnSync(argv, {
    cwd: options.cwd ?? REPO,
    env: { ...process.env, NO_COLOR: "1", ...options.env },
    stdout: "pipe",
    stderr: "pipe",
  });
  return { exitCode: r.exitCode ?? -1, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

// One build per test process, into a temp dir, for the tests of the build itself: it must
// carry the commit of the tree as it is now.
let built: { dir: string; binary: string } | undefined;

/** Builds a release (svc, svc.sha256) into a temp dir with `bun run build --outdir`. */
export function freshBuild(): { dir: string; binary: string } {
  if (built !== undefined) return built;
  const dir = fs.mkdtempSync(join(tmpdir(), "svc-release-"));
  const r = run([process.execPath, "run", "build", "--outdir", dir]);
  if (r.exitCode !== 0) throw new Error(`bun run build failed (exit ${r.exitCode}):\n${r.stdout}\n${r.stderr}`);
  built = { dir, binary: join(dir, "svc") };
  return built;
}

/** Removes the fresh build (a test file's afterAll: the runner does not emit process "exit"). */
export function removeFreshBuild(): void {
  if (built !== undefined) fs.rmSync(built.dir, { recursive: true, force: true });
  built = undefined;
}

let pinned: string | undefined;

/**
 * The binary that install.sh installs in these tests: dist/svc, built by the shared harness
 * when stale (or SVC_BIN, to test a release artefact), pinned for this test process as a hard
 * link beside it with its own svc.sha256. Another test process may rebuild dist/svc meanwhile;
 * a rerun of install.sh must still see the same binary.
 */
export function releaseBinary(): string {
  if (pinned !== undefined) return pinned;
  const source = ensureBinary();
  const distDir = join(REPO, "dist");
  fs.mkdirSync(distDir, { recursive: true });
  for (const name of fs.readdirSync(distDir)) {
    const pid = /^\.install-tests-(\d+)$/.exec(name)?.[1];
    if (pid !== undefined && !processAlive(Number(pid))) fs.rmSync(join(distDir, name), { recursive: true, force: true });
  }
  const dir = join(distDir, `.install-tests-${process.pid}`);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir);
  const target = join(dir, "svc");
  try {
    fs.linkSync(source, target);
  } catch {
    fs.copyFileSync(source, target); // another filesystem (SVC_BIN elsewhere)
    fs.chmodSync(target, 0o755);
  }
  const digest = createHash("sha256").update(fs.readFileSync(target)).digest("hex");
  fs.writeFileSync(`${target}.sha256`, `${digest}  svc\n`);
  pinned = target;
  return target;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * A temp dir standing for a target host's root: world-traversable (so the svc user can reach the
 * binary and its files through it) with the account files a Debian base system has.
 */
export function stagingRoot(options: { accounts: boolean } = { accounts: true }): string {
  const root = fs.mkdtempSync(join(tmpdir(), "svc-root-"));
  fs.chmodSync(root, 0o755);
  if (options.accounts) {
    fs.mkdirSync(join(root, "etc"), { recursive: true });
    fs.writeFileSync(join(root, "etc/passwd"), "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
    fs.writeFileSync(join(root, "etc/group"), "root:x:0:\nnogroup:x:65534:\n");
    fs.writeFileSync(join(root, "etc/shadow"), "root:*:19000:0:99999:7:::\nnobody:*:19000:0:99999:7:::\n", { mode: 0o640 });
    fs.writeFileSync(join(root, "etc/gshadow"), "root:*::\nnogroup:*::\n", { mode: 0o640 });
    fs.mkdirSync(join(root, "usr/sbin"), { recursive: true });
    fs.copyFileSync("/usr/sbin/nologin", join(root, "usr/sbin/nologin"));
    fs.chmodSync(join(root, "usr/sbin/nologin"), 0o755);
  }
  return root;
}

export function removeRoot(root: string): void {
  fs.rmSync(root, { recursive: true, force: true });
}

/** install.sh --root ROOT --binary <release binary> ARGS..., run by /bin/sh (dash on Debian). */
export function install(root: string, ...args: string[]): Run {
  return run(["sh", INSTALL_SH, "--root", root, "--binary", releaseBinary(), ...args]);
}

/** Numeric uid and gid that a staging root's account files give `name`. */
export function accountIds(root: string, name: string): { uid: number; gid: number } {
  const passwd = fs.readFileSync(join(root, "etc/passwd"), "utf8").split("\n").map((l) => l.split(":"));
  const user = passwd.find((f) => f[0] === name);
  if (user === undefined) throw new Error(`no user ${name} in ${root}/etc/passwd`);
  return { uid: Number(user[2]), gid: Number(user[3]) };
}

/**
 * Everything about every path under a root that an install could change: type, mode, owner,
 * modification time, content (or link target). Two equal snapshots mean nothing was changed.
 */
export function treeSnapshot(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (dir: string): void => {
    for (const name of fs.readdirSync(dir).sort()) {
      const path = join(dir, name);
      const st = fs.lstatSync(path);
      let content = "";
      if (st.isSymbolicLink()) content = `-> ${fs.readlinkSync(path)}`;
      else if (st.isFile()) content = createHash("sha256").update(fs.readFileSync(path)).digest("hex");
      out[path.slice(root.length)] = `${(st.mode & 0o177777).toString(8)} ${st.uid}:${st.gid} ${st.mtimeMs} ${content}`;
      if (st.isDirectory()) walk(path);
    }
  };
  walk(root);
  return out;
}

/** Mode bits (permissions only) and owner of a path, for assertions that read like `ls -l`. */
export function attrs(path: string): { mode: string; uid: number; gid: number } {
  const st = fs.lstatSync(path);
  return { mode: (st.mode & 0o7777).toString(8), uid: st.uid, gid: st.gid };
}

/** The uid and gid of nobody, for running something as an unprivileged user. */
export const NOBODY = { uid: 65534, gid: 65534 } as const;

export function asUser(user: { uid: number; gid: number }, argv: readonly string[]): string[] {
  return ["setpriv", `--reuid=${user.uid}`, `--regid=${user.gid}`, "--clear-groups", "--", ...argv];
}
