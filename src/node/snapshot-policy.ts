// When the node snapshots, and what a snapshot does once taken: compact the Raft log and the
// log store behind it, prune old snapshots, and collect the garbage the dropped log leaves.
//
// Automatic snapshots copy the whole store, so under a high write rate snapshot_interval
// alone would keep one running all the time. After each, the next automatic one waits
// `idleFactor` times as long as it took: at most a tenth of the time goes to them (each
// copies the whole store, and that I/O delays the log's syncs). POST /admin/snapshot is not
// held back.

import type { Entry } from "../raft/index.ts";
import { SvcError, errorMessage } from "../util/errors.ts";
import type { NodeContext } from "./context.ts";

export interface SnapshotOutcome {
  index: number;
  term: number;
  /** Where the snapshot is (its directory in production). */
  dir: string;
  sizeBytes: number;
  durationMs: number;
}

/** Snapshots the node keeps itself; older ones go (the cleanup job also removes by age). */
export const snapshotsRetainedCount = 3;
const idleFactor = 10;
/** A failing snapshot (a full disk, say) is retried, but not on every write. */
const retryAfterFailureMs = 10_000;
const largeCompactionBytes = 16 * 1024 * 1024;
const idleTicksBeforeCollect = 5;

/** What the node had applied and snapshotted when last seen; equal twice in a row = idle. */
interface Progress {
  readonly appliedIndex: number;
  readonly snapshotIndex: number;
}

export class SnapshotPolicy {
  private inFlight: Promise<SnapshotOutcome> | null = null;
  private nextAutoAtMs = 0;
  /** Bytes of entry data applied since the newest snapshot began. */
  private logBytesSinceSnapshot = 0;
  private lastSeen: Progress | null = null;
  private idleTicks = 0;
  private collectedAt: Progress | null = null;

  constructor(private readonly ctx: NodeContext) {}

  get inProgress(): boolean {
    return this.inFlight !== null;
  }

  /** Entries were applied: they count toward the log the next snapshot drops. */
  applied(entries: readonly Entry[]): void {
    for (const e of entries) this.logBytesSinceSnapshot += e.data.length;
  }

  /** Take a snapshot now (or join the one in progress). */
  take(): Promise<SnapshotOutcome> {
    this.ctx.checkServing();
    this.inFlight ??= this.snapshotNow().finally(() => {
      this.inFlight = null;
    });
    return this.inFlight;
  }

  /** Wait for a snapshot in progress to end (stop). */
  async settle(): Promise<void> {
    if (this.inFlight !== null) await this.inFlight.catch(() => undefined);
  }

  /**
   * Checked after applying and on every tick (a paced snapshot may come due while idle).
   * Due after snapshot_interval entries, or sooner when the entries since the last snapshot,
   * which the log holds in memory until a snapshot lets it drop them, pass a byte budget
   * (a sixty-fourth of max_memory_mb, at most 16 MiB: the process holds about three times
   * what the log does, counting what the allocator keeps); at twice that budget memory wins
   * over the pacing.
   */
  maybeAuto(): void {
    const { ctx } = this;
    if (this.inFlight !== null || ctx.recovery !== "healthy" || ctx.fatalError !== null || ctx.stopped) return;
    const budgetBytes = Math.min(16 * 1024 * 1024, ctx.config.maxMemoryBytes / 64);
    const dueByCount = ctx.store.meta.appliedIndex - ctx.snapshotIndex >= ctx.config.snapshotIntervalEntries;
    const dueByBytes = this.logBytesSinceSnapshot >= budgetBytes;
    const paced = ctx.clock.monotonicMs() >= this.nextAutoAtMs || this.logBytesSinceSnapshot >= 2 * budgetBytes;
    if ((dueByCount || dueByBytes) && paced) this.take().catch(() => undefined);
  }

  /**
   * Once writes stop for a moment, collect the garbage their bodies and entries left: the
   * engine otherwise keeps it, and the process holds hundreds of megabytes it no longer uses.
   * A snapshot that ends after that drops the log it covers: it is collected the same way.
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

  /** After a snapshot from the leader was installed: keep only the newest few. */
  pruneAfterInstall(): void {
    void this.ctx.io.snapshots.prune(snapshotsRetainedCount).catch((e: unknown) => {
      this.ctx.logger.warn("could not remove old snapshots", { error: errorMessage(e) });
    });
  }

  private async snapshotNow(): Promise<SnapshotOutcome> {
    const { ctx } = this;
    const startedMs = ctx.clock.monotonicMs();
    ctx.metrics.snapshotInProgress.set(1);
    const bytesAtStart = this.logBytesSinceSnapshot;
    try {
      const record = await ctx.io.snapshots.take(ctx.store, ctx.clusterId, ctx.snapshotIndex);
      if (record === null) {
        const latest = ctx.io.snapshots.latest();
        return { index: ctx.snapshotIndex, term: latest?.term ?? 0, dir: latest?.location ?? "", sizeBytes: latest?.sizeBytes ?? 0, durationMs: ctx.clock.monotonicMs() - startedMs };
      }
      // A snapshot installed from the leader meanwhile may already cover more than this one.
      if (!ctx.stopped && record.index > ctx.core.status().snapshotIndex) {
        ctx.core.compact({ index: record.index, term: record.term, membership: record.membership });
        const removed = await ctx.io.log.compact(record.index);
        ctx.metrics.walSegmentsRemoved.inc(removed);
        await ctx.io.snapshots.prune(snapshotsRetainedCount);
      }
      ctx.snapshotIndex = Math.max(ctx.snapshotIndex, record.index);
      this.logBytesSinceSnapshot = Math.max(0, this.logBytesSinceSnapshot - bytesAtStart);
      // A compaction that dropped a large log leaves that much garbage: collect it now, while
      // it is known to be there, instead of letting the process grow until the next cycle.
      if (bytesAtStart >= largeCompactionBytes) ctx.io.collectGarbage(false);
      const durationMs = ctx.clock.monotonicMs() - startedMs;
      this.nextAutoAtMs = ctx.clock.monotonicMs() + idleFactor * durationMs;
      ctx.metrics.snapshotsTotal.inc();
      ctx.metrics.snapshotDuration.observe(durationMs / 1000);
      ctx.metrics.snapshotLastCompletedTimestamp.set(ctx.clock.nowMs() / 1000);
      ctx.metrics.snapshotSizeBytes.set(record.sizeBytes);
      ctx.logger.info("snapshot taken", { index: record.index, term: record.term, dir: record.location, sizeBytes: record.sizeBytes, durationMs: Math.round(durationMs) });
      return { index: record.index, term: record.term, dir: record.location, sizeBytes: record.sizeBytes, durationMs };
    } catch (e) {
      this.nextAutoAtMs = ctx.clock.monotonicMs() + retryAfterFailureMs;
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
