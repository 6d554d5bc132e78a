// The configuration file is read with a bound: a file given by mistake (a log, a WAL segment, a
// device such as /dev/zero) is refused by its size, before it is held in memory whole.

import { afterAll, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfigFile } from "../../src/config/index.ts";

const dir = fs.mkdtempSync(join(tmpdir(), "svc-config-size-"));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

test("a file larger than any configuration is refused by its size, naming the bound", () => {
  const path = join(dir, "big.toml");
  fs.writeFileSync(path, `node_id = "node1"\n${"# a comment line of the kind a log would hold\n".repeat(50_000)}`);
  const r = loadConfigFile(path);
  expect(r.ok).toBe(false);
  const text = r.ok ? "" : r.problems.map((p) => p.message).join("\n");
  expect(text).toContain("larger than");
  expect(text).toContain("MiB");
});

test("a configuration read through a pipe (a shell's <(…)) is still read whole", async () => {
  const fifo = join(dir, "fifo");
  Bun.spawnSync(["mkfifo", fifo]);
  const writer = Bun.spawn(["sh", "-c", `printf 'node_id = "node1"\\n' > ${fifo}`]);
  const r = loadConfigFile(fifo);
  await writer.exited;
  expect(r.ok).toBe(true);
});
