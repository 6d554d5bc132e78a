// The parts of backups that need no cluster: a snapshot held while it is copied, the write
// pause's lease, an archive's verification against its manifest, retention by the date in a
// backup's name, and the new cluster id init-cluster derives from a restored snapshot.

import { afterEach, describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tar from "tar";
import { fullBackupDateMs, fullBackupName, verifyArchive, writeArchive } from "../../src/backup/backup-archive.ts";
import { applyRetention, openDestination } from "../../src/backup/backup-destination.ts";
import { parseConfig } from "../../src/config/index.ts";
import { derivedClusterId } from "../../src/node/reinit.ts";
import { SnapshotStore, snapshotHoldFile } from "../../src/storage/snapshots.ts";
import { encodeCommand } from "../../src/store/command.ts";
import { Store, writesPausedAt } from "../../src/store/store.ts";

const dirs: string[] = [];
function tempDir(): string {
  const d = fs.mkdtempSync(join(tmpdir(), "svc-backup-unit-"));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

async function addSnapshot(store: SnapshotStore, index: number): Promise<string> {
  const temp = store.beginTemp();
  fs.writeFileSync(join(temp, "state.db"), `image ${index}`);
  const entry = await store.commit(temp, { clusterId: "c", index, term: 1, membership: { voters: ["n1"], learners: [] }, stateSha256: "x" });
  return entry.dir;
}

describe("snapshot holds", () => {
  test("a held snapshot directory is not pruned while it is copied; released or lapsed, it is", async () => {
    const store = new SnapshotStore(tempDir());
    const oldest = await addSnapshot(store, 10);
    const second = await addSnapshot(store, 20);
    await addSnapshot(store, 30);
    fs.writeFileSync(join(oldest, snapshotHoldFile), ""); // held until removed
    fs.writeFileSync(join(second, snapshotHoldFile), `${new Date(Date.now() - 1000).toISOString()}\n`); // lapsed
    expect(store.prune(1)).toEqual([second]);
    expect(fs.existsSync(oldest)).toBe(true);
    fs.rmSync(join(oldest, snapshotHoldFile));
    expect(store.prune(1)).toEqual([oldest]);
  });
});

describe("the write pause's lease", () => {
  test("a pause with a lease ends by itself once the clock passes it; without one it lasts until resumed", () => {
    const dir = tempDir();
    const s = Store.open(join(dir, "state.db"));
    try {
      s.apply([{ term: 1, index: 1, kind: "normal", timestampMs: 1, data: encodeCommand({ op: "pause_writes", untilMs: 5000 }) }]);
      expect(writesPausedAt(s.meta, 4999)).toBe(true);
      expect(writesPausedAt(s.meta, 5000)).toBe(false);
      s.apply([{ term: 1, index: 2, kind: "normal", timestampMs: 1, data: encodeCommand({ op: "pause_writes" }) }]);
      expect(writesPausedAt(s.meta, Number.MAX_SAFE_INTEGER)).toBe(true);
      s.apply([{ term: 1, index: 3, kind: "normal", timestampMs: 1, data: encodeCommand({ op: "resume_writes" }) }]);
      expect(writesPausedAt(s.meta, 0)).toBe(false);
    } finally {
      s.close();
    }
  });
});

async function stagedArchive(): Promise<{ dir: string; archive: string }> {
  const dir = tempDir();
  const staging = join(dir, "staging");
  const snap = join(staging, "raft", "snapshots", "0000000000000001-0000000000000005");
  fs.mkdirSync(snap, { recursive: true });
  fs.mkdirSync(join(staging, "store"));
  fs.writeFileSync(join(snap, "state.db"), "image");
  const sha = new Bun.CryptoHasher("sha256").update("image").digest("hex");
  fs.writeFileSync(join(snap, "meta.json"), JSON.stringify({ term: 1, index: 5, clusterId: "c", stateSha256: sha }));
  fs.writeFileSync(join(staging, "raft", "RESTORED"), "{}");
  fs.writeFileSync(join(staging, "metadata.json"), JSON.stringify({ cluster_id: "c" }));
  fs.mkdirSync(join(staging, "etc", "svc"), { recursive: true });
  fs.writeFileSync(join(staging, "etc", "svc", "config.toml"), `node_id = "n1"\n`);
  const archive = join(dir, fullBackupName(Date.UTC(2026, 0, 2)));
  await writeArchive(staging, archive);
  return { dir, archive };
}

describe("archive verification", () => {
  test("an archive as written verifies: every file matches its manifest and the snapshot its meta.json", async () => {
    const { archive } = await stagedArchive();
    expect(archive.endsWith("svc-backup-20260102.tar.gz")).toBe(true);
    const check = await verifyArchive(archive);
    expect(check.problems).toEqual([]);
    expect(check.ok).toBe(true);
    expect(check.snapshot).toEqual({ term: 1, index: 5, clusterId: "c" });
  });

  test("the image is in the archive once, beside an empty store/ for SPEC §4.5 to copy back", async () => {
    const { archive } = await stagedArchive();
    const entries: string[] = [];
    await tar.t({ file: archive, onReadEntry: (e) => entries.push(`${e.type} ${e.path}`) });
    expect(entries).toContain("Directory store/");
    expect(entries.filter((e) => e.endsWith("state.db"))).toEqual(["File raft/snapshots/0000000000000001-0000000000000005/state.db"]);
  });

  test("a changed file, a missing one and one the manifest does not list are each reported", async () => {
    const { dir, archive } = await stagedArchive();
    const out = join(dir, "out");
    fs.mkdirSync(out);
    await tar.x({ file: archive, cwd: out });
    fs.writeFileSync(join(out, "raft", "snapshots", "0000000000000001-0000000000000005", "meta.json"), JSON.stringify({ term: 1, index: 5, clusterId: "c", stateSha256: "0" }));
    fs.rmSync(join(out, "metadata.json"));
    fs.writeFileSync(join(out, "extra.txt"), "x");
    const damaged = join(dir, "damaged.tar.gz");
    await tar.c({ gzip: true, file: damaged, cwd: out }, fs.readdirSync(out));
    const check = await verifyArchive(damaged);
    expect(check.ok).toBe(false);
    expect(check.problems.some((p) => p.startsWith("raft/snapshots/0000000000000001-0000000000000005/meta.json does not match its checksum"))).toBe(true);
    expect(check.problems).toContain("metadata.json is missing");
    expect(check.problems).toContain("extra.txt is in the archive but not in the manifest");
  });

  test("a symbolic link in the archive does not verify, even with every file in the manifest: extracted, the node would write where it points", async () => {
    const { dir, archive } = await stagedArchive();
    const out = join(dir, "out");
    fs.mkdirSync(out);
    await tar.x({ file: archive, cwd: out });
    fs.symlinkSync(join(dir, "victim"), join(out, "raft", "wal"));
    const linked = join(dir, "linked.tar.gz");
    await tar.c({ gzip: true, file: linked, cwd: out }, fs.readdirSync(out));
    const check = await verifyArchive(linked);
    expect(check.ok).toBe(false);
    expect(check.problems).toContain(`raft/wal is a SymbolicLink entry (to ${join(dir, "victim")}): a backup holds only files and directories (extracted, it could make the node write outside its data directory)`);
  });

  test("an archive with a sound manifest but no store/ or etc/svc/ does not verify: a full backup holds both", async () => {
    const { dir, archive } = await stagedArchive();
    const out = join(dir, "out");
    fs.mkdirSync(out);
    await tar.x({ file: archive, cwd: out });
    const manifest = fs.readFileSync(join(out, "MANIFEST.sha256"), "utf8").split("\n").filter((l) => !l.endsWith("etc/svc/config.toml")).join("\n");
    fs.writeFileSync(join(out, "MANIFEST.sha256"), manifest);
    const partial = join(dir, "partial.tar.gz");
    await tar.c({ gzip: true, file: partial, cwd: out }, ["MANIFEST.sha256", "metadata.json", "raft"]);
    const check = await verifyArchive(partial);
    expect(check.ok).toBe(false);
    expect(check.missing).toEqual(["store/", "etc/svc/"]);
    expect(check.problems).toContain("store/ is missing");
    expect(check.problems).toContain("etc/svc/ is missing");
  });

  test("a whole full backup in an uncompressed or a zstd-compressed tar does not verify: a full backup is gzip-compressed, and `tar xzf` reads no other", async () => {
    const { dir, archive } = await stagedArchive();
    const out = join(dir, "out");
    fs.mkdirSync(out);
    await tar.x({ file: archive, cwd: out });
    const plain = join(dir, "plain.tar");
    await tar.c({ file: plain, cwd: out }, fs.readdirSync(out));
    const zstd = join(dir, "zstd.tar.zst");
    await tar.c({ zstd: true, file: zstd, cwd: out }, fs.readdirSync(out));
    for (const [path, compression, stored] of [[plain, "none", "an uncompressed tar"], [zstd, "zstd", "a zstd-compressed tar"]] as const) {
      const check = await verifyArchive(path);
      // Its files are read and checked all the same: gzip-compressed, it is a sound backup.
      expect({ path, ok: check.ok, compression: check.compression, problems: check.problems, missing: check.missing, notBackup: check.notBackup }).toEqual({
        path, ok: false, compression, missing: [], notBackup: null,
        problems: [`the archive is ${stored}, not gzip-compressed: a full backup is a gzip-compressed tar (\`tar xzf\`, which a restore runs, cannot read this one)`],
      });
      expect(check.snapshot).toEqual({ term: 1, index: 5, clusterId: "c" });
    }
    expect((await verifyArchive(archive)).compression).toBe("gzip");
  });

  test("a file that is not a gzip tar does not verify", async () => {
    const path = join(tempDir(), "svc-backup-20260101.tar.gz");
    fs.writeFileSync(path, "not an archive");
    expect((await verifyArchive(path)).ok).toBe(false);
  });
});

describe("svc admin backup verify", () => {
  const main = join(import.meta.dir, "../../src/main.ts");
  function verify(path: string): { exitCode: number; stderr: string } {
    const r = Bun.spawnSync([process.execPath, main, "admin", "backup", "verify", path], { stdout: "pipe", stderr: "pipe", env: { ...process.env, NO_COLOR: "1" } });
    return { exitCode: r.exitCode, stderr: r.stderr.toString() };
  }

  test("given the backup directory, it names the newest archive there instead of calling the directory damaged", async () => {
    const { archive } = await stagedArchive();
    const dir = join(archive, "..");
    expect(verify(dir)).toEqual({
      exitCode: 2,
      stderr: `svc: ${dir} is a directory, not a backup archive\n  → give the archive to verify, e.g. \`svc admin backup verify ${archive}\` (the newest there)\n`,
    });
    const empty = tempDir();
    expect(verify(empty).stderr).toContain(`give the svc-backup-<YYYYMMDD>.tar.gz file to verify (${empty} holds none)`);
  });

  test("a gzip tar of some other directory is refused as no svc backup, naming what a full backup holds (exit 1), not every file in it", async () => {
    const dir = tempDir();
    fs.mkdirSync(join(dir, "photos", "2025"), { recursive: true });
    for (let i = 0; i < 30; i++) fs.writeFileSync(join(dir, "photos", "2025", `${i}.jpg`), `jpeg ${i}`);
    const other = join(dir, "photos.tar.gz");
    await tar.c({ gzip: true, file: other, cwd: dir }, ["photos"]);
    const r = Bun.spawnSync([process.execPath, main, "admin", "backup", "verify", other], { stdout: "pipe", stderr: "pipe", env: { ...process.env, NO_COLOR: "1" } });
    expect(r.exitCode).toBe(1);
    const parts = "MANIFEST.sha256, metadata.json, raft/RESTORED, a snapshot in raft/snapshots/, store/, etc/svc/";
    expect(r.stdout.toString()).toBe(`${other}: NOT A SVC BACKUP\n  the archive holds none of what a full backup holds: ${parts}\n`);
    expect(r.stderr.toString()).toBe(`svc: ${other} is not a svc backup: the archive holds none of ${parts}\n  → give a svc-backup-<YYYYMMDD>.tar.gz that \`svc admin backup full\` wrote\n`);
  });

  test("an archive that lacks part of a full backup is refused naming the parts (exit 1)", async () => {
    const { dir, archive } = await stagedArchive();
    const out = join(dir, "out");
    fs.mkdirSync(out);
    await tar.x({ file: archive, cwd: out });
    const partial = join(dir, "partial.tar.gz");
    await tar.c({ gzip: true, file: partial, cwd: out }, ["MANIFEST.sha256", "raft"]);
    const r = Bun.spawnSync([process.execPath, main, "admin", "backup", "verify", partial], { stdout: "pipe", stderr: "pipe", env: { ...process.env, NO_COLOR: "1" } });
    expect(r.exitCode).toBe(1);
    expect(r.stdout.toString()).toStartWith(`${partial}: INCOMPLETE\n`);
    expect(r.stderr.toString()).toBe(`svc: ${partial} is not a whole full backup: it lacks metadata.json, store/, etc/svc/\n` +
      "  → use another backup (an older one, or another copy of this one), or make one with `svc admin backup full`\n");
  });

  test("a whole full backup in an uncompressed tar is refused as not gzip-compressed, saying how to compress it (exit 1); compressed so, it verifies", async () => {
    const { dir, archive } = await stagedArchive();
    const plain = join(dir, "svc-backup-20260102.tar");
    fs.writeFileSync(plain, Bun.gunzipSync(fs.readFileSync(archive)));
    const r = Bun.spawnSync([process.execPath, main, "admin", "backup", "verify", plain], { stdout: "pipe", stderr: "pipe", env: { ...process.env, NO_COLOR: "1" } });
    expect(r.exitCode).toBe(1);
    expect(r.stdout.toString()).toBe(`${plain}: NOT GZIP-COMPRESSED\n  the archive is an uncompressed tar, not gzip-compressed: a full backup is a gzip-compressed tar (\`tar xzf\`, which a restore runs, cannot read this one)\n`);
    expect(r.stderr.toString()).toBe(`svc: ${plain} holds a whole full backup, but as an uncompressed tar: a full backup is gzip-compressed, and \`tar xzf\` cannot read this one\n` +
      `  → compress it with gzip (\`gzip -c ${plain} > svc-backup-<YYYYMMDD>.tar.gz\`, dated as the backup) and verify that, or use the archive \`svc admin backup full\` wrote\n`);
    const gzipped = join(dir, "svc-backup-20260103.tar.gz");
    fs.writeFileSync(gzipped, Bun.gzipSync(fs.readFileSync(plain)));
    const again = Bun.spawnSync([process.execPath, main, "admin", "backup", "verify", gzipped], { stdout: "pipe", stderr: "pipe", env: { ...process.env, NO_COLOR: "1" } });
    expect({ exitCode: again.exitCode, stderr: again.stderr.toString() }).toEqual({ exitCode: 0, stderr: "" });
    expect(again.stdout.toString()).toStartWith(`${gzipped}: ok, `);
  });

  test("a truncated archive and a file that is not gzip are each refused with what happened, no stack trace (exit 1)", async () => {
    const { dir, archive } = await stagedArchive();
    const whole = fs.readFileSync(archive);
    const cut = join(dir, "cut.tar.gz");
    fs.writeFileSync(cut, whole.subarray(0, Math.floor(whole.length / 2)));
    const text = join(dir, "notes.tar.gz");
    fs.writeFileSync(text, "these are notes, not an archive\n");
    const run = (path: string) => {
      const r = Bun.spawnSync([process.execPath, main, "admin", "backup", "verify", path], { stdout: "pipe", stderr: "pipe", env: { ...process.env, NO_COLOR: "1" } });
      return { exitCode: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
    };
    const truncated = run(cut);
    expect(truncated.exitCode).toBe(1);
    expect(truncated.stdout).toBe(`${cut}: DAMAGED\n  the archive is cut short: it cannot be read to its end (zlib: unexpected end of file)\n`);
    expect(truncated.stderr).toStartWith(`svc: ${cut} does not verify\n  → use another backup`);
    const notGzip = run(text);
    expect(notGzip.exitCode).toBe(1);
    expect(notGzip.stdout).toBe(`${text}: NOT A SVC BACKUP\n  the file is not gzip-compressed (a full backup is a gzip-compressed tar)\n`);
    expect(notGzip.stderr).toBe(`svc: ${text} is not a svc backup: the file is not gzip-compressed\n  → give a svc-backup-<YYYYMMDD>.tar.gz that \`svc admin backup full\` wrote\n`);
    for (const r of [truncated, notGzip]) expect(`${r.stdout}${r.stderr}`).not.toMatch(/^\s+at /m);
  });
});

describe("retention", () => {
  test("dated full backups older than the limit are removed by the day in their name; latest.tar.gz and other files stay", async () => {
    const dir = tempDir();
    for (const n of ["svc-backup-20251201.tar.gz", "svc-backup-20260101.tar.gz", "svc-backup-20260130.tar.gz", "latest.tar.gz", "notes.txt"]) fs.writeFileSync(join(dir, n), "");
    const removed = await applyRetention(openDestination(dir), 30 * 86_400_000, Date.UTC(2026, 0, 31));
    expect(removed).toEqual(["svc-backup-20251201.tar.gz"]);
    expect(fs.readdirSync(dir).sort()).toEqual(["latest.tar.gz", "notes.txt", "svc-backup-20260101.tar.gz", "svc-backup-20260130.tar.gz"]);
    expect(fullBackupDateMs("svc-backup-2026013.tar.gz")).toBeNull();
  });
});

describe("init-cluster --bootstrap's cluster id", () => {
  const snapshot = { clusterId: "old", index: 42, term: 3, stateSha256: "ab" };
  test("the same restored snapshot and member list give the same id on every node, in any order of members", () => {
    expect(derivedClusterId(snapshot, ["n1", "n2", "n3"])).toBe(derivedClusterId(snapshot, ["n3", "n1", "n2"]));
    expect(derivedClusterId(snapshot, ["n1", "n2", "n3"])).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });
  test("another snapshot or another member list gives another id", () => {
    const base = derivedClusterId(snapshot, ["n1", "n2", "n3"]);
    expect(derivedClusterId({ ...snapshot, index: 43 }, ["n1", "n2", "n3"])).not.toBe(base);
    expect(derivedClusterId(snapshot, ["n1", "n2", "n4"])).not.toBe(base);
  });
});

describe("[backup] in the configuration", () => {
  test("no destination and the documented retentions by default; dir, offsite and retention as written; a misspelt key is refused", () => {
    const defaults = parseConfig(`node_id = "a"\n`, "config.toml");
    if (!defaults.ok) throw new Error(JSON.stringify(defaults.problems));
    expect(defaults.config.backup).toEqual({ dir: "", offsite: "", retainMs: 30 * 86_400_000, offsiteRetainMs: 365 * 86_400_000 });
    const set = parseConfig(`node_id = "a"\n[backup]\ndir = "/var/backups/svc"\noffsite = "s3://bucket/offsite"\nretain_days = 7\n`, "config.toml");
    if (!set.ok) throw new Error(JSON.stringify(set.problems));
    expect(set.config.backup).toEqual({ dir: "/var/backups/svc", offsite: "s3://bucket/offsite", retainMs: 7 * 86_400_000, offsiteRetainMs: 365 * 86_400_000 });
    const wrong = parseConfig(`node_id = "a"\n[backup]\nretain = 7\nretain_days = 0\n`, "config.toml");
    expect(wrong.ok).toBe(false);
    if (!wrong.ok) expect(wrong.problems.length).toBe(2);
  });
});
