// `svc serve` and the files of [tls], [auth] and [gossip]: one that cannot be used as it is now
// (a tokens file readable by others, a missing certificate or gossip key file) exits 1, as a
// file with bad content does: another unit or a rotation may still be writing it, and the unit
// install.sh writes restarts after 1. A wrong configuration text still exits 2, and --validate
// exits 2 for both.

import { afterAll, describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { newGossipKey } from "../../src/config/index.ts";
import { createToken } from "../../src/http/index.ts";
import { runSource } from "../lib/source-cli.ts";

const dir = fs.mkdtempSync(join(tmpdir(), "svc-serve-files-"));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function config(name: string, tables: string): string {
  const path = join(dir, `${name}.toml`);
  fs.writeFileSync(path, `node_id = "node1"\ndata_dir = "${join(dir, `${name}-data`)}"\n${tables}`);
  return path;
}

describe("serve and the files of [tls], [auth] and [gossip]", () => {
  test("a tokens file of mode 0644: serve exits 1 with the chmod that fixes it; --validate exits 2", () => {
    const tokens = join(dir, "tokens-open");
    createToken(tokens, "admin", "operator");
    fs.chmodSync(tokens, 0o644);
    const path = config("tokens-open", `[auth]\ntokens_file = "${tokens}"\n`);
    const served = runSource(["serve", "--config", path], dir);
    expect(served.stderr).toContain(`has mode 0644, but it holds secrets and must be readable by its owner only; run \`chmod 600 ${tokens}\``);
    expect(served.code).toBe(1);
    expect(fs.existsSync(join(dir, "tokens-open-data"))).toBe(false);
    expect(runSource(["--config", path, "--validate"], dir).code).toBe(2);
  });

  test("a gossip key file that does not exist, or a certificate file that does not exist: serve exits 1", () => {
    const gossip = config("gossip-missing", `[gossip]\nkey_file = "${join(dir, "absent.key")}"\n`);
    expect(runSource(["serve", "--config", gossip], dir).code).toBe(1);
    const key = join(dir, "node.key");
    fs.writeFileSync(key, "-----BEGIN PRIVATE KEY-----\n", { mode: 0o600 });
    const tls = config("cert-missing", `[tls]\ncert_file = "${join(dir, "absent.crt")}"\nkey_file = "${key}"\n`);
    const served = runSource(["serve", "--config", tls], dir);
    expect(served.stderr).toContain("does not exist");
    expect(served.code).toBe(1);
  });

  test("a wrong configuration text still exits 2, a file problem beside it notwithstanding", () => {
    const tokens = join(dir, "tokens-open-2");
    createToken(tokens, "admin", "operator");
    fs.chmodSync(tokens, 0o644);
    const keyFile = join(dir, "gossip.key");
    fs.writeFileSync(keyFile, `${newGossipKey()}\n`, { mode: 0o600 });
    expect(runSource(["serve", "--config", config("relative", `[gossip]\nkey_file = "gossip.key"\n`)], dir).code).toBe(2);
    expect(runSource(["serve", "--config", config("mixed", `max_memory_mb = "lots"\n[auth]\ntokens_file = "${tokens}"\n`)], dir).code).toBe(2);
  });

  test("a file path no file can have (a NUL, too long, through a file) or naming a directory is the text's mistake: exit 2, not restarted", () => {
    const key = join(dir, "node2.key");
    fs.writeFileSync(key, "-----BEGIN PRIVATE KEY-----\n", { mode: 0o600 });
    const throughFile = join(key, "node.crt");
    for (const [name, certFile] of [["nul", `${dir}/a\\u0000b.crt`], ["long", `${dir}/${"x".repeat(5000)}.crt`], ["through", throughFile], ["dir", dir]] as const) {
      const served = runSource(["serve", "--config", config(`cert-${name}`, `[tls]\ncert_file = "${certFile}"\nkey_file = "${key}"\n`)], dir);
      expect({ name, code: served.code }).toEqual({ name, code: 2 });
    }
  });
});
