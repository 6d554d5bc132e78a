import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inspectRemovedMark, removedMarkPath, writeRemovedMark } from "../../src/storage/index.ts";

const dirs: string[] = [];
function raftDir(): string {
  const d = mkdtempSync(join(tmpdir(), "svc-removed-mark-"));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("raft/REMOVED", () => {
  test("is read back as written, and is gone once cleared", () => {
    const dir = raftDir();
    expect(inspectRemovedMark(dir)).toEqual({ kind: "none" });
    const mark = { configIndex: 42, by: "node1", clusterId: "c-1" };
    writeRemovedMark(dir, mark);
    expect(inspectRemovedMark(dir)).toEqual({ kind: "ok", mark });
    writeRemovedMark(dir, null);
    expect(inspectRemovedMark(dir)).toEqual({ kind: "none" });
    writeRemovedMark(dir, null);
  });

  test("a changed digit, a truncated file or impossible fields are reported damaged, never thrown", () => {
    const dir = raftDir();
    writeRemovedMark(dir, { configIndex: 42, by: "node1", clusterId: "c-1" });
    const text = readFileSync(removedMarkPath(dir), "utf8");
    for (const bad of [text.replace("42", "43"), text.slice(0, 20), "null", "[]", text.replace("\"by\":\"node1\"", "\"by\":\"\""), text.replace(":42", ":0")]) {
      writeFileSync(removedMarkPath(dir), bad);
      expect(inspectRemovedMark(dir).kind).toBe("damaged");
    }
  });
});
