// The object-store helper against a real S3 server on loopback (s3rver, path-style).

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ObjectStore, objectUrl, parseObjectUrl } from "../../src/backup/s3.ts";
import { cleanupWalArchiveObjects } from "../../src/backup/s3-cleanup.ts";
import { isSvcError } from "../../src/util/errors.ts";
import { startS3Server, type S3Server } from "../lib/s3-server.ts";

let s3: S3Server;
beforeAll(async () => {
  s3 = await startS3Server();
});
afterAll(async () => {
  await s3?.stop();
});

describe("object store", () => {
  test("an s3:// URL names a bucket and a prefix", () => {
    expect(parseObjectUrl("s3://bkt/a/b/")).toEqual({ bucket: "bkt", prefix: "a/b" });
    expect(parseObjectUrl("s3://bkt")).toEqual({ bucket: "bkt", prefix: "" });
    expect(objectUrl({ bucket: "bkt", prefix: "a" }, "x.wal")).toBe("s3://bkt/a/x.wal");
    expect(() => parseObjectUrl("s3:///nobucket")).toThrow(/object-store location/);
  });

  test("put, list, get, download, upload and delete round-trip under a prefix", async () => {
    const store = ObjectStore.at(`s3://${s3.bucket}/cluster1/wal`, s3.env);
    await store.put("0000000000000001-0000000000000001.wal", new Uint8Array([1, 2, 3]));
    await store.put("notes.txt", "hello");
    const other = ObjectStore.at(`s3://${s3.bucket}/elsewhere`, s3.env);
    await other.put("x", "not listed under cluster1/wal");
    const listed = await store.list();
    expect(listed.map((o) => o.name)).toEqual(["0000000000000001-0000000000000001.wal", "notes.txt"]);
    expect(listed[0]?.sizeBytes).toBe(3);
    expect(listed[0]?.modifiedMs).toBeGreaterThan(0);
    expect([...(await store.get("0000000000000001-0000000000000001.wal"))]).toEqual([1, 2, 3]);

    const dir = fs.mkdtempSync(join(tmpdir(), "svc-s3-unit-"));
    try {
      const big = new Uint8Array(6 * 1024 * 1024).map((_, i) => i % 251);
      fs.writeFileSync(join(dir, "big.bin"), big);
      await store.upload(join(dir, "big.bin"), "big.bin");
      await store.download("big.bin", join(dir, "back.bin"));
      expect(Buffer.compare(fs.readFileSync(join(dir, "back.bin")), Buffer.from(big))).toBe(0);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    expect(await store.exists("notes.txt")).toBe(true);
    await store.delete("notes.txt");
    expect(await store.exists("notes.txt")).toBe(false);
  });

  test("credentials come from the environment only, and a failure never shows them", async () => {
    let err: unknown;
    try {
      ObjectStore.at(`s3://${s3.bucket}/x`, {});
    } catch (e) {
      err = e;
    }
    expect(isSvcError(err, "OBJECT_STORE_NO_CREDENTIALS")).toBe(true);
    const wrong = ObjectStore.at(`s3://no-such-bucket/x`, { ...s3.env, AWS_SECRET_ACCESS_KEY: "very-secret-value" });
    const failure = await wrong.get("missing").then(() => null, (e: unknown) => e);
    expect(isSvcError(failure, "OBJECT_STORE_FAILED")).toBe(true);
    expect(String((failure as Error).message)).toContain("s3://no-such-bucket/x/missing");
    expect(String((failure as Error).message)).not.toContain("very-secret-value");
    // A listing names the location once (it said s3://no-such-bucket/x/x/).
    const listing = await wrong.list().then(() => null, (e: unknown) => e);
    expect(isSvcError(listing, "OBJECT_STORE_FAILED")).toBe(true);
    expect(String((listing as Error).message)).toContain("object store list s3://no-such-bucket/x failed");
  });

  test("cleanup-wal-archive on s3://: only .wal objects older than the threshold go, by their last-modified time", async () => {
    const url = `s3://${s3.bucket}/cleanup/wal`;
    const store = ObjectStore.at(url, s3.env);
    for (const name of ["0000000000000001-0000000000000010-0000000000000001.wal", "0000000000000011-0000000000000020-0000000000000001.wal", "README", "sub/x.wal"]) {
      await store.put(name, "x");
    }
    const nowMs = Date.now();
    const young = await cleanupWalArchiveObjects(url, { olderThanMs: 30 * 86_400_000, nowMs, dryRun: false }, s3.env);
    expect(young.removed).toEqual([]);
    expect(young.kept.length).toBe(2);
    expect(young.ignored).toEqual([`${url}/README`, `${url}/sub/x.wal`]);
    const dry = await cleanupWalArchiveObjects(url, { olderThanMs: 30 * 86_400_000, nowMs: nowMs + 31 * 86_400_000, dryRun: true }, s3.env);
    expect(dry.removed.length).toBe(2);
    expect((await store.list()).length).toBe(4);
    // Through the command, as the weekly timer runs it, once the segments are 31 days old.
    const monthAgo = new Date(nowMs - 31 * 86_400_000);
    for (const f of fs.readdirSync(s3.dir, { recursive: true, encoding: "utf8" })) {
      if (f.includes(".wal")) fs.utimesSync(join(s3.dir, f), monthAgo, monthAgo);
    }
    const main = join(import.meta.dir, "../../src/main.ts");
    const r = Bun.spawnSync([process.execPath, main, "admin", "cleanup-wal-archive", "--dir", url, "--older-than", "30d", "--json"], {
      stdout: "pipe", stderr: "pipe", env: { ...process.env, ...s3.env, NO_COLOR: "1" },
    });
    expect(r.stderr.toString()).toBe("");
    expect(r.exitCode).toBe(0);
    expect((JSON.parse(r.stdout.toString()) as { removed: unknown[] }).removed.length).toBe(2);
    expect((await store.list()).map((o) => o.name)).toEqual(["README", "sub/x.wal"]);
  });
});
