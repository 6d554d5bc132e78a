// Three svc nodes on loopback (fsync on, the defaults) as a benchmark target: temp dirs,
// free ports, the configuration dev-cluster uses (every member listed, only the first
// bootstraps), a kv table, and the leader found through GET /health on the admin ports.

import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { devSecurity } from "../src/cli/_dev-certs.ts";
import { freePort, startSvc, waitHealthy, type Ports } from "./_lib.ts";
import type { Target } from "./cluster.ts";

const value = "v".repeat(256);

export async function startSvcTarget(bin: string[], size = 3, secure = false): Promise<Target> {
  const dir = mkdtempSync(join(tmpdir(), "svc-bench-cluster-"));
  const members: (Ports & { id: string })[] = [];
  for (let i = 0; i < size; i++) members.push({ id: `node${i + 1}`, client: await freePort(), admin: await freePort(), peer: await freePort() });
  // --secure: TLS on the client and admin ports, mutual TLS between peers and tokens, with the
  // certificates and the admin token `svc dev-cluster --secure` makes; the load sends that
  // token over TLS.
  const security = secure ? devSecurity(dir) : null;
  const http = security === null ? undefined : { ca: readFileSync(security.tls.caFile, "utf8"), token: readFileSync(security.adminTokenFile, "utf8").trim() };
  const init: BunFetchRequestInit = http === undefined ? {} : { tls: { ca: http.ca }, headers: { authorization: `Bearer ${http.token}` } };
  const scheme = secure ? "https" : "http";
  const procs = members.map((m, i) => startSvc(bin, dir, m.id, m, members, i === 0, security === null ? {} : { tls: security.tls, auth: security.auth }));
  const stop = async (): Promise<void> => {
    for (const p of procs) p.kill("SIGTERM");
    await Promise.all(procs.map((p) => p.exited));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const clients = members.map((m) => `${scheme}://127.0.0.1:${m.client}`);
    const admins = members.map((m) => `${scheme}://127.0.0.1:${m.admin}`);
    // /health answers 200 only once a node has caught up with a known leader.
    await Promise.all(admins.map((a) => waitHealthy(a, 60_000, init)));
    const findLeader = (): Promise<number> => leaderOf(admins, 30_000, init);
    const created = await fetch(`${clients[await findLeader()]}/v1/execute`, {
      ...init,
      method: "POST",
      body: JSON.stringify({ statements: ["CREATE TABLE kv (k INTEGER PRIMARY KEY, v TEXT NOT NULL)"] }),
    });
    if (!created.ok) throw new Error(`CREATE TABLE failed: ${created.status} ${await created.text()}`);
    let written = 0;
    let next = 0;
    const readBody = (): string =>
      JSON.stringify({ sql: "SELECT v FROM kv WHERE k = ?", params: [1 + Math.floor(Math.random() * Math.max(1, written))], consistency: "linearizable" });
    return {
      name: secure ? "tls" : "svc",
      about: `${secure ? "tls" : "svc"}: ${bin.join(" ")}${secure ? " (TLS on every port, mutual between peers, and tokens)" : ""}`,
      ...(http === undefined ? {} : { http }),
      pids: procs.map((p) => p.pid),
      findLeader,
      write: (leader) => ({
        url: `${clients[leader]}/v1/execute`,
        body: () => JSON.stringify({ statements: [{ sql: "INSERT INTO kv (k, v) VALUES (?, ?)", params: [(written = ++next), value] }] }),
      }),
      read: (member) => {
        if (member !== "all") return { url: `${clients[member]}/v1/query`, body: readBody };
        let turn = 0;
        return { url: () => `${clients[turn++ % clients.length]}/v1/query`, body: readBody };
      },
      stop,
    };
  } catch (e) {
    // The logs go with the temp dir: show their ends first, they say why a node did not come up.
    for (const m of members) process.stderr.write(`--- ${m.id}.log (end)\n${logTail(join(dir, `${m.id}.log`))}\n`);
    await stop();
    throw e;
  }
}

function logTail(path: string): string {
  try {
    return readFileSync(path, "utf8").split("\n").slice(-15).join("\n");
  } catch {
    return "(no log)";
  }
}

async function leaderOf(admins: string[], timeoutMs: number, init: BunFetchRequestInit): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    for (const [i, admin] of admins.entries()) {
      const health = await fetch(`${admin}/health`, init).then((r) => r.json() as Promise<{ role?: string }>).catch(() => null);
      if (health?.role === "leader") return i;
    }
    await Bun.sleep(50);
  }
  throw new Error(`no leader among ${admins.join(", ")} within ${timeoutMs} ms`);
}
