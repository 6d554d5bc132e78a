// Every process the harness starts is recorded here so that none outlives the tests: each
// test file kills what it started in afterAll (useProcessCleanup), the test process kills
// the rest when it exits, and children are started under `setpriv --pdeathsig KILL` so the
// kernel kills them even when the test process itself is killed with SIGKILL.

import * as fs from "node:fs";
import { afterAll } from "bun:test";
import type { Subprocess } from "bun";

type Child = Pick<Subprocess, "pid" | "kill" | "exited" | "exitCode" | "signalCode">;

const live = new Set<Child>();

export function trackProcess(proc: Child): void {
  live.add(proc);
  void proc.exited.then(() => live.delete(proc));
}

export function untrackProcess(proc: Child): void {
  live.delete(proc);
}

/** SIGKILL every process the harness started that is still running, and wait for them. */
export async function killAllStarted(): Promise<void> {
  const running = [...live];
  for (const proc of running) {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
  }
  await Promise.all(running.map((p) => p.exited));
  live.clear();
}

let exitHookInstalled = false;

/** Call at the top of a test file that starts processes. */
export function useProcessCleanup(): void {
  afterAll(killAllStarted);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    for (const proc of live) {
      try {
        proc.kill("SIGKILL");
      } catch {
        // already gone
      }
    }
  });
}

const setprivPath = ["/usr/bin/setpriv", "/bin/setpriv"].find((p) => fs.existsSync(p));

/**
 * argv wrapped so that the child dies with the test process (PR_SET_PDEATHSIG through
 * setpriv, which then execs the binary: the pid stays the binary's), optionally as another user.
 */
export function withPdeathsig(argv: readonly string[], runAs?: { user: string; group: string }): string[] {
  if (setprivPath === undefined) {
    if (runAs !== undefined) throw new Error("running as another user needs setpriv (util-linux)");
    return [...argv];
  }
  const creds = runAs === undefined ? [] : [`--reuid=${runAs.user}`, `--regid=${runAs.group}`, "--clear-groups"];
  return [setprivPath, "--pdeathsig", "KILL", ...creds, "--", ...argv];
}
