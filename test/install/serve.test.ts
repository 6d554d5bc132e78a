// The installed binary, started the way the unit starts it (same command line, as the svc user,
// with the generated config and the installed directories), serves: GET /health answers on 9090.
// It runs in a private network namespace, so 7878, 7879 and 9090 are free whatever else runs here.

import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import * as fs from "node:fs";
import { join, resolve } from "node:path";
import { parseConfig } from "../../src/config/index.ts";
import { hostViewArgv } from "./_host-view.ts";
import { accountIds, install, releaseBinary, removeRoot, run, stagingRoot } from "./_helpers.ts";

// Each test runs install.sh or the binary, some build it first; a loaded machine is slow.
setDefaultTimeout(120_000);

const PROBE = resolve(import.meta.dir, "_serve-probe.ts");

interface ProbeResult {
  error?: string;
  adminStatus?: number;
  adminBody?: { node_id?: string; recovery?: string };
  clientStatus?: number | string;
  exitCode?: number | string;
  log: string;
}

describe("the installed svc", () => {
  let root: string;
  let nodeId: string;

  beforeAll(() => {
    releaseBinary();
    root = stagingRoot();
    const r = install(root);
    if (r.exitCode !== 0) throw new Error(`install.sh failed:\n${r.stdout}\n${r.stderr}`);
    const config = parseConfig(fs.readFileSync(join(root, "etc/svc/config.toml"), "utf8"), "config.toml");
    if (!config.ok) throw new Error("the generated config does not parse");
    nodeId = config.config.nodeId;
  }, 120_000);
  afterAll(() => removeRoot(root));

  test("starts from the generated config as svc, answers GET /health on 9090, and stops cleanly on SIGTERM", () => {
    const svc = accountIds(root, "svc");
    const r = run(hostViewArgv(root, [process.execPath, PROBE, String(svc.uid), String(svc.gid)], { privateNetwork: true }));
    expect(r.stderr).toBe("");
    const result = JSON.parse(r.stdout.trim().split("\n").at(-1) ?? "{}") as ProbeResult;
    if (result.error !== undefined) throw new Error(`${result.error}\n${result.log}`);
    // 503 is a right answer too: a fresh node waits for its cluster to send it a snapshot.
    expect([200, 503]).toContain(result.adminStatus ?? 0);
    expect(result.adminBody?.node_id).toBe(nodeId);
    expect(typeof result.adminBody?.recovery).toBe("string");
    expect([200, 503]).toContain(Number(result.clientStatus));
    expect(result.exitCode).toBe(0);
    // It ran as svc: what it wrote under /var/lib/svc belongs to svc.
    const raft = fs.statSync(join(root, "var/lib/svc/raft"));
    expect({ uid: raft.uid, gid: raft.gid }).toEqual(svc);
  }, 120_000);
});
