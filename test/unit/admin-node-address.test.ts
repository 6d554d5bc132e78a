// What `svc admin` does with the address, token and CA it is given to reach a node: a mistake in
// them is the command line's (exit 2, naming the option and what to write), never reported as a
// node that "cannot be reached" and might not be running.

import { afterAll, describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { callNode, nodeUrlWith } from "../../src/cli/_client.ts";
import { CliExit } from "../../src/cli/_exit.ts";

const dir = fs.mkdtempSync(join(tmpdir(), "svc-admin-node-address-"));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** The exit code and message nodeUrlWith refuses these arguments with, or its URL. */
function outcome(args: Parameters<typeof nodeUrlWith>[0]): { exit: number; message: string } | string {
  const savedToken = process.env.SVC_TOKEN;
  delete process.env.SVC_TOKEN;
  try {
    return nodeUrlWith(args, null);
  } catch (e) {
    if (!(e instanceof CliExit)) throw e;
    return { exit: e.exitCode, message: e.message };
  } finally {
    if (savedToken !== undefined) process.env.SVC_TOKEN = savedToken;
  }
}

function file(name: string, text: string): string {
  const path = join(dir, name);
  fs.writeFileSync(path, text, { mode: 0o600 });
  return path;
}

describe("--node", () => {
  test("host:port without a scheme is refused, naming the URL to write", () => {
    const r = outcome({ node: "127.0.0.1:9090" });
    expect(r).toEqual({ exit: 2, message: expect.stringContaining("--node 127.0.0.1:9090") });
    expect((r as { message: string }).message).toContain("http://127.0.0.1:9090");
    expect((r as { message: string }).message).not.toContain("cannot reach");
  });

  test("what is not an http or https URL of a node's admin port is refused", () => {
    for (const node of ["notaurl", "ftp://127.0.0.1:9090", "s3://bucket/x", "http://127.0.0.1:9090/?x=1", "http://127.0.0.1:9090/#top", "http://ops:secret@127.0.0.1:9090", "http://"]) {
      const r = outcome({ node });
      expect(typeof r === "string" ? `${node} was taken as ${r}` : r.exit).toBe(2);
    }
  });

  test("a URL with credentials in it is refused without repeating them", () => {
    const r = outcome({ node: "http://ops:secret@127.0.0.1:9090" });
    expect(typeof r === "string" ? r : r.message).not.toContain("secret");
  });

  test("an http or https URL of host and port is taken, a trailing slash dropped; a path stays a prefix (a proxy's)", () => {
    expect(outcome({ node: "https://proxy.example/svc/node1/" })).toBe("https://proxy.example/svc/node1");
    expect(outcome({ node: "http://127.0.0.1:9090/" })).toBe("http://127.0.0.1:9090");
    expect(outcome({ node: "https://node1.example:9090" })).toBe("https://node1.example:9090");
    expect(outcome({ node: "http://[::1]:9090" })).toBe("http://[::1]:9090");
    expect(outcome({ node: "HTTP://LOCALHOST:9090" })).toBe("http://localhost:9090");
  });
});

describe("--token-file and SVC_TOKEN", () => {
  test("the tokens file (hashes, one a line) given as --token-file is refused, naming the file and not its content", () => {
    const tokens = file("tokens", "# svc tokens\nsha256:381b1e42335ad9ebe0d77b6b9dd8d510a16c81ac6a6ac43b6f1c435deca77f46 admin ops\n");
    const r = outcome({ node: "http://127.0.0.1:9090", "token-file": tokens });
    expect(typeof r === "string" ? r : r.exit).toBe(2);
    const message = (r as { message: string }).message;
    expect(message).toContain(tokens);
    expect(message).toContain("tokens file");
    expect(message).not.toContain("381b1e42");
  });

  test("a token file holding a single hash line is the tokens file too", () => {
    const r = outcome({ node: "http://127.0.0.1:9090", "token-file": file("one-hash", "sha256:381b1e42335ad9ebe0d77b6b9dd8d510a16c81ac6a6ac43b6f1c435deca77f46 admin ops\n") });
    expect(typeof r === "string" ? r : r.exit).toBe(2);
  });

  test("a token with blanks or control characters in it is refused, from a file or from SVC_TOKEN", () => {
    expect((outcome({ node: "http://127.0.0.1:9090", "token-file": file("ctl", "abc\u0001def") }) as { exit: number }).exit).toBe(2);
    expect((outcome({ node: "http://127.0.0.1:9090", "token-file": file("empty", "\n") }) as { exit: number }).exit).toBe(2);
    const saved = process.env.SVC_TOKEN;
    process.env.SVC_TOKEN = "first second";
    try {
      const r = (() => {
        try {
          return nodeUrlWith({ node: "http://127.0.0.1:9090" }, null);
        } catch (e) {
          return e as CliExit;
        }
      })();
      expect(r instanceof CliExit ? r.exitCode : r).toBe(2);
      expect(r instanceof CliExit ? r.message : "").toContain("SVC_TOKEN");
      expect(r instanceof CliExit ? r.message : "").not.toContain("second");
    } finally {
      if (saved === undefined) delete process.env.SVC_TOKEN;
      else process.env.SVC_TOKEN = saved;
    }
  });

  test("a token file of one token with a trailing newline is taken", () => {
    expect(outcome({ node: "http://127.0.0.1:9090", "token-file": file("token", "k1Qe2_x-Yz09AbCdEfGhIjKlMnOpQrStUvWxYz0123a\n") })).toBe("http://127.0.0.1:9090");
  });
});

describe("--cacert", () => {
  test("a file holding no PEM certificate is refused, naming the file", () => {
    const notPem = file("config.toml", 'node_id = "node1"\n');
    const r = outcome({ node: "https://127.0.0.1:9090", cacert: notPem });
    expect(r).toEqual({ exit: 2, message: expect.stringContaining(notPem) });
    expect((r as { message: string }).message).toContain("PEM");
  });
});

test("https:// to a port that speaks plain HTTP says so, not that the node may not be running", async () => {
  const plain = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("{}") });
  try {
    const failure = await callNode(`https://127.0.0.1:${plain.port}`, "GET", "/admin/stats", undefined, 5_000).then(() => null, (e: Error) => e.message);
    expect(failure).toContain("not with TLS");
    expect(failure).toContain("http://");
    expect(failure).not.toContain("is it running");
  } finally {
    plain.stop(true);
  }
});
