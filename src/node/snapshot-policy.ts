// How the node keeps its log and store in bounds. Three rules, each for one purpose:
//
//   checkpoint  once snapshot_interval entries are applied since the last (at the end of the
//               batch that reaches the count): the store is made durable
//               up to an applied index (its SQLite WAL copied into the file and both synced,
//               off the applying thread) and the index is recorded in raft/checkpoint. Costs
//               what changed. A restart replays only the WAL after the store's applied index.
//   compaction  the Raft core holds the log in memory only back to a point: at every
//               checkpoint, and whenever the entries applied since the last compaction pass
//               a byte budget (a sixty-fourth of max_memory_mb, at most 16 MiB), whether or
//               not a checkpoint came. The entries stay in the WAL on disk.
//   image       a full copy of the store (a snapshot directory), made rarely: when the WAL
//               kept since the newest image reaches the store's size (at least 64 MiB) —
//               with snapshot_interval lowered below 10,000, when what was written since the
//               newest image reaches that share of the store's size (at least eight WAL
//               segments): SPEC's "lower it when the WAL grows too large" —, on
//               POST /admin/snapshot, and for a follower that needs entries the leader's WAL
//               no longer holds. WAL segments go only once an image covers them, so a
//               cleared or damaged store can always be rebuilt from the newest image and the
//               WAL kept after it.
//
// So the leader keeps in memory at most the budget's worth of entries a lagging follower
// may need; a follower further behind is sent them read back from the WAL (peer-messages.ts),
// and only one behind the WAL is sent an image (made for it when the newest one is older
// than what the leader holds), then the entries after it.

import type { Entry, Membership, SnapshotMeta } from "../raft/index.ts";
import type { SnapshotRecord } from "../io/index.ts";
import { SvcError, errorMessage } from "../util/errors.ts";
import type { NodeContext } from "./context.ts";
import { memoryBudget } from "./memory-budget.ts";

export interface SnapshotOutcome {
  index: number;
  term: number;
  /** Where the snapshot is (its directory in production). */
  dir: string;
  sizeBytes: number;
  durationMs: number;
}

/** Images the node keeps itself; older ones go (the cleanup job also removes by age). */
export const snapshotsRetainedCount = 3;
/** An image is due once the WAL kept since the newest one reaches the store's size, and at least this. */
export const imageLogBytesMinDefault = 64 * 1024 * 1024;
/** The snapshot_interval (the default) below which images come in proportion sooner (see imageDue). */
const imageIntervalReference = 10_000;
/** With snapshot_interval lowered, an image waits for at least this many WAL segments' worth of writes. */
const imageSegmentsMin = 8;
/** A checkpoint is due when the store's SQLite WAL reaches this, whatever the entry count. */
const storeWalBytesMax = 64 * 1024 * 1024;
/**
 * How often the store's SQLite WAL file is measured (a stat): maybeAuto runs after every apply,
 * and a stat per write was a measurable share of a lone client's write.
 */
const storeWalProbeMs = 100;
/** A failing image or checkpoint (a full disk, say) is retried, but not on every write. */
const retryAfterFailureMs = 10_000;
const largeCompactionBytes = 16 * 1024 * 1024;
const idleTicksBeforeCollect = 5;

/** What the node had applied and imaged when last seen; equal twice in a row = idle. */
interface Progress {
  readonly appliedIndex: number;
  readonly snapshotIndex: number;
}

export class SnapshotPolicy {
  private inFlight: Promise<SnapshotOutcome> | null = null;
  private checkpointInFlight = false;
  /** The checkpoint in progress, for stop to wait out (its worker holds a connection to the store). */
  private checkpointRun: Promise<void> | null = null;
  /** The applied index the last checkpoint began at (the next is due snapshot_interval after it). */
  private checkpointStartedAt: number;
  /** Durable up to here (raft/checkpoint). */
  private checkpointIndexValue: number;
  private nextImageAtMs = 0;
  private nextCheckpointAtMs = 0;
  private lastCheckpointMs = 0;
  private nextStoreWalProbeMs = 0;
  /** Bytes of entry data applied since the core's in-memory log was last compacted. */
  private logBytesInMemory = 0;
  /** Bytes of entry data applied since the newest image began (null: not known yet; the WAL's size is taken). */
  private bytesSinceImage: number | null = null;
  private lastSeen: Progress | null = null;
  private idleTicks = 0;
  private collectedAt: Progress | null = null;
  /** Counts installs of snapshots from the leader: a checkpoint that began before one is stale. */
  private installs = 0;
  /** The WAL was trimmed through here (an image, capped by the archive). */
  private compactedThrough = 0;
  private compactionInFlight = false;

  constructor(private readonly ctx: NodeContext, checkpointIndex: number, private readonly imageLogBytesMin = imageLogBytesMinDefault) {
    this.checkpointIndexValue = checkpointIndex;
    this.checkpointStartedAt = Math.max(checkpointIndex, ctx.store.meta.appliedIndex);
  }

  get inProgress(): boolean {
    return this.inFlight !== null;
  }

  get checkpointIndex(): number {
    return this.checkpointIndexValue;
  }

  /** Entries were applied: they count toward the in-memory log's budget. */
  applied(entries: readonly Entry[]): void {
    let bytes = 0;
    for (const e of entries) bytes += e.data.length;
    this.logBytesInMemory += bytes;
    if (this.bytesSinceImage !== null) this.bytesSinceImage += bytes;
  }

  /** An image (POST /admin/snapshot, a backup): take one now, or join the one in progress. */
  take(): Promise<SnapshotOutcome> {
    this.ctx.checkServing();
    this.inFlight ??= this.imageNow().finally(() => {
      this.inFlight = null;
    });
    return this.inFlight;
  }

  /**
   * The image to send a follower that needs entries from `index` on: the newest image when it
   * covers that far, else one made now (the store has applied at least as far).
   */
  async imageAtLeast(index: number): Promise<SnapshotMeta> {
    let record = this.ctx.io.snapshots.latest();
    if (record === null || record.index < index) {
      await this.take();
      record = this.ctx.io.snapshots.latest();
    }
    if (record === null || record.index < index) {
      throw new SvcError("SNAPSHOT_FAILED", `no image covers index ${index} (the newest ends at ${record?.index ?? 0})`);
    }
    return { index: record.index, term: record.term, membership: record.membership };
  }

  /**
   * Wait for an image or a checkpoint in progress to end (stop): either one's worker holds a
   * connection to the store, which must not outlive the store's own close (a start in the same
   * process would find the store locked).
   */
  async settle(): Promise<void> {
    if (this.inFlight !== null) await this.inFlight.catch(() => undefined);
    if (this.checkpointRun !== null) await this.checkpointRun.catch(() => undefined);
  }

  /** A snapshot from the leader replaced the store: checkpoints start over from it. */
  installed(index: number): void {
    this.installs++;
    this.checkpointStartedAt = Math.max(this.checkpointStartedAt, index);
    this.logBytesInMemory = 0;
    this.bytesSinceImage = 0;
  }

  /** Checked after applying and on every tick. */
  maybeAuto(): void {
    const { ctx } = this;
    if (ctx.fatalError !== null || ctx.stopped) return;
    const now = ctx.clock.monotonicMs();
    const applied = ctx.store.meta.appliedIndex;
    // Due every snapshot_interval entries, and sooner when a few large entries (a bulk load)
    // have grown the store's own SQLite WAL past a bound: what a checkpoint copies stays small.
    const dueByCount = applied - this.checkpointStartedAt >= ctx.config.snapshotIntervalEntries;
    const dueBySize = applied > this.checkpointStartedAt && now >= this.lastCheckpointMs + 1000 && now >= this.nextStoreWalProbeMs && this.storeWalFull(now);
    if (!this.checkpointInFlight && (dueByCount || dueBySize) && now >= this.nextCheckpointAtMs) {
      this.lastCheckpointMs = now;
      this.checkpointRun = this.checkpointNow();
    }
    if (this.logBytesInMemory >= this.memoryBudgetBytes()) this.compactInMemory();
    if (this.inFlight === null && ctx.recovery === "healthy" && now >= this.nextImageAtMs && this.imageDue()) this.take().catch(() => undefined);
    this.compactBehindArchive();
  }

  /**
   * With archiving on, an image trims the WAL only as far as the archive reaches; once the
   * archive passes that point, the segments the newest image covers go without a new image.
   */
  private compactBehindArchive(): void {
    const { ctx } = this;
    if (ctx.io.walArchive === undefined || this.inFlight !== null || this.compactionInFlight) return;
    const through = ctx.walRemovableThrough(ctx.snapshotIndex);
    if (through <= this.compactedThrough) return;
    this.compactionInFlight = true;
    this.compactedThrough = through;
    void ctx.io.log.compact(through).then(
      (removed) => ctx.metrics.walSegmentsRemoved.inc(removed),
      (e: unknown) => ctx.logger.warn("could not remove archived WAL segments", { error: errorMessage(e) }),
    ).finally(() => {
      this.compactionInFlight = false;
    });
  }

  /**
   * Once writes stop for a moment, collect the garbage their bodies and entries left: the
   * engine otherwise keeps it, and the process holds hundreds of megabytes it no longer uses.
   */
  collectWhenIdle(): void {
    if (this.inFlight !== null) {
      this.lastSeen = null;
      this.idleTicks = 0;
      return;
    }
    const seen: Progress = { appliedIndex: this.ctx.store.meta.appliedIndex, snapshotIndex: this.ctx.snapshotIndex };
    if (!sameProgress(seen, this.lastSeen)) {
      this.lastSeen = seen;
      this.idleTicks = 0;
      return;
    }
    this.idleTicks++;
    if (this.idleTicks === idleTicksBeforeCollect && !sameProgress(this.collectedAt, seen)) {
      this.collectedAt = seen;
      this.ctx.io.collectGarbage(true);
    }
  }

  /** After an image from the leader was installed: keep only the newest few. */
  pruneAfterInstall(): void {
    void this.ctx.io.snapshots.prune(snapshotsRetainedCount).catch((e: unknown) => {
      this.ctx.logger.warn("could not remove old snapshots", { error: errorMessage(e) });
    });
  }

  private memoryBudgetBytes(): number {
    return memoryBudget(this.ctx.config.maxMemoryBytes).logBytesMax;
  }

  private storeWalFull(now: number): boolean {
    this.nextStoreWalProbeMs = now + storeWalProbeMs;
    return this.ctx.store.walFileBytes() >= storeWalBytesMax;
  }

  /**
   * An image is due when the WAL kept since the newest one reaches the store's size. A
   * snapshot_interval lowered below the default asks for a smaller WAL: then also when what was
   * written since the newest image reaches that share of the store's size, and at least
   * imageSegmentsMin WAL segments (an image cannot free the segment being written, and a WAL of
   * a few segments is not one to shrink at the price of copying the store).
   */
  private imageDue(): boolean {
    const { ctx } = this;
    // While the archive lags behind the newest image, a newer image would free nothing more.
    if (ctx.walRemovableThrough(ctx.snapshotIndex) < ctx.snapshotIndex) return false;
    const walBytes = ctx.io.log.stats().sizeBytes;
    this.bytesSinceImage ??= walBytes;
    // The store's size is a query: asked only once past the floor (after every apply it was a
    // tenth of a lone client's write).
    if (walBytes >= this.imageLogBytesMin && walBytes >= ctx.store.sizeBytes()) return true;
    const share = ctx.config.snapshotIntervalEntries / imageIntervalReference;
    if (share >= 1 || this.bytesSinceImage < imageSegmentsMin * ctx.config.wal.segmentSizeBytes) return false;
    return this.bytesSinceImage >= ctx.store.sizeBytes() * share;
  }

  /** Drop the applied log from the core's memory; the WAL keeps it on disk. */
  private compactInMemory(): void {
    const { ctx } = this;
    const meta = ctx.store.meta;
    this.compactCoreTo({ index: meta.appliedIndex, term: meta.appliedTerm, membership: meta.membership });
  }

  private compactCoreTo(meta: SnapshotMeta): void {
    const { ctx } = this;
    if (ctx.stopped || meta.index <= ctx.core.status().snapshotIndex) return;
    ctx.core.compact(meta);
    const dropped = this.logBytesInMemory;
    this.logBytesInMemory = 0;
    // A compaction that dropped a large log leaves that much garbage: collect it now, while
    // it is known to be there, instead of letting the process grow until the next cycle.
    if (dropped >= largeCompactionBytes) ctx.io.collectGarbage(false);
  }

  private async checkpointNow(): Promise<void> {
    const { ctx } = this;
    this.checkpointInFlight = true;
    const startedMs = ctx.clock.monotonicMs();
    const installsAtStart = this.installs;
    this.checkpointStartedAt = ctx.store.meta.appliedIndex;
    try {
      const done = await ctx.store.checkpointDurably();
      // A snapshot installed meanwhile replaced the store this checkpoint read.
      if (this.installs !== installsAtStart || ctx.stopped) return;
      if (done.appliedIndex > this.checkpointIndexValue) {
        await ctx.io.log.saveCheckpoint({ index: done.appliedIndex, term: done.appliedTerm, clusterId: ctx.clusterId });
        if (this.installs !== installsAtStart || ctx.stopped) return;
        this.checkpointIndexValue = done.appliedIndex;
      }
      this.compactCoreTo({ index: done.appliedIndex, term: done.appliedTerm, membership: done.membership as Membership });
      const durationMs = ctx.clock.monotonicMs() - startedMs;
      ctx.metrics.checkpointsTotal.inc();
      ctx.metrics.checkpointDuration.observe(durationMs / 1000);
      ctx.logger.debug("checkpoint", { index: done.appliedIndex, durationMs: Math.round(durationMs) });
    } catch (e) {
      this.nextCheckpointAtMs = ctx.clock.monotonicMs() + retryAfterFailureMs;
      ctx.metrics.checkpointFailuresTotal.inc();
      ctx.logger.error("checkpoint failed; retried later", { error: errorMessage(e) });
    } finally {
      this.checkpointInFlight = false;
    }
  }

  private async imageNow(): Promise<SnapshotOutcome> {
    const { ctx } = this;
    const startedMs = ctx.clock.monotonicMs();
    ctx.metrics.snapshotInProgress.set(1);
    // What is applied from here on comes after the image; should it fail, it all counts again.
    const bytesBefore = this.bytesSinceImage;
    this.bytesSinceImage = 0;
    try {
      const record: SnapshotRecord<Membership> | null = await ctx.io.snapshots.take(ctx.store, ctx.clusterId, ctx.snapshotIndex);
      if (record === null) {
        // Nothing applied since the newest image, which checks: that image is this request's
        // answer. It completes like any other, so that whoever waits on the snapshot metrics
        // (SPEC §4.4 step 2) sees it complete rather than wait for ever.
        const latest = ctx.io.snapshots.latest();
        const durationMs = ctx.clock.monotonicMs() - startedMs;
        ctx.metrics.snapshotsTotal.inc();
        ctx.metrics.snapshotDuration.observe(durationMs / 1000);
        ctx.metrics.snapshotLastCompletedTimestamp.set(ctx.clock.nowMs() / 1000);
        if (latest !== null) ctx.metrics.snapshotSizeBytes.set(latest.sizeBytes);
        ctx.logger.info("snapshot up to date: nothing applied since the newest image", { index: ctx.snapshotIndex, dir: latest?.location ?? "" });
        return { index: ctx.snapshotIndex, term: latest?.term ?? 0, dir: latest?.location ?? "", sizeBytes: latest?.sizeBytes ?? 0, durationMs };
      }
      if (!ctx.stopped) {
        // The image is a rebuild point: the WAL it covers can go, and the core's memory too.
        this.compactCoreTo({ index: record.index, term: record.term, membership: record.membership });
        const removed = await ctx.io.log.compact(ctx.walRemovableThrough(record.index));
        this.compactedThrough = Math.max(this.compactedThrough, ctx.walRemovableThrough(record.index));
        ctx.metrics.walSegmentsRemoved.inc(removed);
        await ctx.io.snapshots.prune(snapshotsRetainedCount);
      }
      ctx.snapshotIndex = Math.max(ctx.snapshotIndex, record.index);
      const durationMs = ctx.clock.monotonicMs() - startedMs;
      ctx.metrics.snapshotsTotal.inc();
      ctx.metrics.snapshotDuration.observe(durationMs / 1000);
      ctx.metrics.snapshotLastCompletedTimestamp.set(ctx.clock.nowMs() / 1000);
      ctx.metrics.snapshotSizeBytes.set(record.sizeBytes);
      ctx.logger.info("snapshot taken", { index: record.index, term: record.term, dir: record.location, sizeBytes: record.sizeBytes, durationMs: Math.round(durationMs) });
      return { index: record.index, term: record.term, dir: record.location, sizeBytes: record.sizeBytes, durationMs };
    } catch (e) {
      if (bytesBefore !== null) this.bytesSinceImage = (this.bytesSinceImage ?? 0) + bytesBefore;
      this.nextImageAtMs = ctx.clock.monotonicMs() + retryAfterFailureMs;
      ctx.metrics.snapshotFailuresTotal.inc();
      ctx.logger.error("snapshot failed", { error: errorMessage(e) });
      throw e instanceof SvcError ? e : new SvcError("SNAPSHOT_FAILED", `snapshot failed: ${errorMessage(e)}`, { cause: e });
    } finally {
      ctx.metrics.snapshotInProgress.set(0);
    }
  }
}

function sameProgress(a: Progress | null, b: Progress | null): boolean {
  return a !== null && b !== null && a.appliedIndex === b.appliedIndex && a.snapshotIndex === b.snapshotIndex;
}
