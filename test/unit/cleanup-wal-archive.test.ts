// Archived WAL retention (SPEC §8): only names ending in .wal, only when older than the threshold.

import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cleanupWalArchive } from "../../src/backup/cleanup.ts";

const DAY_MS = 86_400_000;
const NOW_MS = Date.parse("2030-06-15T12:00:00Z");
const THIRTY_DAYS = { olderThanMs: 30 * DAY_MS, nowMs: NOW_MS, dryRun: false };

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(join(tmpdir(), "svc-cleanup-wal-"));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

function age(name: string, days: number): void {
  const t = (NOW_MS - days * DAY_MS) / 1000;
  fs.lutimesSync(join(dir, name), t, t);
}

function file(name: string, days: number): void {
  fs.writeFileSync(join(dir, name), `segment ${name}`);
  age(name, days);
}

const remaining = (): string[] => fs.readdirSync(dir).sort();

describe("cleanup-wal-archive", () => {
  test("removes .wal files older than the threshold and keeps younger ones", () => {
    file("0000000000000001-0000000000000001.wal", 45);
    file("0000000000000002-0000000000000400.wal", 31);
    file("0000000000000003-0000000000000800.wal", 29);
    const report = cleanupWalArchive(dir, THIRTY_DAYS);
    expect(remaining()).toEqual(["0000000000000003-0000000000000800.wal"]);
    expect(report.removed.map((e) => e.path)).toEqual([
      join(dir, "0000000000000001-0000000000000001.wal"),
      join(dir, "0000000000000002-0000000000000400.wal"),
    ]);
  });

  test("leaves every name not ending in .wal alone, however old", () => {
    for (const name of ["metadata.json", "segment.wal.gz", "segment.walx", "WAL.WAL", "latest.tar.gz", ".wal-index"]) file(name, 400);
    const report = cleanupWalArchive(dir, THIRTY_DAYS);
    expect(remaining()).toHaveLength(6);
    expect(report.removed).toEqual([]);
    expect(report.ignored).toHaveLength(6);
  });

  test("leaves directories and symlinks named *.wal alone", () => {
    fs.mkdirSync(join(dir, "nested.wal"));
    fs.writeFileSync(join(dir, "nested.wal", "inner.wal"), "x");
    file("target.bin", 400);
    fs.symlinkSync("target.bin", join(dir, "link.wal"));
    age("nested.wal", 400);
    age("link.wal", 400);
    cleanupWalArchive(dir, THIRTY_DAYS);
    expect(remaining()).toEqual(["link.wal", "nested.wal", "target.bin"]);
    expect(fs.existsSync(join(dir, "nested.wal", "inner.wal"))).toBe(true);
  });

  test("a dry run lists the same removals and removes nothing", () => {
    file("a.wal", 60);
    file("b.wal", 1);
    const dry = cleanupWalArchive(dir, { ...THIRTY_DAYS, dryRun: true });
    expect(remaining()).toEqual(["a.wal", "b.wal"]);
    const real = cleanupWalArchive(dir, THIRTY_DAYS);
    expect(dry.removed).toEqual(real.removed);
    expect(remaining()).toEqual(["b.wal"]);
  });

  test("a directory that does not exist is an error", () => {
    expect(() => cleanupWalArchive(join(dir, "missing"), THIRTY_DAYS)).toThrow(/does not exist/);
  });
});
