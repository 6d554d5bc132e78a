// `svc dev-cluster`: three nodes on loopback, each with its own data directory and ports,
// for trying svc out. Ctrl-C stops them all; starting again resumes the same cluster.
// --secure turns on TLS and tokens with a CA, a certificate and an admin token made for it.

import { defineCommand } from "citty";
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { renderConfigToml } from "../config/index.ts";
import { devSecurity } from "./_dev-certs.ts";
import { usageError } from "./_exit.ts";

export interface DevNode {
  id: string;
  client: string;
  admin: string;
  peer: string;
}

/** Whether this is the compiled binary (its sources live in bun's embedded file system). */
function isCompiled(): boolean {
  return import.meta.url.includes("$bunfs");
}

/** How to run this same program again (the compiled binary, or bun with the entry script). */
export function selfCommand(): string[] {
  return isCompiled() ? [process.execPath] : [process.execPath, resolve(process.argv[1] ?? "src/main.ts")];
}

/**
 * What to type for `svc admin …` in the printed next steps: `svc admin` for the compiled binary
 * (installed on PATH), `npm run svc -- admin` in the source tree, where svc is not on PATH.
 */
export function adminCommandText(compiled: boolean = isCompiled()): string {
  return compiled ? "svc admin" : "npm run svc -- admin";
}

/** The lines printed once the nodes are started: their addresses and what to try next. */
export function nextStepsText(dir: string, nodes: readonly DevNode[], admin: string, secure = false): string {
  const scheme = secure ? "https" : "http";
  // With --secure: trust the dev CA and send the admin token, as any client must.
  const curl = secure ? `curl -s --cacert ${join(dir, "ca.crt")} -H "Authorization: Bearer $(cat ${join(dir, "admin-token")})"` : "curl -s";
  const adminCall = secure ? `${admin} cluster-info --config ${join(dir, `${nodes[0]?.id}.toml`)}` : `${admin} cluster-info --node http://${nodes[0]?.admin}`;
  return `\nsvc dev cluster: ${nodes.length} nodes, data and configs in ${dir}${secure ? " (TLS and tokens: CA, certificate and admin token there too)" : ""}\n` +
    nodes.map((n) => `  ${n.id}: client ${scheme}://${n.client}  admin ${scheme}://${n.admin}  peer ${n.peer}\n`).join("") +
    `try:\n  ${curl} -XPOST ${scheme}://${nodes[0]?.client}/v1/execute -d '{"statements":["CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT)"]}'\n` +
    `  ${curl} -XPOST ${scheme}://${nodes[1]?.client}/v1/query -d '{"sql":"SELECT * FROM kv"}'\n` +
    `  ${adminCall}\n` +
    "Ctrl-C stops the cluster.\n\n";
}

export const devClusterCommand = defineCommand({
  meta: { name: "dev-cluster", description: "Run a three-node cluster on loopback (data in ./svc-dev-cluster)" },
  args: {
    dir: { type: "string", description: "Where the nodes keep their data and configs", default: "svc-dev-cluster", valueHint: "DIR" },
    nodes: { type: "string", description: "How many nodes (3 or 5)", default: "3" },
    secure: { type: "boolean", description: "TLS and tokens on the client and admin ports (a CA, a certificate and an admin token are made in --dir with openssl)" },
  },
  async run({ args }) {
    if (args.nodes !== "3" && args.nodes !== "5") throw usageError(`--nodes must be 3 or 5, got ${JSON.stringify(args.nodes)}`);
    const count = Number(args.nodes);
    const dir = resolve(args.dir);
    const nodes: DevNode[] = Array.from({ length: count }, (_, i) => ({
      id: `node${i + 1}`,
      client: `127.0.0.1:${7878 + 10 * i}`,
      admin: `127.0.0.1:${9090 + i}`,
      peer: `127.0.0.1:${7879 + 10 * i}`,
    }));
    mkdirSync(dir, { recursive: true });
    const security = args.secure === true ? devSecurity(dir) : null;
    const children: Bun.Subprocess[] = [];
    // Listening before anything starts: a SIGTERM that came the moment the next steps were
    // printed (a script that waits for them) found no handler, ended this process at once, and
    // left the three nodes running on their fixed ports.
    const stop = (): void => {
      for (const c of children) c.kill("SIGTERM");
    };
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
    for (const [i, node] of nodes.entries()) {
      const dataDir = join(dir, node.id);
      mkdirSync(dataDir, { recursive: true });
      const configPath = join(dir, `${node.id}.toml`);
      writeFileSync(configPath, renderConfigToml({
        nodeId: node.id,
        dataDir,
        listen: { client: node.client, admin: node.admin, peer: node.peer },
        // The first node creates the cluster; the others wait for it to send them the log.
        cluster: { bootstrap: i === 0, members: nodes.map((n) => ({ id: n.id, peer: n.peer, client: n.client, admin: n.admin })) },
        ...(security === null ? {} : { tls: security.tls, auth: security.auth }),
      }));
      const child = Bun.spawn([...selfCommand(), "serve", "--config", configPath], { stdout: "pipe", stderr: "pipe" });
      children.push(child);
      void relay(node.id, child.stdout);
      void relay(node.id, child.stderr);
    }
    process.stdout.write(nextStepsText(dir, nodes, adminCommandText(), security !== null));
    const codes = await Promise.all(children.map((c) => c.exited));
    if (codes.some((c) => c !== 0 && c !== 143 && c !== 130)) process.exitCode = 1;
  },
});

async function relay(id: string, stream: ReadableStream<Uint8Array>): Promise<void> {
  const decoder = new TextDecoder();
  let pending = "";
  for await (const chunk of stream) {
    pending += decoder.decode(chunk, { stream: true });
    const lines = pending.split("\n");
    pending = lines.pop() ?? "";
    for (const line of lines) process.stderr.write(`[${id}] ${line}\n`);
  }
  if (pending !== "") process.stderr.write(`[${id}] ${pending}\n`);
}
