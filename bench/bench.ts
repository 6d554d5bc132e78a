// `bun run bench`: prints throughput and latency figures. Not a test: nothing is asserted.
//   --duration S   seconds per load row (default 10)
//   --rows N       rows for the memory figure (default 1,000,000)
//   --source       run src/main.ts with bun instead of the compiled dist/svc

import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { benchSingle } from "./single.ts";

const { values } = parseArgs({
  options: {
    duration: { type: "string", default: "10" },
    rows: { type: "string", default: "1000000" },
    source: { type: "boolean", default: false },
  },
});

const repo = resolve(import.meta.dir, "..");
const compiled = join(repo, "dist", "svc");
let bin: string[];
if (values.source) bin = [process.execPath, join(repo, "src", "main.ts")];
else {
  if (!existsSync(compiled)) {
    const build = Bun.spawnSync([process.execPath, "run", "build"], { cwd: repo, stdout: "inherit", stderr: "inherit" });
    if (build.exitCode !== 0) process.exit(1);
  }
  bin = [compiled];
}
process.stdout.write(`svc benchmark: ${bin.join(" ")}; ${navigator.hardwareConcurrency} cores\n`);
await benchSingle({ durationMs: Number(values.duration) * 1000, bin, rows: Number(values.rows) });
