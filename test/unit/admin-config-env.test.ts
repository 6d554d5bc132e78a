// SVC_CONFIG names the configuration file for every `svc admin` command, as --config does: the
// node's admin address and the token to send come from it; --config and --node still win. A
// stand-in for the node's admin port records what each command sent.

import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Server } from "bun";
import { createToken } from "../../src/http/index.ts";

// Each test starts svc as a process; on a loaded machine that can take seconds.
setDefaultTimeout(60_000);

const REPO = resolve(import.meta.dir, "../..");

let dir: string;
let tokensPath: string;
/** Two stand-in nodes: `envNode` is the one SVC_CONFIG names, `flagNode` the one a flag names. */
let envNode: StandIn;
let flagNode: StandIn;
let envConfig: string;
let flagConfig: string;
let token: string;

interface StandIn {
  server: Server<undefined>;
  requests: { path: string; authorization: string | null }[];
}

function standIn(name: string): StandIn {
  const requests: StandIn["requests"] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(request) {
      const url = new URL(request.url);
      requests.push({ path: url.pathname, authorization: request.headers.get("authorization") });
      if (url.pathname === "/admin/stats") return Response.json({ node_id: name, total_entries: 7, tables: [] });
      if (url.pathname === "/admin/cluster-info") return Response.json({ node_id: name });
      return Response.json({ error: { code: "NOT_FOUND", message: `no ${url.pathname}` } }, { status: 404 });
    },
  });
  return { server, requests };
}

function configFor(node: StandIn, name: string, tokenFile: string): string {
  const path = join(dir, `${name}.toml`);
  fs.writeFileSync(path, [
    `node_id = "${name}"`,
    `data_dir = "${join(dir, name)}"`,
    "[listen]",
    `admin = "127.0.0.1:${node.server.port}"`,
    "[auth]",
    `tokens_file = "${tokensPath}"`,
    `token_file = "${tokenFile}"`,
    "",
  ].join("\n"));
  return path;
}

async function svc(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  const base: Record<string, string | undefined> = { ...process.env, NO_COLOR: "1" };
  delete base.SVC_CONFIG;
  delete base.SVC_TOKEN;
  // Asynchronous, so that the stand-ins in this process can answer while svc runs.
  const proc = Bun.spawn([process.execPath, "src/main.ts", ...args], { cwd: REPO, env: { ...base, ...env }, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

beforeAll(() => {
  dir = fs.mkdtempSync(join(tmpdir(), "svc-config-env-"));
  tokensPath = join(dir, "tokens");
  token = createToken(tokensPath, "admin", "ops");
  const tokenFile = join(dir, "token");
  fs.writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
  envNode = standIn("env-node");
  flagNode = standIn("flag-node");
  envConfig = configFor(envNode, "env-node", tokenFile);
  flagConfig = configFor(flagNode, "flag-node", tokenFile);
});

afterAll(() => {
  envNode.server.stop(true);
  flagNode.server.stop(true);
  fs.rmSync(dir, { recursive: true, force: true });
});

describe("SVC_CONFIG for the admin commands that talk to a node", () => {
  test("stats asks the admin address in the file SVC_CONFIG names, with its token", async () => {
    envNode.requests.length = 0;
    const r = await svc(["admin", "stats", "--json"], { SVC_CONFIG: envConfig });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ node_id: "env-node", total_entries: 7 });
    expect(envNode.requests).toEqual([{ path: "/admin/stats", authorization: `Bearer ${token}` }]);
  });

  test("cluster-info follows SVC_CONFIG too", async () => {
    const r = await svc(["admin", "cluster-info"], { SVC_CONFIG: envConfig });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ node_id: "env-node" });
  });

  test("--config wins over SVC_CONFIG", async () => {
    const r = await svc(["admin", "stats", "--json", "--config", flagConfig], { SVC_CONFIG: envConfig });
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ node_id: "flag-node" });
  });

  test("--node wins over the admin address in SVC_CONFIG", async () => {
    const r = await svc(["admin", "stats", "--json", "--node", `http://127.0.0.1:${flagNode.server.port}`], { SVC_CONFIG: envConfig });
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ node_id: "flag-node" });
  });

  test("SVC_CONFIG naming a missing file says so and where the name came from, exit 2", async () => {
    const missing = join(dir, "absent.toml");
    const r = await svc(["admin", "stats"], { SVC_CONFIG: missing });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`no configuration file at ${missing} (SVC_CONFIG)`);
  });
});

describe("SVC_CONFIG for the admin commands that work on files", () => {
  test("token list reads the tokens file named in the file SVC_CONFIG names", async () => {
    const r = await svc(["admin", "token", "list", "--json"], { SVC_CONFIG: envConfig });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject([{ name: "ops", role: "admin" }]);
  });
});
