// SQLITE_FULL from a statement is a row SQLite cannot number only while the store's file system
// has room (src/store/_rowid-limit.ts); on a disk that is nearly full it is the disk, waited for.

import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, test } from "bun:test";
import { isRowidsUsedUp } from "../../src/store/_rowid-limit.ts";

const full = Object.assign(new Error("database or disk is full"), { code: "SQLITE_FULL" });
const canMount = process.getuid?.() === 0;

describe("SQLITE_FULL from a statement", () => {
  test("with room on the store's file system, or a store in memory, is the row", () => {
    const dir = fs.mkdtempSync(join(tmpdir(), "svc-rowid-"));
    try {
      expect(isRowidsUsedUp(full, join(dir, "state.db"))).toBe(true);
      expect(isRowidsUsedUp(full, null)).toBe(true);
      expect(isRowidsUsedUp(new Error("UNIQUE constraint failed: t.id"), null)).toBe(false);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test.skipIf(!canMount)("on a file system with less room than a statement could want, is the disk", () => {
    const dir = fs.mkdtempSync(join(tmpdir(), "svc-rowid-"));
    const mounted = Bun.spawnSync(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", dir]);
    expect(mounted.exitCode).toBe(0);
    try {
      expect(isRowidsUsedUp(full, join(dir, "state.db"))).toBe(false);
    } finally {
      Bun.spawnSync(["umount", dir]);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
