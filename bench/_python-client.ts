// One client in Python (http.client, keep-alive): the load a common non-JavaScript client
// makes, so the single-node figures show svc as such clients see it. Python sends the headers
// and the body of a request in separate writes and leaves Nagle on, unlike Bun's fetch and wrk.

import { summarize, type LoadResult } from "./_lib.ts";

const script = `
import http.client, json, sys, time
host, port, path, body, seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5])
c = http.client.HTTPConnection(host, port)
lat = []; errors = 0
deadline = time.perf_counter() + seconds
started = time.perf_counter()
while time.perf_counter() < deadline:
    t = time.perf_counter()
    c.request("POST", path, body, {"content-type": "application/json"})
    r = c.getresponse(); r.read()
    if r.status == 200: lat.append((time.perf_counter() - t) * 1000)
    else: errors += 1
print(json.dumps({"latencies": lat, "errors": errors, "elapsedMs": (time.perf_counter() - started) * 1000}))
`;

export function pythonPath(): string | null {
  return Bun.which("python3");
}

/** One keep-alive client POSTing `body` to `url` for `durationMs`, closed loop. */
export async function runPythonClient(python: string, url: string, body: string, durationMs: number): Promise<LoadResult> {
  const u = new URL(url);
  const proc = Bun.spawn([python, "-c", script, u.hostname, u.port, u.pathname, body, String(durationMs / 1000)], { stdout: "pipe", stderr: "pipe" });
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  if ((await proc.exited) !== 0) throw new Error(`the python client failed: ${err.slice(0, 500)}`);
  const r = JSON.parse(out) as { latencies: number[]; errors: number; elapsedMs: number };
  return summarize(r.latencies, r.errors, r.elapsedMs);
}
