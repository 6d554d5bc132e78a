// A secrets file setting (tokens, gossip key) that names a directory or a device is refused as
// not a file, and the advice fits: no `chmod 600` of a directory or /dev/zero, no key written
// over a directory's path.

import { afterAll, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseConfig } from "../../src/config/index.ts";
import { TokenSet } from "../../src/http/index.ts";

const dir = fs.mkdtempSync(join(tmpdir(), "svc-secret-kind-"));
fs.chmodSync(dir, 0o755);
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function problemsOf(toml: string): string[] {
  const r = parseConfig(`node_id = "node1"\ndata_dir = "/var/lib/svc"\n${toml}`, "config.toml");
  return r.ok ? [] : r.problems.map((p) => `${p.keyPath}: ${p.message}`);
}

test("[auth] tokens_file naming a directory or a device is not a file, and no chmod is advised", () => {
  for (const path of [dir, "/dev/zero"]) {
    const problems = problemsOf(`[auth]\ntokens_file = "${path}"\n`);
    expect(problems.length).toBe(1);
    expect(problems[0]).toStartWith("auth.tokens_file: ");
    expect(problems[0]).toContain("not a file");
    expect(problems[0]).not.toContain("chmod");
  }
});

test("the tokens file read at start or by `token list` refuses a directory or a device as not a file", () => {
  for (const path of [dir, "/dev/zero"]) {
    let message = "";
    try {
      TokenSet.read(path);
    } catch (e) {
      message = `${(e as Error).message} ${(e as { hint?: string }).hint ?? ""}`;
    }
    expect(message).toContain("not a file");
    expect(message).not.toContain("chmod");
  }
});

test("[gossip] key_file naming a directory is not a file, and no key is to be written over it", () => {
  const problems = problemsOf(`[gossip]\nkey_file = "${dir}"\n`);
  expect(problems.length).toBe(1);
  expect(problems[0]).toContain("not a file");
  expect(problems[0]).not.toContain(`> ${dir}`);
});
