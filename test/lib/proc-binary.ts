// The compiled svc binary that process tests drive, and one-shot runs of it.
// ensureBinary() rebuilds dist/svc with the release build script when it is missing or older
// than any source file, at most once per test process; SVC_BIN points the tests at another
// binary (a release artefact, say) and skips the build.

import * as fs from "node:fs";
import { join, resolve } from "node:path";
import { beforeAll } from "bun:test";
import type { Subprocess } from "bun";
import { withinDeadline } from "./proc-http.ts";
import { trackProcess, untrackProcess, withPdeathsig } from "./proc-registry.ts";

export const REPO_DIR = resolve(import.meta.dir, "../..");

/** What the binary is built from: a change to any of these makes dist/svc stale. */
const BUILD_INPUTS = ["src", "package.json", "build/build.ts"];

let binaryPath: string | undefined;

/** Bound on one build of the binary (about 3 s alone; much more on a busy 2-core machine). */
export const buildDeadlineMs = 180_000;

/** Build (if stale) before the file's tests, under a hook timeout that a build fits in. */
export function useCompiledBinary(): void {
  beforeAll(() => {
    ensureBinary();
  }, buildDeadlineMs);
}

export function ensureBinary(): string {
  if (binaryPath !== undefined) return binaryPath;
  const override = process.env.SVC_BIN;
  if (override !== undefined && override !== "") {
    const path = resolve(override);
    if (!fs.existsSync(path)) throw new Error(`SVC_BIN=${override} does not exist`);
    binaryPath = path;
    return path;
  }
  const target = join(REPO_DIR, "dist", "svc");
  if (!isFresh(target)) build(target);
  binaryPath = target;
  return target;
}

function isFresh(binary: string): boolean {
  let binaryMtimeMs: number;
  try {
    binaryMtimeMs = fs.statSync(binary).mtimeMs;
  } catch {
    return false;
  }
  return BUILD_INPUTS.every((input) => newestMtimeMs(join(REPO_DIR, input)) <= binaryMtimeMs);
}

function newestMtimeMs(path: string): number {
  const st = fs.statSync(path, { throwIfNoEntry: false });
  if (st === undefined) return 0;
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = st.mtimeMs;
  for (const name of fs.readdirSync(path)) newest = Math.max(newest, newestMtimeMs(join(path, name)));
  return newest;
}

/**
 * Build into a private directory beside dist/svc, then rename into place: a test process that
 * is running the old binary (or a concurrent build) never sees a half-written file.
 */
function build(target: string): void {
  const distDir = join(target, "..");
  fs.mkdirSync(distDir, { recursive: true });
  const outDir = fs.mkdtempSync(join(distDir, ".build-"));
  process.stderr.write(`test harness: dist/svc is missing or older than its sources; building it (bun run build)\n`);
  try {
    const r = Bun.spawnSync([process.execPath, "run", "build", "--outdir", outDir], {
      cwd: REPO_DIR,
      env: { ...process.env, NO_COLOR: "1" },
      stdout: "pipe",
      stderr: "pipe",
      timeout: buildDeadlineMs,
    });
    if (r.exitCode !== 0) {
      throw new Error(`bun run build failed (exit ${r.exitCode}${r.signalCode === undefined ? "" : `, signal ${r.signalCode}`}):\n${r.stdout.toString()}\n${r.stderr.toString()}`);
    }
    fs.renameSync(join(outDir, "svc"), target);
    fs.renameSync(join(outDir, "svc.sha256"), `${target}.sha256`);
  } finally {
    fs.rmSync(outDir, { recursive: true, force: true });
  }
}

export interface RunResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  env?: Record<string, string>;
  cwd?: string;
  /** The run is killed and reported if it has not exited by then. */
  deadlineMs?: number;
  /** Run the binary as another user (root only): `setpriv` arguments are added for it. */
  runAs?: { user: string; group: string };
  /** argv[0] to use instead of the binary (a symlink to it, say). */
  executable?: string;
}

/** Run the binary once to completion (a command expected to exit) and collect its output. */
export async function runBinary(args: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  const exe = options.executable ?? ensureBinary();
  const argv = withPdeathsig([exe, ...args], options.runAs);
  const proc: Subprocess<"ignore", "pipe", "pipe"> = Bun.spawn(argv, {
    cwd: options.cwd ?? REPO_DIR,
    env: { ...process.env, NO_COLOR: "1", ...options.env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  trackProcess(proc);
  try {
    const stdout = new Response(proc.stdout).text();
    const stderr = new Response(proc.stderr).text();
    const deadlineMs = options.deadlineMs ?? 30_000;
    const outcome = await withinDeadline(proc.exited, deadlineMs);
    if (outcome === "expired") {
      proc.kill("SIGKILL");
      await proc.exited;
      throw new Error(`\`svc ${args.join(" ")}\` had not exited after ${deadlineMs} ms; stdout:\n${await stdout}\nstderr:\n${await stderr}`);
    }
    return { exitCode: outcome, stdout: await stdout, stderr: await stderr };
  } finally {
    untrackProcess(proc);
  }
}
