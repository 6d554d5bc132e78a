// `npm start` (svc dev-cluster) prints the next steps a newcomer can type as they are: from the
// source tree `npm run svc -- admin …` (svc is not on PATH there), from the compiled binary
// `svc admin …`.

import { afterAll, describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { adminCommandText, nextStepsText } from "../../src/cli/dev-cluster.ts";

const REPO = resolve(import.meta.dir, "../..");
const dir = fs.mkdtempSync(join(tmpdir(), "svc-dev-cluster-"));

afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe("svc dev-cluster's next steps", () => {
  test("run from the source tree (npm start), it prints `npm run svc -- admin …`", async () => {
    const proc = Bun.spawn([process.execPath, "src/main.ts", "dev-cluster", "--dir", dir], { cwd: REPO, stdout: "pipe", stderr: "ignore" });
    let out = "";
    try {
      const decoder = new TextDecoder();
      for await (const chunk of proc.stdout) {
        out += decoder.decode(chunk, { stream: true });
        if (out.includes("Ctrl-C stops the cluster")) break;
      }
    } finally {
      proc.kill("SIGTERM");
      await proc.exited;
    }
    expect(out).toContain("npm run svc -- admin cluster-info --node http://127.0.0.1:9090");
    expect(out).not.toMatch(/^\s+svc admin/m);
    // Stopped with its nodes: none is left on the fixed ports (the next test needs them).
    for (const port of [7878, 9090, 7888, 9091, 7898, 9092]) expect({ port, listening: await listening(port) }).toEqual({ port, listening: false });
  }, 30_000);

  test("--secure makes a CA, a certificate and an admin token, serves https with tokens, and svc admin reaches it through a node's config", async () => {
    const secureDir = join(dir, "secure");
    const proc = Bun.spawn([process.execPath, "src/main.ts", "dev-cluster", "--secure", "--dir", secureDir], { cwd: REPO, stdout: "pipe", stderr: "ignore" });
    let out = "";
    try {
      const decoder = new TextDecoder();
      for await (const chunk of proc.stdout) {
        out += decoder.decode(chunk, { stream: true });
        if (out.includes("Ctrl-C stops the cluster")) break;
      }
      expect(out).toContain("client https://127.0.0.1:7878");
      expect(out).toContain(`curl -s --cacert ${join(secureDir, "ca.crt")} -H "Authorization: Bearer $(cat ${join(secureDir, "admin-token")})"`);
      expect(out).toContain(`admin cluster-info --config ${join(secureDir, "node1.toml")}`);
      expect(fs.statSync(join(secureDir, "tokens")).mode & 0o777).toBe(0o600);
      expect(fs.statSync(join(secureDir, "node.key")).mode & 0o777).toBe(0o600);
      const config = fs.readFileSync(join(secureDir, "node1.toml"), "utf8");
      expect(config).toContain("[tls]");
      expect(config).toContain("[auth]");
      const deadline = Date.now() + 60_000;
      let info = { exitCode: -1, stdout: "", stderr: "" };
      while (Date.now() < deadline) {
        const r = Bun.spawnSync([process.execPath, "src/main.ts", "admin", "cluster-info", "--config", join(secureDir, "node1.toml")], { cwd: REPO, stdout: "pipe", stderr: "pipe" });
        info = { exitCode: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
        if (info.exitCode === 0 && JSON.parse(info.stdout).leader !== null) break;
        await Bun.sleep(250);
      }
      expect(info.stderr).toBe("");
      expect(JSON.parse(info.stdout).members).toHaveLength(3);
    } finally {
      proc.kill("SIGTERM");
      await proc.exited;
    }
  }, 90_000);

  test("the compiled binary prints `svc admin …`", () => {
    const nodes = [{ id: "node1", client: "127.0.0.1:7878", admin: "127.0.0.1:9090", peer: "127.0.0.1:7879" }];
    expect(nextStepsText("/d", nodes, adminCommandText(true))).toContain("\n  svc admin cluster-info --node http://127.0.0.1:9090\n");
    expect(adminCommandText(false)).toBe("npm run svc -- admin");
  });
});

/** Whether something accepts TCP connections on 127.0.0.1:port. */
async function listening(port: number): Promise<boolean> {
  try {
    const socket = await Bun.connect({ hostname: "127.0.0.1", port, socket: { data: () => undefined } });
    socket.end();
    return true;
  } catch {
    return false;
  }
}
