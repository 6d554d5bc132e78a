// verify-checksums judges the log as a whole, not only record by record: a WAL whose every
// record is sound but that misses entries after the newest valid snapshot is reported, with
// what to run; entries an earlier repair lost are reported as known.

import { afterEach, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { verifyDataDir } from "../../src/node/index.ts";
import { Wal, dataPaths, listSegments, repairWal, scanSegment, writeCheckpoint, writeHardState } from "../../src/storage/index.ts";
import type { Entry } from "../../src/raft/types.ts";
import { silentLogger } from "../../src/util/index.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function entry(index: number): Entry {
  return { term: 1, index, kind: "normal", timestampMs: 1_700_000_000_000 + index, data: new TextEncoder().encode(`entry-${String(index).padStart(6, "0")}-payload`) };
}

function dataDirWithLog(count: number): ReturnType<typeof dataPaths> {
  const dir = fs.mkdtempSync(join(tmpdir(), "svc-verify-"));
  dirs.push(dir);
  const paths = dataPaths(dir);
  const { wal } = Wal.open(paths.walDir, { segmentSizeBytes: 600, logger: silentLogger });
  for (let i = 1; i <= count; i++) wal.append([entry(i)]);
  wal.sync();
  wal.close();
  return paths;
}

test("a WAL of sound records that misses entries is not reported as well", async () => {
  const paths = dataDirWithLog(60);
  const segments = listSegments(paths.walDir);
  const middle = segments[Math.floor(segments.length / 2)];
  if (middle === undefined) throw new Error("need several segments");
  fs.rmSync(middle.path);
  const findings = await verifyDataDir(paths);
  const gap = findings.find((f) => f.target === paths.walDir && !f.ok);
  expect(gap?.detail).toContain("misses entries");
  expect(gap?.detail).toContain("wal-repair --skip-corrupted");
});

test("entries a repair lost are reported as known, and an intact log as continuing", async () => {
  const paths = dataDirWithLog(30);
  const [segment] = listSegments(paths.walDir);
  if (segment === undefined) throw new Error("no segment");
  const bytes = fs.readFileSync(segment.path);
  const at = bytes.indexOf(Buffer.from("entry-000003-payload"));
  bytes[at + 2] = (bytes[at + 2] ?? 0) ^ 0x01;
  fs.writeFileSync(segment.path, bytes);
  repairWal(paths.walDir, { dryRun: false });
  const findings = await verifyDataDir(paths);
  expect(findings.filter((f) => !f.ok && f.target !== paths.storePath)).toEqual([]);
  expect(findings.some((f) => f.detail.includes("the log continues"))).toBe(true);
  expect(findings.some((f) => f.detail.includes("wal-repair lost entries 3"))).toBe(true);
});

test("a damaged hard state is reported, with what to run; a sound one is checked too", async () => {
  const paths = dataDirWithLog(10);
  writeHardState(paths.hardStatePath, { term: 3, vote: "n1", commit: 10, clusterId: "c1" });
  const sound = await verifyDataDir(paths);
  expect(sound.find((f) => f.target === paths.hardStatePath)).toEqual({ target: paths.hardStatePath, ok: true, detail: "crc ok: term 3, commit 10" });
  const bytes = fs.readFileSync(paths.hardStatePath);
  bytes[bytes.length - 3] = (bytes[bytes.length - 3] ?? 0) ^ 0x01;
  fs.writeFileSync(paths.hardStatePath, bytes);
  const damaged = (await verifyDataDir(paths)).find((f) => f.target === paths.hardStatePath);
  expect(damaged?.ok).toBe(false);
  expect(damaged?.detail).toContain("checksum mismatch");
  expect(damaged?.detail).toContain("wal-repair --skip-corrupted");
});

test("a stale copy of a record (sound, with its entry's own term) after the last one is reported, and a repair removes only it", async () => {
  const paths = dataDirWithLog(3);
  const segments = listSegments(paths.walDir);
  const last = segments.at(-1);
  if (last === undefined) throw new Error("no segment");
  const bytes = new Uint8Array(fs.readFileSync(last.path));
  const scan = scanSegment(bytes);
  const first = scan.offsets[0] ?? 0;
  bytes.set(bytes.slice(first, scan.offsets[1] ?? scan.dataEndBytes), scan.dataEndBytes);
  fs.writeFileSync(last.path, bytes);
  const stale = (await verifyDataDir(paths)).find((f) => f.detail.includes("a stale copy of entry"));
  expect(stale?.ok).toBe(false);
  expect(stale?.detail).toContain("wal-repair --skip-corrupted");
  const report = repairWal(paths.walDir, { dryRun: false });
  expect(report.lost).toEqual([]);
  // (The fixture is a log alone: no store, no hard state.)
  expect((await verifyDataDir(paths)).filter((f) => !f.ok && f.target !== paths.storePath && f.target !== paths.hardStatePath)).toEqual([]);
});

test("a checkpoint past all the WAL, snapshots and store hold is reported, naming the entries missing", async () => {
  // The WAL of a lone node removed with its store: verify said "all checks passed", and the
  // start then refused (LOG_GAP) for the very entries it had not looked for.
  const paths = dataDirWithLog(30);
  writeHardState(paths.hardStatePath, { term: 1, vote: "n1", commit: 30, clusterId: "c1" });
  writeCheckpoint(paths.raftDir, { index: 28, term: 1, clusterId: "c1" });
  expect((await verifyDataDir(paths)).filter((f) => !f.ok)).toEqual([]);
  const segments = listSegments(paths.walDir);
  for (const s of segments.slice(-2)) fs.rmSync(s.path);
  const findings = await verifyDataDir(paths);
  const missing = findings.find((f) => f.target === paths.raftDir && !f.ok);
  // The hard state's commit counts only on a lone voter (a member's may run ahead of its WAL
  // after a crash): with no store to say which, the checkpoint decides.
  expect(missing?.detail).toMatch(/committed through 28 \(raft\/hardstate commits 30, raft\/checkpoint 28\), but the WAL ends at \d+, the newest valid snapshot at 0 and the store at 0: entries \d+\.\.28 are missing/);
  expect(missing?.detail).toContain("put the missing WAL segments back");
});

test("MEMBER that holds no cluster id is reported as damaged; one naming another cluster than raft/ is told, not failed (a start rewrites it)", async () => {
  const paths = dataDirWithLog(3);
  const clusterId = "3f2c1d7e-9a4b-4c21-8e5f-0123456789ab";
  writeHardState(paths.hardStatePath, { term: 1, vote: "n1", commit: 3, clusterId });
  const member = join(paths.dataDir, "MEMBER");
  fs.writeFileSync(member, `${clusterId}\n`);
  expect((await verifyDataDir(paths)).find((f) => f.target === member)).toEqual({ target: member, ok: true, detail: `cluster ${clusterId}` });
  fs.writeFileSync(member, "garbage\n");
  const damaged = (await verifyDataDir(paths)).find((f) => f.target === member);
  expect(damaged?.ok).toBe(false);
  expect(damaged?.detail).toContain('damaged: it holds "garbage", not a cluster id');
  const other = "00000000-9a4b-4c21-8e5f-0123456789ab";
  fs.writeFileSync(member, `${other}\n`);
  const differs = (await verifyDataDir(paths)).find((f) => f.target === member);
  expect(differs).toMatchObject({ ok: true, detail: expect.stringContaining(`cluster ${other}, while raft/hardstate names ${clusterId}`) });
});

test("a damaged snapshot image is reported with what to do: a new image, from the running node", async () => {
  const paths = dataDirWithLog(10);
  const dir = join(paths.snapshotsDir, "0000000000000001-0000000000000005");
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(join(dir, "state.db"), "an image");
  fs.writeFileSync(join(dir, "meta.json"), JSON.stringify({
    formatVersion: 1, clusterId: "c1", index: 5, term: 1, membership: { voters: ["n1"], learners: [] },
    createdAt: new Date(0).toISOString(), stateSha256: "0".repeat(64), stateSizeBytes: 8,
  }));
  const damaged = (await verifyDataDir(paths)).find((f) => f.target === dir);
  expect(damaged?.ok).toBe(false);
  expect(damaged?.detail).toContain("checksum mismatch");
  expect(damaged?.detail).toContain("svc admin snapshot");
});
