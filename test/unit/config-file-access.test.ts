// A configuration file the process may not read is refused saying who svc runs as, who owns
// the file and with what mode, and what lets it be read: EACCES alone names no way out.

import { afterAll, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const MAIN = resolve(import.meta.dir, "../../src/main.ts");
const dir = fs.mkdtempSync(join(tmpdir(), "svc-config-access-"));
fs.chmodSync(dir, 0o755);
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** As root, with this checkout readable by nobody (a checkout under a private home is not). */
function canRunAsNobody(): boolean {
  if (process.getuid?.() !== 0) return false;
  const r = Bun.spawnSync(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", process.execPath, "-e", `require(${JSON.stringify(MAIN)}.replace("main.ts", "version.ts"))`], { stdout: "ignore", stderr: "ignore" });
  return r.exitCode === 0;
}

function validateAsNobody(path: string): { exitCode: number; stderr: string } {
  const r = Bun.spawnSync(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", process.execPath, MAIN, "--config", path, "--validate"], {
    env: { ...process.env, NO_COLOR: "1" }, stdout: "pipe", stderr: "pipe",
  });
  return { exitCode: r.exitCode ?? -1, stderr: r.stderr.toString() };
}

test.skipIf(!canRunAsNobody())("a file the service user may not read names that user, the file's owner and mode, and the chmod that lets it read", () => {
  const path = join(dir, "config.toml");
  fs.writeFileSync(path, 'node_id = "node1"\n', { mode: 0o600 });
  fs.chmodSync(path, 0o600);
  const r = validateAsNobody(path);
  expect(r.exitCode).toBe(2);
  expect(r.stderr).toContain("uid 65534");
  expect(r.stderr).toContain("mode 0600");
  expect(r.stderr).toContain("owner root");
  expect(r.stderr).toContain(`chmod 640 ${path}`);
});

test.skipIf(!canRunAsNobody())("a file behind a directory the service user may not enter says so", () => {
  const closed = join(dir, "closed");
  fs.mkdirSync(closed, { mode: 0o700 });
  fs.chmodSync(closed, 0o700);
  const path = join(closed, "config.toml");
  fs.writeFileSync(path, 'node_id = "node1"\n', { mode: 0o644 });
  const r = validateAsNobody(path);
  expect(r.exitCode).toBe(2);
  expect(r.stderr).toContain("uid 65534");
  expect(r.stderr).toContain(`namei -l ${path}`);
});
