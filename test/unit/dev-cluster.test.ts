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
  }, 30_000);

  test("the compiled binary prints `svc admin …`", () => {
    const nodes = [{ id: "node1", client: "127.0.0.1:7878", admin: "127.0.0.1:9090", peer: "127.0.0.1:7879" }];
    expect(nextStepsText("/d", nodes, adminCommandText(true))).toContain("\n  svc admin cluster-info --node http://127.0.0.1:9090\n");
    expect(adminCommandText(false)).toBe("npm run svc -- admin");
  });
});
