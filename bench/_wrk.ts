// Driving wrk (Debian package wrk) when it is installed: a load generator in C costs the
// two shared cores far less than one in JavaScript, so more of them go to the node measured.

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LoadResult } from "./_lib.ts";

export function wrkPath(): string | null {
  return Bun.which("wrk");
}

/** POST the same JSON body with `clients` connections for `durationMs`; figures from wrk's report. */
export async function runWrk(wrk: string, url: string, body: string, clients: number, durationMs: number): Promise<LoadResult> {
  const dir = mkdtempSync(join(tmpdir(), "svc-wrk-"));
  try {
    const script = join(dir, "post.lua");
    writeFileSync(script, [
      `wrk.method = "POST"`,
      `wrk.body = ${JSON.stringify(body)}`,
      `wrk.headers["Content-Type"] = "application/json"`,
      "",
    ].join("\n"));
    const proc = Bun.spawn([wrk, "-t1", `-c${clients}`, `-d${Math.max(1, Math.round(durationMs / 1000))}s`, "--latency", "-s", script, url], {
      stdout: "pipe", stderr: "pipe",
    });
    const out = await new Response(proc.stdout).text();
    await proc.exited;
    const number = (re: RegExp): number => Number(re.exec(out)?.[1] ?? Number.NaN);
    const ms = (re: RegExp): number => {
      const m = re.exec(out);
      if (m === null) return Number.NaN;
      const v = Number(m[1]);
      return m[2] === "us" ? v / 1000 : m[2] === "s" ? v * 1000 : v;
    };
    const total = number(/(\d+) requests in/);
    const non2xx = number(/Non-2xx or 3xx responses: (\d+)/);
    const errors = Number.isNaN(non2xx) ? 0 : non2xx;
    return {
      ops: total - errors,
      errors,
      opsPerSecond: number(/Requests\/sec:\s+([\d.]+)/) * ((total - errors) / Math.max(1, total)),
      p50Ms: ms(/50%\s+([\d.]+)(us|ms|s)/),
      p99Ms: ms(/99%\s+([\d.]+)(us|ms|s)/),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
