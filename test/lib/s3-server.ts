// A local S3 server for tests: the s3rver package in a process of its own, on loopback,
// answering path-style requests with the credentials it accepts (S3RVER / S3RVER), its
// objects in a temp directory. `env` is what a command under test needs to reach it.

import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./proc-ports.ts";

export interface S3Server {
  readonly endpoint: string;
  readonly bucket: string;
  /** Where the server keeps its objects: a file's modification time is its object's last-modified time. */
  readonly dir: string;
  /** Environment variables for a process that talks to this server. */
  readonly env: Record<string, string>;
  stop(): Promise<void>;
}

const binPath = join(import.meta.dir, "../../node_modules/s3rver/bin/s3rver.js");

export async function startS3Server(bucket = "svc-backups"): Promise<S3Server> {
  const dir = fs.mkdtempSync(join(tmpdir(), "svc-s3-"));
  const port = await freePort();
  const proc = Bun.spawn([process.execPath, binPath, "-d", dir, "-a", "127.0.0.1", "-p", String(port), "--silent", "--configure-bucket", bucket], {
    stdout: "ignore", stderr: "pipe",
  });
  const endpoint = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      const res = await fetch(`${endpoint}/${bucket}?list-type=2`);
      await res.arrayBuffer();
      if (res.status < 500) break;
    } catch {
      // not listening yet
    }
    if (proc.exitCode !== null || Date.now() > deadline) {
      proc.kill();
      throw new Error(`s3rver did not start on ${endpoint}: ${await new Response(proc.stderr).text()}`);
    }
    await Bun.sleep(100);
  }
  return {
    endpoint,
    bucket,
    dir,
    env: { AWS_ACCESS_KEY_ID: "S3RVER", AWS_SECRET_ACCESS_KEY: "S3RVER", AWS_REGION: "us-east-1", AWS_ENDPOINT_URL: endpoint },
    async stop() {
      proc.kill();
      await proc.exited;
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
