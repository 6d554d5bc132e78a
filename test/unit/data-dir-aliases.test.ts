// The other names SPEC §2.1 gives the WAL and snapshot directories, <data_dir>/wal and
// <data_dir>/snapshots: relative links into raft/, made when absent and never over anything an
// operator put there; and the tools that walk a data directory see each file once through them.

import { afterEach, describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { diskUsage } from "../../src/cli/admin/_host-facts.ts";
import type { Entry } from "../../src/raft/types.ts";
import { Wal, dataPaths, ensureDir, linkDataDirAliases, listSegments, repairWal, type DataPaths } from "../../src/storage/index.ts";
import { silentLogger } from "../../src/util/index.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

/** A data directory as a node lays it out (raft/wal, raft/snapshots, store), with `count` WAL entries. */
function dataDir(count = 0): DataPaths {
  const dir = fs.mkdtempSync(join(tmpdir(), "svc-aliases-"));
  dirs.push(dir);
  const paths = dataPaths(dir);
  for (const d of [paths.raftDir, paths.walDir, paths.snapshotsDir, paths.storeDir]) ensureDir(d);
  if (count > 0) {
    const { wal } = Wal.open(paths.walDir, { segmentSizeBytes: 64 * 1024, logger: silentLogger });
    for (let i = 1; i <= count; i++) wal.append([entry(i)]);
    wal.sync();
    wal.close();
  }
  return paths;
}

function entry(index: number): Entry {
  return { term: 1, index, kind: "normal", timestampMs: 1_700_000_000_000 + index, data: new TextEncoder().encode(`entry-${String(index).padStart(6, "0")}-payload`) };
}

const results = (outcomes: ReturnType<typeof linkDataDirAliases>): Record<string, string> =>
  Object.fromEntries(outcomes.map((o) => [o.name, o.result]));

describe("the wal and snapshots names of a data directory", () => {
  test("are made as relative links to raft/wal and raft/snapshots; made again, nothing changes", () => {
    const paths = dataDir();
    expect(results(linkDataDirAliases(paths))).toEqual({ wal: "made", snapshots: "made" });
    expect(fs.readlinkSync(join(paths.dataDir, "wal"))).toBe("raft/wal");
    expect(fs.readlinkSync(join(paths.dataDir, "snapshots"))).toBe("raft/snapshots");
    const before = fs.lstatSync(join(paths.dataDir, "wal"));
    expect(results(linkDataDirAliases(paths))).toEqual({ wal: "present", snapshots: "present" });
    const after = fs.lstatSync(join(paths.dataDir, "wal"));
    expect([after.ino, after.mtimeMs]).toEqual([before.ino, before.mtimeMs]);
  });

  test("stat, a listing and du through <data_dir>/wal see the WAL itself", () => {
    const paths = dataDir(400);
    linkDataDirAliases(paths);
    const alias = join(paths.dataDir, "wal");
    expect(fs.statSync(alias).isDirectory()).toBe(true);
    expect(fs.statSync(alias).ino).toBe(fs.statSync(paths.walDir).ino);
    expect(fs.readdirSync(alias).sort()).toEqual(fs.readdirSync(paths.walDir).sort());
    expect(listSegments(alias).map((s) => s.name)).toEqual(listSegments(paths.walDir).map((s) => s.name));
    // du names the link on its command line: -D (--dereference-args) or a trailing slash measures what it names.
    const du = (...args: string[]): number => Number(Bun.spawnSync(["du", "-sk", ...args]).stdout.toString().split("\t")[0]);
    const walKib = du(paths.walDir);
    expect(walKib).toBeGreaterThan(0);
    expect(du("-D", alias)).toBe(walKib);
    expect(du(`${alias}/`)).toBe(walKib);
  });

  test("a link left dangling by removing raft/ is kept, and leads to the WAL again once raft/wal is made", () => {
    const paths = dataDir();
    linkDataDirAliases(paths);
    fs.rmSync(paths.raftDir, { recursive: true });
    expect(results(linkDataDirAliases(paths))).toEqual({ wal: "present", snapshots: "present" });
    ensureDir(paths.walDir);
    expect(fs.statSync(join(paths.dataDir, "wal")).ino).toBe(fs.statSync(paths.walDir).ino);
  });

  test("a directory, a file or a link elsewhere already at those names is left as it is and reported", () => {
    const paths = dataDir();
    fs.mkdirSync(join(paths.dataDir, "wal"));
    fs.writeFileSync(join(paths.dataDir, "wal", "operator-notes.txt"), "mine");
    fs.writeFileSync(join(paths.dataDir, "snapshots"), "a file");
    const outcomes = linkDataDirAliases(paths);
    expect(results(outcomes)).toEqual({ wal: "blocked", snapshots: "blocked" });
    expect(outcomes.map((o) => (o.result === "blocked" ? o.found : ""))).toEqual(["a directory", "a file"]);
    expect(fs.readFileSync(join(paths.dataDir, "wal", "operator-notes.txt"), "utf8")).toBe("mine");
    expect(fs.readFileSync(join(paths.dataDir, "snapshots"), "utf8")).toBe("a file");

    const other = dataDir();
    fs.symlinkSync("/var/tmp", join(other.dataDir, "wal"));
    const [wal] = linkDataDirAliases(other);
    expect(wal).toEqual(expect.objectContaining({ name: "wal", result: "blocked", found: "a link to /var/tmp" }));
    expect(fs.readlinkSync(join(other.dataDir, "wal"))).toBe("/var/tmp");
  });

  test("the support bundle's disk usage counts the WAL once, not again through the link", () => {
    const paths = dataDir(400);
    const before = diskUsage(paths.dataDir);
    linkDataDirAliases(paths);
    const after = diskUsage(paths.dataDir);
    expect(after.total).toEqual(before.total);
    expect(after.dirs.map((d) => d.path)).toEqual(before.dirs.map((d) => d.path));
  });

  test("wal-repair sets the damaged WAL aside under raft/; the wal link leads to the repaired one", () => {
    const paths = dataDir(60);
    linkDataDirAliases(paths);
    const segment = listSegments(paths.walDir)[0]!;
    const bytes = fs.readFileSync(segment.path);
    const at = bytes.indexOf(Buffer.from("entry-000030-payload"));
    bytes[at + 3] = (bytes[at + 3] ?? 0) ^ 0x40;
    fs.writeFileSync(segment.path, bytes);
    const report = repairWal(paths.walDir, { dryRun: false, snapshotIndex: 0 });
    expect(report.quarantineDir?.startsWith(`${paths.raftDir}/wal-corrupt-`)).toBe(true);
    expect(fs.statSync(join(paths.dataDir, "wal")).ino).toBe(fs.statSync(paths.walDir).ino);
    const reopened = Wal.open(join(paths.dataDir, "wal"), { segmentSizeBytes: 64 * 1024, logger: silentLogger });
    reopened.wal.close();
    expect(reopened.entries.at(-1)?.index).toBe(29);
    expect(fs.readdirSync(paths.dataDir).sort()).toEqual(["raft", "snapshots", "store", "wal"]);
  });
});
