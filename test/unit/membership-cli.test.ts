// The membership commands check what they can before asking a node: a node id or an address
// that no node could have is the command line's mistake (exit 2, naming the option), said
// before anything is announced or sent.

import { afterAll, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { join as joinPath, resolve } from "node:path";

const REPO = resolve(import.meta.dir, "../..");

/** svc from source with no configuration of the machine: neither SVC_CONFIG nor a token. */
function runSource(args: string[], cwd: string): { code: number; stderr: string } {
  const env: Record<string, string | undefined> = { ...process.env, NO_COLOR: "1" };
  delete env.SVC_CONFIG;
  delete env.SVC_TOKEN;
  const r = Bun.spawnSync([process.execPath, joinPath(REPO, "src/main.ts"), ...args], { cwd, env, stdout: "pipe", stderr: "pipe" });
  return { code: r.exitCode ?? -1, stderr: r.stderr.toString() };
}

const dir = fs.mkdtempSync(join(tmpdir(), "svc-membership-cli-"));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

// Port 1 on loopback: nothing answers there, so a command that asked a node would fail to reach it.
const unreachable = ["--node", "http://127.0.0.1:1"];
const good = ["--peer", "10.0.0.4:7879", "--client", "10.0.0.4:7878", "--admin", "10.0.0.4:9090"];

test("add-node with an id no node can have is refused before anything is sent", () => {
  const r = runSource(["admin", "add-node", ...unreachable, "--id", "node 4", ...good], dir);
  expect(r.code).toBe(2);
  expect(r.stderr).toContain("--id");
  expect(r.stderr).not.toContain("adding");
  expect(r.stderr).not.toContain("cannot reach");
});

test("add-node and set-member with an address that is not host:port are refused, naming the option", () => {
  const add = runSource(["admin", "add-node", ...unreachable, "--id", "node4", "--peer", "10.0.0.4", "--client", "10.0.0.4:7878", "--admin", "10.0.0.4:9090"], dir);
  expect(add.code).toBe(2);
  expect(add.stderr).toContain("--peer");
  const set = runSource(["admin", "set-member", ...unreachable, "--id", "node2", "--admin", "10.0.0.2:99999"], dir);
  expect(set.code).toBe(2);
  expect(set.stderr).toContain("--admin");
});

test("remove-node, promote and transfer-leader with an id no node can have are refused", () => {
  for (const args of [["remove-node", "--id", "a/b"], ["promote", "--id", "node 2"], ["transfer-leader", "--to", "node 2"]]) {
    const r = runSource(["admin", ...args, ...unreachable], dir);
    expect({ args, code: r.code, reached: r.stderr.includes("cannot reach") }).toEqual({ args, code: 2, reached: false });
  }
});
