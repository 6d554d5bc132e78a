// Full backup (SPEC §4.4) in one run: pause writes under a lease, take an image on this node
// and wait for it, link it into a staging tree (the node may prune the image meanwhile; the
// links keep its data), resume writes, archive and verify, then retention and the off-site
// copy. Writes are resumed on every way out: success, failure, and interrupt() (SIGINT); a
// run killed -9 leaves a pause whose lease runs out by itself.

import * as fs from "node:fs";
import { basename, join, resolve } from "node:path";
import { readSnapshotMeta, snapshotMetaFile, snapshotStateFile } from "../storage/snapshots.ts";
import { encodeRestoreMarker, restoreMarkerFile } from "../storage/restore-marker.ts";
import { pauseLeaseMsMax, pauseLeaseMsMin } from "../store/index.ts";
import { SvcError, errorMessage } from "../util/errors.ts";
import { archiveDamaged, fullBackupName, metadataName, verifyArchive, writeArchive, type ArchiveCheck } from "./backup-archive.ts";
import { applyRetention, openDestination } from "./backup-destination.ts";
import { isObjectUrl } from "./s3.ts";

/** What a backup needs of the node it runs beside (over its admin API). */
export interface BackupNodeApi {
  clusterInfo(): Promise<Record<string, unknown>>;
  /**
   * Pause writes cluster-wide until now + leaseMs (renewed by calling it again): the pause's log
   * index, and the end the leader gave it, by the leader's clock (null when it did not say).
   */
  pauseWrites(leaseMs: number): Promise<{ index: number; untilMs: number | null }>;
  resumeWrites(): Promise<void>;
  /** This node's applied index. */
  appliedIndex(): Promise<number>;
  /** Take an image on this node and wait for it: its directory (absolute, on this host). */
  snapshotHere(): Promise<{ dir: string; index: number; term: number }>;
  /**
   * total_entries as `stats` counts them on this node, and the applied index it gave with them,
   * for metadata.json: what a restore's verification compares `stats` with (SPEC §4.5).
   */
  totalEntries(): Promise<TotalEntries>;
}

/** metadata.json's count of the rows (`stats`' total_entries) and the applied index they were counted at. */
export interface TotalEntries {
  total_entries: number | null;
  total_entries_applied_index: number | null;
}

/** metadata.json's count when the node could not count (the backup goes on: the archive is what matters). */
export const notCounted: TotalEntries = { total_entries: null, total_entries_applied_index: null };

export interface FullBackupOptions {
  to: string;
  dataDir: string;
  /** The configuration directory archived as etc/svc/ (/etc/svc/ on a host). */
  configDir: string;
  /**
   * Files under configDir left out of the archive (absolute paths): the keys and tokens the
   * configuration names, unless the operator asks for them (--include-secrets).
   */
  excludedFiles?: readonly string[];
  leaseMs: number;
  retainMs: number | null;
  offsite: string | null;
  offsiteRetainMs: number | null;
  nowMs: number;
  progress: (step: string) => void;
}

export interface FullBackupResult {
  archive: string;
  sizeBytes: number;
  files: number;
  snapshot: { index: number; term: number };
  pausedMs: number;
  /** Writes were paused before the run, with no end, and are left paused (pausedMs: the image under that pause). */
  leftPaused: boolean;
  removed: string[];
  offsite: string[];
  check: ArchiveCheck;
}

const appliedWaitMs = 60_000;

/**
 * What the archive is made of and where it goes, checked before writes are paused: the
 * configuration directory is archived whole, so it must exist and hold neither the data
 * directory nor the destination (they would be archived inside it, or copied into themselves).
 */
function checkPlaces(o: FullBackupOptions): void {
  const etc = resolve(o.configDir);
  const hint = "pass --etc-dir with the directory that holds only svc's configuration (/etc/svc)";
  if (fs.statSync(etc, { throwIfNoEntry: false })?.isDirectory() !== true) {
    throw new SvcError("BACKUP_FAILED", `the configuration directory ${etc} does not exist or is not a directory`, { hint });
  }
  if (within(resolve(o.dataDir), etc)) {
    throw new SvcError("BACKUP_FAILED", `the configuration directory ${etc} holds the data directory ${resolve(o.dataDir)}`, { hint });
  }
  if (isObjectUrl(o.to)) return;
  const to = resolve(o.to);
  const found = fs.statSync(to, { throwIfNoEntry: false });
  if (found !== undefined && !found.isDirectory()) {
    throw new SvcError("BACKUP_FAILED", `${to} is not a directory`, { hint: "--to names a directory (made when missing) or s3://bucket/prefix" });
  }
  if (within(to, etc)) throw new SvcError("BACKUP_FAILED", `the configuration directory ${etc} holds the destination ${to}`, { hint });
}

function within(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir.endsWith("/") ? dir : `${dir}/`);
}

/**
 * Writes paused before a backup started, as cluster-info says: null when they were not;
 * untilMs null for a pause with no end (pause-writes without --lease).
 */
export interface PauseBefore {
  untilMs: number | null;
}

export function pauseBefore(info: Record<string, unknown>): PauseBefore | null {
  if (info.writes_paused !== true) return null;
  const untilMs = typeof info.writes_paused_until === "string" ? Date.parse(info.writes_paused_until) : Number.NaN;
  return { untilMs: Number.isFinite(untilMs) ? untilMs : null };
}

export class FullBackup {
  /** This run paused writes (or renewed a pause) and owes the cluster the pause it found. */
  private paused = false;
  /** The pause found at the start (someone else's): put back at the end instead of resuming. */
  private before: PauseBefore | null = null;
  private renewTimer: ReturnType<typeof setInterval> | null = null;
  /**
   * The leader's clock minus this host's, as the last pause's answer shows it: an operator's end
   * (`before.untilMs`) is a time on the leader's clock. Taken as if the leader set the end when
   * its answer arrived, the least offset the exchange allows: what is left of the operator's
   * pause comes out too long by at most one round trip, never too short. 0 until an answer.
   */
  private leaderClockAheadMs = 0;
  private stagingDir: string | null = null;
  private localArchive: string | null = null;
  /** Checksums of the staged image files, from the image's meta.json. */
  private knownSha256 = new Map<string, string>();

  constructor(private readonly api: BackupNodeApi, private readonly o: FullBackupOptions) {}

  async run(): Promise<FullBackupResult> {
    const { api, o } = this;
    checkPlaces(o);
    removeStaleStaging(o.dataDir);
    let failure: unknown = null;
    try {
      const info = await api.clusterInfo();
      // An operator's pause (SPEC §4.4 step 1 by hand, or maintenance) is left as it was found:
      // one with no end needs no lease of ours, and is not resumed; one with an end gets it back.
      this.before = pauseBefore(info);
      const pausedAt = performance.now();
      if (this.before !== null && this.before.untilMs === null) {
        o.progress("writes are already paused with no end (pause-writes): taking the snapshot under that pause, and leaving them paused");
      } else {
        o.progress("pausing writes");
        const askedMs = this.leaseMs();
        let pauseIndex = await this.pause(askedMs);
        this.paused = true;
        // The first lease was reckoned by this host's clock; by the leader's, the operator's end
        // may be later: paused again at once to reach it (for that one round trip, a run killed
        // -9 would leave the operator's pause ending as much sooner as the leader's clock is behind).
        if (this.leaseMs() > askedMs + pauseLeaseMsMin) pauseIndex = await this.pause(this.leaseMs());
        this.renewTimer = setInterval(() => {
          this.pause(this.leaseMs()).catch((e: unknown) => o.progress(`renewing the pause failed: ${errorMessage(e)}`));
        }, Math.max(1000, Math.floor(o.leaseMs / 3)));
        await this.waitApplied(pauseIndex);
      }
      o.progress("taking a snapshot");
      // Counted beside the image while writes are paused: the rows the archive holds.
      const [image, counted] = await Promise.all([api.snapshotHere(), api.totalEntries().catch(() => notCounted)]);
      this.stage(image.dir, { ...info, ...counted });
      const writes = await this.resume();
      const pausedMs = performance.now() - pausedAt;
      o.progress(`${writes}; writing the archive`);

      const name = fullBackupName(o.nowMs);
      const local = isObjectUrl(o.to) ? join(o.dataDir, `.backup-${process.pid}-${name}`) : join(o.to, name);
      if (isObjectUrl(o.to)) this.localArchive = local;
      const staging = this.stagingDir ?? "";
      const written = await writeArchive(staging, local, (f) => o.progress(`archiving ${f}`), this.knownSha256);
      o.progress("verifying the archive");
      const check = await verifyArchive(local, (f) => o.progress(`verifying ${f}`));
      if (!check.ok) throw archiveDamaged(check);
      const dest = openDestination(o.to);
      if (isObjectUrl(o.to)) {
        o.progress(`uploading to ${o.to}`);
        await dest.put(local, name);
      }
      const removed = o.retainMs === null ? [] : await applyRetention(dest, o.retainMs, o.nowMs, new Set([name]));
      const offsite: string[] = [];
      if (o.offsite !== null) {
        o.progress(`copying off-site to ${o.offsite}`);
        offsite.push(...(await copyOffsite(local, name, o.offsite, o.offsiteRetainMs, o.nowMs)));
      }
      return { archive: dest.url === o.to && isObjectUrl(o.to) ? `${o.to.replace(/\/$/, "")}/${name}` : local, sizeBytes: written.sizeBytes, files: written.files, snapshot: { index: image.index, term: image.term }, pausedMs, leftPaused: this.before !== null && this.before.untilMs === null, removed, offsite, check };
    } catch (e) {
      failure = e;
      throw e;
    } finally {
      try {
        await this.cleanUp();
      } catch (cleanupError) {
        // The backup's own failure is what the operator needs first; the resume's comes after it.
        if (failure === null) throw cleanupError;
        throw new SvcError("BACKUP_FAILED", `${errorMessage(failure)}; then ${errorMessage(cleanupError)}`, {
          hint: "run `svc admin resume-writes` against any member; the pause ends by itself when its lease runs out",
        });
      }
    }
  }

  /** Called on SIGINT/SIGTERM: resume writes and remove what this run left, before exiting. */
  async interrupt(): Promise<void> {
    await this.cleanUp();
  }

  /**
   * The lease this run pauses under: its own, or what is left of an operator's pause found with
   * a later end. Replacing that pause by a shorter lease would end it early should this run die
   * without putting it back (killed -9).
   */
  private leaseMs(): number {
    return Math.min(pauseLeaseMsMax, Math.max(this.o.leaseMs, this.operatorLeftMs()));
  }

  /** What is left of the pause found at the start, by the leader's clock: 0 for none, one with no end, or one whose end has passed. */
  private operatorLeftMs(): number {
    const untilMs = this.before?.untilMs;
    if (untilMs === undefined || untilMs === null) return 0;
    return Math.max(0, untilMs - (Date.now() + this.leaderClockAheadMs));
  }

  /** Pause writes for leaseMs; learn the leader's clock from the end it answers with. */
  private async pause(leaseMs: number): Promise<number> {
    const { index, untilMs } = await this.api.pauseWrites(leaseMs);
    if (untilMs !== null && Number.isFinite(untilMs)) this.leaderClockAheadMs = untilMs - leaseMs - Date.now();
    return index;
  }

  private async waitApplied(index: number): Promise<void> {
    const deadline = Date.now() + appliedWaitMs;
    while ((await this.api.appliedIndex()) < index) {
      if (Date.now() > deadline) throw new SvcError("BACKUP_FAILED", `this node has not applied the pause (index ${index}) within ${appliedWaitMs / 1000} s`, { hint: "run the backup on a node that keeps up with the leader" });
      await Bun.sleep(50);
    }
  }

  /** Hard links to the image (same file system as the data directory), so a prune cannot take it. */
  private stage(imageDir: string, info: Record<string, unknown>): void {
    const { o } = this;
    const meta = readSnapshotMeta(imageDir);
    if (meta === null) throw new SvcError("BACKUP_FAILED", `the snapshot ${imageDir} has no readable meta.json`, { hint: "retry the backup" });
    const staging = join(o.dataDir, `.backup-staging-${process.pid}`);
    this.stagingDir = staging;
    fs.rmSync(staging, { recursive: true, force: true });
    const snapDir = join(staging, "raft", "snapshots", basename(imageDir));
    fs.mkdirSync(snapDir, { recursive: true, mode: 0o750 });
    fs.mkdirSync(join(staging, "store"), { mode: 0o750 });
    linkOrCopy(join(imageDir, snapshotStateFile), join(snapDir, snapshotStateFile));
    linkOrCopy(join(imageDir, snapshotMetaFile), join(snapDir, snapshotMetaFile));
    // store/ stays empty: the image is the store's consistent copy, and a node restored from the
    // archive makes its store from it (in the archive once, not twice).
    this.knownSha256 = new Map([[`raft/snapshots/${basename(imageDir)}/${snapshotStateFile}`, meta.stateSha256]]);
    fs.writeFileSync(join(staging, "raft", restoreMarkerFile), encodeRestoreMarker({
      clusterId: meta.clusterId, index: meta.index, term: meta.term, membership: meta.membership,
      archive: fullBackupName(o.nowMs), createdAt: new Date(o.nowMs).toISOString(),
    }));
    // Links are followed (configuration management keeps /etc/svc's files, or the directory
    // itself, as links): the archive holds the files they lead to. A key file stays out by the
    // file it is, however the configuration or the directory reaches it; a link leading nowhere
    // holds nothing to keep.
    const excluded = new Set((o.excludedFiles ?? []).map((p) => realPathOrNull(p) ?? resolve(p)));
    fs.cpSync(o.configDir, join(staging, "etc", "svc"), {
      recursive: true,
      dereference: true,
      filter: (from) => {
        const real = realPathOrNull(from);
        return real !== null && !excluded.has(real);
      },
    });
    fs.writeFileSync(join(staging, metadataName), `${JSON.stringify(info, null, 2)}\n`);
  }

  /** Writes as this run leaves them: resumed, or the pause found at the start put back. What was done, for the progress line. */
  private async resume(): Promise<string> {
    if (this.renewTimer !== null) clearInterval(this.renewTimer);
    this.renewTimer = null;
    const foundUntilMs = this.before?.untilMs;
    const asFound = "as they were before the backup";
    if (!this.paused) return this.before !== null && foundUntilMs === null ? `writes left paused with no end, ${asFound}` : "writes resumed";
    // Tried until it goes through or the lease would have ended it anyway.
    const deadline = Date.now() + this.o.leaseMs;
    for (;;) {
      try {
        // The pause found at the start, with an end still to come, is put back with that end.
        // The admin API takes a lease, not an end: what is left is reckoned on the leader's clock
        // (see leaderClockAheadMs), and comes out long rather than short by the round trip.
        const leftMs = this.operatorLeftMs();
        // Never shorter than the least lease the admin API takes: never ended before its end.
        if (leftMs > 0) await this.pause(Math.min(pauseLeaseMsMax, Math.max(leftMs, pauseLeaseMsMin)));
        else await this.api.resumeWrites();
        this.paused = false;
        if (foundUntilMs === undefined || foundUntilMs === null) return "writes resumed";
        const end = new Date(foundUntilMs).toISOString();
        return leftMs > 0 ? `writes left paused until ${end}, ${asFound}` : `writes resumed (the pause found before the backup ended at ${end})`;
      } catch (e) {
        if (Date.now() > deadline) {
          this.paused = false;
          throw new SvcError("BACKUP_FAILED", `cannot resume writes: ${errorMessage(e)}`, { hint: "run `svc admin resume-writes`; the pause ends by itself when its lease runs out" });
        }
        await Bun.sleep(500);
      }
    }
  }

  private async cleanUp(): Promise<void> {
    try {
      await this.resume();
    } finally {
      if (this.stagingDir !== null) fs.rmSync(this.stagingDir, { recursive: true, force: true });
      if (this.localArchive !== null) fs.rmSync(this.localArchive, { force: true });
      this.stagingDir = null;
      this.localArchive = null;
    }
  }
}

/** What a backup killed -9 left in the data directory (its links pin old images' space). */
function removeStaleStaging(dataDir: string): void {
  let names: string[];
  try {
    names = fs.readdirSync(dataDir);
  } catch {
    return;
  }
  for (const name of names) {
    const m = /^\.backup-(?:staging-)?(\d+)/.exec(name);
    if (m === null || processAlive(Number(m[1]))) continue;
    fs.rmSync(join(dataDir, name), { recursive: true, force: true });
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

function linkOrCopy(from: string, to: string): void {
  try {
    fs.linkSync(from, to);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EXDEV" && (e as NodeJS.ErrnoException).code !== "EPERM") throw e;
    fs.copyFileSync(from, to);
  }
}

/** The off-site copy (SPEC §2.1): the dated archive and latest.tar.gz, dated copies retained. */
export async function copyOffsite(localArchive: string, name: string, url: string, retainMs: number | null, nowMs: number): Promise<string[]> {
  const dest = openDestination(url);
  await dest.put(localArchive, name);
  await dest.put(localArchive, "latest.tar.gz");
  if (retainMs !== null) await applyRetention(dest, retainMs, nowMs, new Set([name]));
  return [name, "latest.tar.gz"];
}

/** Where `path` leads once every link is followed; null when it leads nowhere. */
function realPathOrNull(path: string): string | null {
  try {
    return fs.realpathSync(path);
  } catch {
    return null;
  }
}
