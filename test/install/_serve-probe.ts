// Run by serve.test.ts inside a private network and mount namespace (see _host-view.ts): starts
// the installed node exactly as its unit does, as svc, waits for GET /health on 9090 to answer,
// asks 7878 too, stops the node with SIGTERM and prints one JSON line with what it saw.
// The namespace has its own loopback, so the fixed ports cannot collide with anything else.

export {}; // a module, for top-level await

const [uid, gid] = process.argv.slice(2);
const HEALTH_DEADLINE_MS = 60_000;
const EXIT_DEADLINE_MS = 30_000;

const node = Bun.spawn(
  ["setpriv", `--reuid=${uid}`, `--regid=${gid}`, "--clear-groups", "--", "/usr/local/bin/svc", "serve", "--config", "/etc/svc/config.toml"],
  { env: { ...process.env, RUST_LOG: "info", NO_COLOR: "1" }, stdout: "ignore", stderr: "pipe" },
);
let log = "";
void (async () => {
  for await (const chunk of node.stderr) log += new TextDecoder().decode(chunk);
})();

async function firstAnswer(url: string): Promise<Response | string> {
  const until = Date.now() + HEALTH_DEADLINE_MS;
  for (;;) {
    if (node.exitCode !== null) return `svc serve exited ${node.exitCode} before answering`;
    try {
      return await fetch(url, { signal: AbortSignal.timeout(2000) });
    } catch {
      if (Date.now() > until) return `no answer from ${url} within ${HEALTH_DEADLINE_MS} ms`;
      await Bun.sleep(50);
    }
  }
}

const result: Record<string, unknown> = {};
const admin = await firstAnswer("http://127.0.0.1:9090/health");
if (typeof admin === "string") {
  result.error = admin;
} else {
  result.adminStatus = admin.status;
  result.adminBody = await admin.json();
  const client = await firstAnswer("http://127.0.0.1:7878/health");
  result.clientStatus = typeof client === "string" ? client : client.status;
}
node.kill("SIGTERM");
result.exitCode = await Promise.race([node.exited, Bun.sleep(EXIT_DEADLINE_MS).then(() => "still running after SIGTERM")]);
if (typeof result.exitCode === "string") node.kill("SIGKILL");
result.log = log;
process.stdout.write(`${JSON.stringify(result)}\n`);
process.exit(0); // the deadline timer of the race above would otherwise keep the process alive
