// `svc serve` logs each warning of its configuration file (a [backup] location the backups will
// refuse, an own member entry that only NAT explains) once at start, at warn level, as
// --validate prints them: an operator reads it in the node's log on the day the file changed,
// not when the nightly backup first exits 2.

import { afterAll, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runSource } from "../lib/source-cli.ts";

const dir = fs.mkdtempSync(join(tmpdir(), "svc-serve-warnings-"));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

test("serve logs a [backup] dir the backups would refuse once, at warn level, naming the key and the file, before it stops on anything else", () => {
  // A tokens file that is not there (yet) stops serve right after its start lines (exit 1),
  // before it binds a port or touches the data directory.
  const tokens = join(dir, "absent-tokens");
  const path = join(dir, "config.toml");
  fs.writeFileSync(path, `node_id = "node1"\ndata_dir = "${join(dir, "data")}"\n[auth]\ntokens_file = "${tokens}"\n[backup]\ndir = "backups"\n`);
  const served = runSource(["serve", "--config", path], dir);
  expect(served.code).toBe(1);
  const lines = served.stderr.split("\n").filter((l) => l.includes("backup.dir"));
  expect(lines).toHaveLength(1);
  expect(lines[0]).toContain("WARN");
  expect(lines[0]).toContain(`${path}:6:`);
  expect(lines[0]).toContain("the node starts, and the backups refuse it until it is fixed");
});
