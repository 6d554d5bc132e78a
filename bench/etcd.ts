// Three etcd members on loopback, the reference the cluster benchmark compares svc with.
// Driven through etcd's v3 HTTP/JSON gateway (keys and values base64), so both systems pay
// the same HTTP + JSON client cost; a range read is linearizable by default there.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./_lib.ts";
import type { Target } from "./cluster.ts";

export const etcdInstallHint = "install etcd (Debian: `apt-get install -y etcd-server`) for the side-by-side rows";

/** The etcd binary on PATH, or null. */
export function etcdBinary(): string | null {
  return Bun.which("etcd");
}

export async function startEtcdTarget(etcd: string, size = 3): Promise<Target> {
  const dir = mkdtempSync(join(tmpdir(), "svc-bench-etcd-"));
  const members: { name: string; client: number; peer: number }[] = [];
  for (let i = 0; i < size; i++) members.push({ name: `etcd${i + 1}`, client: await freePort(), peer: await freePort() });
  const url = (port: number): string => `http://127.0.0.1:${port}`;
  const initialCluster = members.map((m) => `${m.name}=${url(m.peer)}`).join(",");
  const procs = members.map((m) =>
    Bun.spawn([
      etcd,
      "--name", m.name,
      "--data-dir", join(dir, m.name),
      "--listen-client-urls", url(m.client),
      "--advertise-client-urls", url(m.client),
      "--listen-peer-urls", url(m.peer),
      "--initial-advertise-peer-urls", url(m.peer),
      "--initial-cluster", initialCluster,
      "--initial-cluster-state", "new",
      "--initial-cluster-token", `svc-bench-${process.pid}`,
      "--logger", "zap",
      "--log-level", "error",
    ], { stdout: "ignore", stderr: Bun.file(join(dir, `${m.name}.log`)) }),
  );
  const stop = async (): Promise<void> => {
    for (const p of procs) p.kill("SIGTERM");
    await Promise.all(procs.map((p) => p.exited));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const clients = members.map((m) => url(m.client));
    const findLeader = async (): Promise<number> => {
      const statuses = await Promise.all(clients.map((c) => waitStatus(c, 60_000)));
      const leaderId = statuses[0]?.leader;
      const leader = statuses.findIndex((s) => s.header.member_id === leaderId);
      if (leader < 0) throw new Error(`etcd reports leader ${leaderId}, not one of its members`);
      return leader;
    };
    const version = (await waitStatus(clients[0] ?? "", 60_000)).version;
    let written = 0;
    let next = 0;
    const readBody = (): string => JSON.stringify({ key: base64(`k${1 + Math.floor(Math.random() * Math.max(1, written))}`) });
    return {
      name: "etcd",
      about: `etcd ${version}: ${etcd}`,
      pids: procs.map((p) => p.pid),
      findLeader,
      write: (leader) => ({
        url: `${clients[leader]}/v3/kv/put`,
        body: () => JSON.stringify({ key: base64(`k${(written = ++next)}`), value: valueBase64 }),
      }),
      read: (member) => {
        if (member !== "all") return { url: `${clients[member]}/v3/kv/range`, body: readBody };
        let turn = 0;
        return { url: () => `${clients[turn++ % clients.length]}/v3/kv/range`, body: readBody };
      },
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}

interface EtcdStatus {
  version: string;
  leader: string;
  header: { member_id: string };
}

/** Poll a member's status until it reports a leader (member ids are uint64 decimal strings). */
async function waitStatus(client: string, timeoutMs: number): Promise<EtcdStatus> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const r = await fetch(`${client}/v3/maintenance/status`, { method: "POST", body: "{}" });
      if (r.ok) {
        const s = (await r.json()) as Partial<EtcdStatus>;
        if (s.leader !== undefined && s.leader !== "0" && s.header?.member_id !== undefined) return s as EtcdStatus;
      }
    } catch {
      // not up yet
    }
    await Bun.sleep(100);
  }
  throw new Error(`etcd at ${client} had no leader within ${timeoutMs} ms`);
}

const base64 = (s: string): string => Buffer.from(s).toString("base64");
const valueBase64 = base64("v".repeat(256));
