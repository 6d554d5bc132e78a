// Snapshot retention (SPEC §8): old snapshots go, the newest valid one always stays.

import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cleanupSnapshots } from "../../src/backup/cleanup.ts";

const DAY_MS = 86_400_000;
const NOW_MS = Date.parse("2030-06-15T12:00:00Z");
const SEVEN_DAYS = { olderThanMs: 7 * DAY_MS, nowMs: NOW_MS, dryRun: false };

let dataDir: string;
let snapshotsDir: string;

beforeEach(() => {
  dataDir = fs.mkdtempSync(join(tmpdir(), "svc-cleanup-snapshots-"));
  snapshotsDir = join(dataDir, "raft", "snapshots");
  fs.mkdirSync(snapshotsDir, { recursive: true });
});
afterEach(() => fs.rmSync(dataDir, { recursive: true, force: true }));

const hex16 = (n: number): string => n.toString(16).padStart(16, "0");

interface SnapshotSpec {
  term?: number;
  index: number;
  ageDays: number;
  /** Write a state.db whose bytes differ from the checksum in meta.json. */
  corrupt?: boolean;
  /** Leave meta.json out, as a snapshot interrupted before its last write. */
  noMeta?: boolean;
  /** Write createdAt; when false the age can only come from the directory's mtime. */
  withCreatedAt?: boolean;
  /** mtime of the directory, in days before NOW_MS (defaults to now: it must not matter). */
  dirAgeDays?: number;
  stateBytes?: number;
}

function makeSnapshot(spec: SnapshotSpec): string {
  const term = spec.term ?? 1;
  const name = `${hex16(term)}-${hex16(spec.index)}`;
  const dir = join(snapshotsDir, name);
  fs.mkdirSync(dir);
  const state = Buffer.alloc(spec.stateBytes ?? 1024, spec.index % 251);
  fs.writeFileSync(join(dir, "state.db"), spec.corrupt === true ? Buffer.concat([state, Buffer.from("x")]) : state);
  if (spec.noMeta !== true) {
    const meta: Record<string, unknown> = {
      formatVersion: 1, clusterId: "c1", index: spec.index, term,
      membership: { voters: ["node1"] },
      stateSha256: createHash("sha256").update(state).digest("hex"),
      stateSizeBytes: state.length,
    };
    if (spec.withCreatedAt !== false) meta.createdAt = new Date(NOW_MS - spec.ageDays * DAY_MS).toISOString();
    fs.writeFileSync(join(dir, "meta.json"), JSON.stringify(meta));
  }
  const dirMtimeMs = NOW_MS - (spec.dirAgeDays ?? (spec.withCreatedAt === false || spec.noMeta === true ? spec.ageDays : 0)) * DAY_MS;
  fs.utimesSync(dir, dirMtimeMs / 1000, dirMtimeMs / 1000);
  return name;
}

const remaining = (): string[] => fs.readdirSync(snapshotsDir).sort();

describe("cleanup-snapshots", () => {
  test("removes snapshots older than the threshold and keeps younger ones", async () => {
    const old = makeSnapshot({ index: 100, ageDays: 10 });
    const young = makeSnapshot({ index: 200, ageDays: 3 });
    const newest = makeSnapshot({ index: 300, ageDays: 1 });
    const report = await cleanupSnapshots(dataDir, SEVEN_DAYS);
    expect(report.removed.map((e) => e.path)).toEqual([join(snapshotsDir, old)]);
    expect(remaining()).toEqual([young, newest]);
    expect(report.newestValid).toBe(newest);
    expect(report.problems).toEqual([]);
  });

  test("a snapshot held by a .hold file (being copied, SPEC §4.4 step 3) is kept whatever its age, until the hold ends", async () => {
    const held = makeSnapshot({ index: 100, ageDays: 10 });
    const heldUntilLater = makeSnapshot({ index: 150, ageDays: 10 });
    const heldUntilPast = makeSnapshot({ index: 170, ageDays: 10 });
    const newest = makeSnapshot({ index: 200, ageDays: 1 });
    fs.writeFileSync(join(snapshotsDir, held, ".hold"), "");
    fs.writeFileSync(join(snapshotsDir, heldUntilLater, ".hold"), new Date(NOW_MS + DAY_MS).toISOString());
    fs.writeFileSync(join(snapshotsDir, heldUntilPast, ".hold"), new Date(NOW_MS - DAY_MS).toISOString());
    const report = await cleanupSnapshots(dataDir, SEVEN_DAYS);
    expect(remaining()).toEqual([held, heldUntilLater, newest]);
    expect(report.kept.find((e) => e.path === join(snapshotsDir, held))?.reason).toContain("held");
  });

  test("never removes the newest valid snapshot, however old", async () => {
    makeSnapshot({ index: 100, ageDays: 40 });
    const newest = makeSnapshot({ index: 200, ageDays: 30 });
    const report = await cleanupSnapshots(dataDir, SEVEN_DAYS);
    expect(remaining()).toEqual([newest]);
    expect(report.kept.map((e) => e.path)).toEqual([join(snapshotsDir, newest)]);
  });

  test("the newest valid snapshot is the one with the highest index, not the latest term or date", async () => {
    const highIndex = makeSnapshot({ term: 2, index: 500, ageDays: 20 });
    makeSnapshot({ term: 3, index: 400, ageDays: 10 });
    await cleanupSnapshots(dataDir, SEVEN_DAYS);
    expect(remaining()).toEqual([highIndex]);
  });

  test("a damaged newer snapshot does not protect itself: the newest one that verifies is kept", async () => {
    const valid = makeSnapshot({ index: 100, ageDays: 20 });
    const damaged = makeSnapshot({ index: 200, ageDays: 10, corrupt: true });
    const report = await cleanupSnapshots(dataDir, SEVEN_DAYS);
    expect(report.newestValid).toBe(valid);
    expect(remaining()).toEqual([valid]);
    const removed = report.removed.find((e) => e.path === join(snapshotsDir, damaged));
    expect(removed?.reason).toContain("checksum");
  });

  test("a snapshot whose meta.json names another index is not valid", async () => {
    const valid = makeSnapshot({ index: 100, ageDays: 20 });
    const wrong = makeSnapshot({ index: 200, ageDays: 20 });
    const metaPath = join(snapshotsDir, wrong, "meta.json");
    fs.writeFileSync(metaPath, fs.readFileSync(metaPath, "utf8").replace('"index":200', '"index":201'));
    const report = await cleanupSnapshots(dataDir, SEVEN_DAYS);
    expect(report.newestValid).toBe(valid);
    expect(remaining()).toEqual([valid]);
  });

  test("a young damaged snapshot is kept until it is old enough", async () => {
    const valid = makeSnapshot({ index: 100, ageDays: 20 });
    const damaged = makeSnapshot({ index: 200, ageDays: 2, corrupt: true });
    await cleanupSnapshots(dataDir, SEVEN_DAYS);
    expect(remaining()).toEqual([valid, damaged]);
  });

  test("age comes from meta.createdAt, not from the directory's modification time", async () => {
    const oldByMeta = makeSnapshot({ index: 100, ageDays: 10, dirAgeDays: 0 });
    const youngByMeta = makeSnapshot({ index: 200, ageDays: 2, dirAgeDays: 30 });
    const newest = makeSnapshot({ index: 300, ageDays: 1 });
    await cleanupSnapshots(dataDir, SEVEN_DAYS);
    expect(remaining()).toEqual([youngByMeta, newest]);
    expect(remaining()).not.toContain(oldByMeta);
  });

  test("age falls back to the directory's modification time when meta.json has no createdAt", async () => {
    const old = makeSnapshot({ index: 100, ageDays: 10, withCreatedAt: false });
    const young = makeSnapshot({ index: 200, ageDays: 2, withCreatedAt: false });
    const newest = makeSnapshot({ index: 300, ageDays: 1 });
    await cleanupSnapshots(dataDir, SEVEN_DAYS);
    expect(remaining()).toEqual([young, newest]);
    expect(remaining()).not.toContain(old);
  });

  test("an old snapshot directory without meta.json (incomplete) is removed by its mtime", async () => {
    makeSnapshot({ index: 100, ageDays: 10, noMeta: true });
    const youngIncomplete = makeSnapshot({ index: 200, ageDays: 1, noMeta: true });
    const newest = makeSnapshot({ index: 50, ageDays: 30 });
    await cleanupSnapshots(dataDir, SEVEN_DAYS);
    expect(remaining()).toEqual([newest, youngIncomplete].sort());
  });

  test("removes old incomplete temp directories and keeps fresh ones", async () => {
    const newest = makeSnapshot({ index: 100, ageDays: 1 });
    // Pids above the kernel's largest (2^22): no process runs with them.
    for (const [name, ageDays] of [[".tmp-4194311-old", 9], [".tmp-4194312-fresh", 0]] as const) {
      const dir = join(snapshotsDir, name);
      fs.mkdirSync(dir);
      fs.writeFileSync(join(dir, "state.db"), "partial");
      const mtime = (NOW_MS - ageDays * DAY_MS) / 1000;
      fs.utimesSync(dir, mtime, mtime);
    }
    const report = await cleanupSnapshots(dataDir, SEVEN_DAYS);
    expect(remaining()).toEqual([".tmp-4194312-fresh", newest]);
    expect(report.removed.map((e) => e.path)).toEqual([join(snapshotsDir, ".tmp-4194311-old")]);
  });

  test("with a zero age, only the newest valid snapshot and the temp directory of a running process stay: a snapshot being written is not taken from under it", async () => {
    const old = makeSnapshot({ index: 10, ageDays: 9 });
    const recent = makeSnapshot({ index: 20, ageDays: 0.01 });
    const newest = makeSnapshot({ index: 30, ageDays: 0.01 });
    const writing = `.tmp-${process.pid}-${NOW_MS}-1`;
    const left = ".tmp-4194311-1-1";
    for (const name of [writing, left]) {
      fs.mkdirSync(join(snapshotsDir, name));
      fs.writeFileSync(join(snapshotsDir, name, "state.db"), "partial");
      const mtime = (NOW_MS - 2 * DAY_MS) / 1000;
      fs.utimesSync(join(snapshotsDir, name), mtime, mtime);
    }
    const report = await cleanupSnapshots(dataDir, { olderThanMs: 0, nowMs: NOW_MS, dryRun: false });
    expect(remaining()).toEqual([writing, newest].sort());
    expect(report.removed.map((e) => e.path).sort()).toEqual([join(snapshotsDir, left), join(snapshotsDir, old), join(snapshotsDir, recent)].sort());
    expect(report.kept.find((e) => e.path === join(snapshotsDir, writing))?.reason).toBe(`incomplete snapshot of a running process (pid ${process.pid}), possibly being written`);
  });

  test("leaves entries that are not snapshots alone, whatever their age", async () => {
    const newest = makeSnapshot({ index: 100, ageDays: 1 });
    fs.writeFileSync(join(snapshotsDir, "README"), "operator notes");
    fs.mkdirSync(join(snapshotsDir, "latest"));
    fs.writeFileSync(join(snapshotsDir, ".tmp-file"), "a file, not a temp snapshot directory");
    for (const name of ["README", "latest", ".tmp-file"]) {
      const mtime = (NOW_MS - 100 * DAY_MS) / 1000;
      fs.utimesSync(join(snapshotsDir, name), mtime, mtime);
    }
    const report = await cleanupSnapshots(dataDir, SEVEN_DAYS);
    expect(remaining()).toEqual([".tmp-file", newest, "README", "latest"].sort());
    expect(report.ignored.length).toBe(3);
  });

  test("a dry run reports the same removals and removes nothing", async () => {
    makeSnapshot({ index: 100, ageDays: 10 });
    makeSnapshot({ index: 200, ageDays: 9 });
    makeSnapshot({ index: 300, ageDays: 1 });
    const before = remaining();
    const dry = await cleanupSnapshots(dataDir, { ...SEVEN_DAYS, dryRun: true });
    expect(remaining()).toEqual(before);
    expect(dry.dryRun).toBe(true);
    const real = await cleanupSnapshots(dataDir, SEVEN_DAYS);
    expect(dry.removed).toEqual(real.removed);
    expect(remaining()).toHaveLength(1);
  });

  test("reports the bytes a removal frees", async () => {
    makeSnapshot({ index: 100, ageDays: 10, stateBytes: 4096 });
    makeSnapshot({ index: 200, ageDays: 1 });
    const report = await cleanupSnapshots(dataDir, SEVEN_DAYS);
    expect(report.removed[0]?.sizeBytes).toBeGreaterThanOrEqual(4096);
  });

  test("verifies a multi-megabyte state.db", async () => {
    const newest = makeSnapshot({ index: 200, ageDays: 10, stateBytes: 24 * 1024 * 1024 });
    makeSnapshot({ index: 100, ageDays: 20 });
    const report = await cleanupSnapshots(dataDir, SEVEN_DAYS);
    expect(report.newestValid).toBe(newest);
    expect(remaining()).toEqual([newest]);
  });

  test("removes nothing when no snapshot verifies, and reports that as a problem", async () => {
    const a = makeSnapshot({ index: 100, ageDays: 20, corrupt: true });
    const b = makeSnapshot({ index: 200, ageDays: 10, noMeta: true });
    const report = await cleanupSnapshots(dataDir, SEVEN_DAYS);
    expect(remaining()).toEqual([a, b]);
    expect(report.newestValid).toBeNull();
    expect(report.problems.map((p) => p.code)).toEqual(["NO_VALID_SNAPSHOT"]);
  });

  test("a data directory without snapshots is nothing to do", async () => {
    fs.rmSync(join(dataDir, "raft"), { recursive: true });
    const report = await cleanupSnapshots(dataDir, SEVEN_DAYS);
    expect(report.removed).toEqual([]);
    expect(report.problems).toEqual([]);
  });

  test("a data directory that does not exist is an error, not an empty cleanup", async () => {
    await expect(cleanupSnapshots(join(dataDir, "missing"), SEVEN_DAYS)).rejects.toMatchObject({ code: "CLEANUP_DIR_MISSING" });
  });
});
