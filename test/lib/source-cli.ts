// Runs svc from source (src/main.ts) as a command, for tests of the offline tools: its exit
// code and output, with SVC_CONFIG pointed at a file that does not exist in `dir` (so that no
// configuration of the machine is read).

import { join, resolve } from "node:path";

const REPO = resolve(import.meta.dir, "../..");

export interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

export function runSource(args: string[], dir: string): Ran {
  const r = Bun.spawnSync([process.execPath, "src/main.ts", ...args], {
    cwd: REPO,
    env: { ...process.env, NO_COLOR: "1", SVC_CONFIG: join(dir, "absent.toml") },
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: r.exitCode ?? -1, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}
