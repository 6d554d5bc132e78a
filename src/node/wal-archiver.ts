// WAL archiving (wal.archive_command), with PostgreSQL's semantics for a Raft cluster:
//
//   who      only the leader archives, and only committed (applied) entries: the archive
//            never holds an entry a later leader could overwrite.
//   what     committed index ranges, not local segment files: each archived segment is the
//            entries first…last in the WAL's record format, named
//            `<first>-<last>-<term>.wal` (storage/wal-archive.ts). Its bytes depend only on
//            the entries, so two leaders archiving the same range write identical files.
//   where    the next range always starts one past the highest index archived, which is
//            replicated: after a segment is archived the leader proposes an
//            `archived_through` entry, which every store applies. A new leader, or the same
//            one after a crash, archives on from the replicated mark; a range archived but
//            not yet marked is archived again (same entries, same or overlapping name), so a
//            crash or a leader change leaves overlaps, never a gap.
//   keeping  no member removes a WAL segment holding an entry past the mark, whatever images
//            say (NodeContext.walRemovableThrough), so whoever leads next still has the
//            entries to archive.
//   when     a segment is cut once the entries waiting reach wal.segment_size_mb, or once
//            one of them is older than wal.archive_timeout (the archive's recovery point).
//            Noops and the marks themselves do not start that clock, so an idle cluster
//            archives nothing.
//   failure  a command that fails (exit ≠ 0, or still running after archiveRunMsMax) is
//            retried with backoff, its stderr logged and counted; the range is never skipped.

import { encodeCommand } from "../store/index.ts";
import type { Entry } from "../raft/index.ts";
import { isOnlyMember } from "../util/log-data.ts";
import { errorMessage } from "../util/errors.ts";
import type { Counter, Gauge } from "../metrics/index.ts";
import type { NodeContext } from "./context.ts";
import type { WalArchiveIo, WalArchivePart, WalArchiveStatus } from "./wal-archive-types.ts";

export type { ArchiveAttempt, WalArchiveIo, WalArchiveStatus } from "./wal-archive-types.ts";

const retryDelayMsMin = 1_000;
/** How long a clean stop waits for its last segment to be archived (systemd gives a stop 90 s). */
export const archiveAtStopMsMax = 15_000;
const retryDelayMsMax = 60_000;
const markPrefix = new TextEncoder().encode('{"op":"archived_through"');

interface Pending {
  /** Bytes of entry data applied and not archived. */
  bytes: number;
  /** The time of the oldest such entry that counts toward archive_timeout (null: none). */
  oldestMs: number | null;
}

const nothingPending = (): Pending => ({ bytes: 0, oldestMs: null });

/** How an archiving attempt ended: `through` the last index archived. */
type Outcome = { kind: "archived"; through: number } | { kind: "failed"; why: string } | { kind: "nothing" };

export class WalArchiver implements WalArchivePart {
  /** The attempt running now. */
  private attempt: Promise<Outcome> | null = null;
  private stopped = false;
  /** archiveAtStop runs: tick starts nothing more. */
  private closing = false;
  /** Archived by this leader in `leaderTerm`, its mark maybe not yet applied. */
  private localThrough = 0;
  private leaderTerm = 0;
  /** Set when what waits is not known (a new leader, a restart, a cut shortened by size): archive at once. */
  private unknown = true;
  private pending = nothingPending();
  /** Entries applied while an attempt runs (they are not in it). */
  private sinceCut: Pending | null = null;
  private retryDelayMs = retryDelayMsMin;
  private nextAttemptAtMs = 0;
  private readonly status: WalArchiveStatus;
  private readonly failuresTotal: Counter;
  private readonly lastIndexGauge: Gauge;

  constructor(private readonly ctx: NodeContext, private readonly io: WalArchiveIo, private readonly propose: (data: Uint8Array) => void) {
    this.status = {
      enabled: true, archivedThrough: 0, lastArchivedSegment: null, lastArchivedAtMs: null, lastFailureAtMs: null, lastError: null, failingSinceMs: null, failures: 0, segmentsWaiting: 0,
    };
    const r = ctx.metrics.registry;
    this.lastIndexGauge = r.gauge("tensor_chain_wal_archive_last_archived_index", "Last index of the newest segment this node archived");
    r.gaugeFn("tensor_chain_wal_archive_archived_through_index", "Every entry up to this index is in the WAL archive (the cluster's replicated mark)", () => this.archivedThrough());
    r.gaugeFn("tensor_chain_wal_archive_last_archived_timestamp_seconds", "Unix time this node last archived a segment (0: never)", () => (this.status.lastArchivedAtMs ?? 0) / 1000);
    r.gaugeFn("tensor_chain_wal_archive_last_failure_timestamp_seconds", "Unix time archive_command last failed on this node (0: never)", () => (this.status.lastFailureAtMs ?? 0) / 1000);
    this.failuresTotal = r.counter("tensor_chain_wal_archive_failures_total", "archive_command runs that failed (each is retried)");
    r.gaugeFn("tensor_chain_wal_archive_segments_waiting", "Local WAL segments holding entries not yet archived", () => this.io.segmentsAfter(this.archivedThrough()));
  }

  /** Every entry up to here is archived, as far as this node knows. */
  archivedThrough(): number {
    return Math.max(this.ctx.store.meta.archivedThrough, this.leaderTerm === this.ctx.core.status().term ? this.localThrough : 0);
  }

  snapshot(): WalArchiveStatus {
    return { ...this.status, archivedThrough: this.archivedThrough(), segmentsWaiting: this.io.segmentsAfter(this.archivedThrough()) };
  }

  /** Entries were applied: they wait to be archived. */
  applied(entries: readonly Entry[]): void {
    const into = this.sinceCut ?? this.pending;
    const through = this.archivedThrough();
    for (const e of entries) {
      if (e.index <= through) continue;
      into.bytes += e.data.length;
      if (into.oldestMs === null && countsTowardTimeout(e)) into.oldestMs = e.timestampMs;
    }
  }

  /** On every tick: archive when due and this node leads. */
  tick(): void {
    const { ctx } = this;
    if (this.attempt !== null || this.closing || this.stopped || ctx.fatalError !== null) return;
    const status = ctx.core.status();
    if (status.role !== "leader" || ctx.recovery !== "healthy") {
      this.leaderTerm = 0;
      this.localThrough = 0;
      this.unknown = true;
      return;
    }
    if (this.leaderTerm !== status.term) {
      this.leaderTerm = status.term;
      this.localThrough = 0;
      this.unknown = true;
    }
    const from = this.archivedThrough() + 1;
    const applied = ctx.store.meta.appliedIndex;
    if (applied < from || ctx.clock.monotonicMs() < this.nextAttemptAtMs || !this.due()) return;
    this.sinceCut = nothingPending();
    this.attempt = this.archiveRange(from, applied, false).finally(() => {
      this.attempt = null;
    });
  }

  /**
   * Whether this node archives at its clean stop what it applied past the archive: when no
   * other member will — it leads, or it knows no leader (the last one of a cluster being
   * stopped, whose leader stepped down as the others stopped). Asked while it is still a member.
   */
  archivesAtStop(): boolean {
    const { ctx } = this;
    if (this.stopped || ctx.fatalError !== null || ctx.recovery !== "healthy") return false;
    const status = ctx.core.status();
    return status.role === "leader" || status.leaderId === null;
  }

  /**
   * At a clean stop, once the node has left the cluster (its ports and peer connections closed,
   * its loop stopped: the others elect a leader meanwhile), what it applied past the archive is
   * archived from its WAL. PostgreSQL archives its last segment at shutdown the same way.
   * Without it, SPEC §4.5's "stop all nodes, remove the Raft state" lost what was written in the
   * last archive_timeout. Waits for an attempt under way first; bounded by `timeoutMs`, after
   * which stop() ends the command. Entries it cannot archive are logged, once.
   */
  async archiveAtStop(timeoutMs: number): Promise<void> {
    const { ctx } = this;
    this.closing = true;
    const deadlineMs = ctx.clock.monotonicMs() + timeoutMs;
    const within = <T>(work: Promise<T>): Promise<T | "late"> => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<"late">((resolve) => {
        timer = setTimeout(() => resolve("late"), Math.max(0, deadlineMs - ctx.clock.monotonicMs()));
      });
      return Promise.race([work, late]).finally(() => clearTimeout(timer));
    };
    const late = `archive_command did not finish within ${Math.round(timeoutMs / 1000)} s`;
    if (this.attempt !== null && (await within(this.attempt)) === "late") return this.leftAtStop(late);
    let from = this.archivedThrough() + 1;
    const to = ctx.store.meta.appliedIndex;
    while (from <= to) {
      const outcome = await within(this.archiveRange(from, to, true));
      if (outcome === "late") return this.leftAtStop(late);
      if (outcome.kind === "failed") return this.leftAtStop(outcome.why);
      if (outcome.kind === "nothing") return;
      from = outcome.through + 1;
    }
  }

  private leftAtStop(why: string): void {
    const { ctx } = this;
    ctx.logger.warn(`stopping with entries ${this.archivedThrough() + 1}…${ctx.store.meta.appliedIndex} not archived: ${why}`, {
      hint: "they stay in this node's WAL and the next leader archives them; remove no member's raft/wal/ (SPEC §4.5 step 2) before they are, or the archive ends before them",
    });
  }

  stop(): void {
    this.stopped = true;
    this.io.close();
  }

  private due(): boolean {
    if (this.unknown) return true;
    if (this.pending.bytes >= this.ctx.config.wal.segmentSizeBytes) return true;
    return this.pending.oldestMs !== null && this.ctx.clock.nowMs() - this.pending.oldestMs >= this.ctx.config.wal.archiveTimeoutMs;
  }

  /**
   * `atStop` (archiveAtStop): a gap is not stepped over (another member may hold what this WAL
   * lacks, and the next leader decides), a failure is the caller's to report rather than one
   * retried, and a range that holds nothing archive_timeout counts (noops, marks) is left.
   */
  private async archiveRange(from: number, to: number, atStop: boolean): Promise<Outcome> {
    const { ctx } = this;
    const term = this.leaderTerm;
    const fail = (why: string, stderr: string | null = null): Outcome => {
      if (!atStop) this.failed(why, stderr);
      return { kind: "failed", why };
    };
    try {
      let read = await this.io.readRange(from, to, ctx.config.wal.segmentSizeBytes);
      let gapCause: string | null = null;
      if (!atStop && !read.ok && read.firstHeld !== null && read.firstHeld > from && read.firstHeld <= to) {
        gapCause = this.noMemberHolds(from, read.firstHeld);
        if (gapCause !== null) read = await this.io.readRange(read.firstHeld, to, ctx.config.wal.segmentSizeBytes);
      }
      if (!read.ok) {
        // A member that received an image from the leader never held the entries before it: the
        // others keep them (nothing unarchived is removed), so one of them can archive them.
        return fail(`cannot read entries ${from}…${to} from this node's WAL: ${read.reason} (it received a snapshot instead of them)` +
          (atStop ? "" : "; move leadership to another member: svc admin transfer-leader --to <id>"));
      }
      const first = read.entries[0];
      const last = read.entries.at(-1);
      if (first === undefined || last === undefined) return { kind: "nothing" };
      if (atStop && last.index >= to && !read.entries.some(countsTowardTimeout)) return { kind: "nothing" };
      if (first.index > from) {
        ctx.logger.warn(`WAL archiving goes on after entries ${from}…${first.index - 1}, which no member holds (${gapCause ?? "they are gone from every WAL"}): ` +
          `the archive has a gap there, so a point-in-time restore to a later time needs a snapshot at index ${first.index - 1} or later`, {
          firstArchivedIndex: first.index, missingFrom: from,
          hint: `take one now if none is kept (POST /admin/snapshot, or svc admin backup), and keep it with the archive`,
        });
      }
      // The header names the cluster: wal-replay refuses another cluster's segments in a location.
      const attempt = await this.io.archive(read.entries, ctx.clusterId);
      if (this.stopped) return { kind: "failed", why: "the node stopped" };
      if (!attempt.ok) {
        const how = attempt.timedOutAfterMs === undefined ? `exit ${attempt.exitCode ?? "by signal"}` : `did not finish within ${Math.round(attempt.timedOutAfterMs / 1000)} s and was killed`;
        return fail(`archive_command failed on ${attempt.name} (${how})`, attempt.stderr);
      }
      this.succeeded(attempt.name, last.index, last.index < to, term);
      return { kind: "archived", through: last.index };
    } catch (e) {
      return fail(`archiving entries ${from}…${to} failed: ${errorMessage(e)}`);
    }
  }

  /**
   * Why entries from…firstHeld-1, missing from this node's WAL, are in no member's either, so
   * that waiting for them would stop archiving for good (and keep every WAL segment from then
   * on until the disk fills); null when another member may hold them. Such are: a cluster whose
   * WAL was trimmed behind an image before archiving was turned on (nothing archived yet), a
   * log started over right after them by a restore or init-cluster --bootstrap (every member
   * restored starts there), and a lone voter whose WAL lost them (a repair at start dropped
   * damaged records that a snapshot covers): there is no other member. A member of a larger
   * cluster that received an image instead is not such a case: the others keep what is not
   * archived.
   */
  private noMemberHolds(from: number, firstHeld: number): string | null {
    if (this.ctx.store.meta.archivedThrough === 0) return "removed before archiving was enabled";
    const startedOverAt = this.io.logStartedOverAt();
    if (startedOverAt !== null && startedOverAt + 1 === firstHeld && from <= startedOverAt) return "from before the snapshot this cluster was restored or initialized from";
    if (isOnlyMember(this.ctx.core.status().membership, this.ctx.config.nodeId)) {
      return "this node is the cluster's only member and its WAL no longer holds them: see the recovery warnings at its start";
    }
    return null;
  }

  private succeeded(name: string, lastIndex: number, shortened: boolean, term: number): void {
    const { ctx } = this;
    const at = ctx.clock.nowMs();
    this.status.lastArchivedSegment = name;
    this.status.lastArchivedAtMs = at;
    this.status.lastError = null;
    this.status.failingSinceMs = null;
    this.lastIndexGauge.set(lastIndex);
    this.retryDelayMs = retryDelayMsMin;
    this.nextAttemptAtMs = 0;
    this.pending = this.sinceCut ?? nothingPending();
    this.sinceCut = null;
    this.unknown = shortened;
    ctx.logger.info("archived a WAL segment", { segment: name, through: lastIndex });
    if (term !== ctx.core.status().term || ctx.core.status().role !== "leader") return;
    this.localThrough = Math.max(this.localThrough, lastIndex);
    // A stopping node has left the cluster: it proposes nothing (the next leader archives from
    // the last mark, the range again: an overlap).
    if (this.closing) return;
    // The mark is what lets members drop the segments and the next leader go on from here;
    // should it be lost (a leader change), the next leader archives the range again.
    this.propose(encodeCommand({ op: "archived_through", index: lastIndex }));
  }

  private failed(message: string, stderr: string | null): void {
    const { ctx } = this;
    this.status.failures++;
    this.status.lastFailureAtMs = ctx.clock.nowMs();
    this.status.failingSinceMs ??= this.status.lastFailureAtMs;
    this.status.lastError = message;
    this.failuresTotal.inc();
    const since = this.sinceCut;
    if (since !== null) {
      this.pending.bytes += since.bytes;
      this.pending.oldestMs ??= since.oldestMs;
    }
    this.sinceCut = null;
    this.unknown = true;
    this.nextAttemptAtMs = ctx.clock.monotonicMs() + this.retryDelayMs;
    ctx.logger.error(`WAL archiving: ${message}; retried in ${Math.round(this.retryDelayMs / 1000)} s (nothing is skipped, and no WAL segment is removed until it is archived)`, {
      ...(stderr === null || stderr === "" ? {} : { stderr }),
      failures: this.status.failures,
      hint: "fix wal.archive_command or its destination; archiving resumes by itself",
    });
    this.retryDelayMs = Math.min(retryDelayMsMax, this.retryDelayMs * 2);
  }
}

/** Noops (a new leader's) and archive marks do not start the archive_timeout clock. */
function countsTowardTimeout(e: Entry): boolean {
  if (e.kind === "noop" || e.timestampMs === 0) return false;
  if (e.kind !== "normal" || e.data.length < markPrefix.length) return true;
  for (let i = 0; i < markPrefix.length; i++) if (e.data[i] !== markPrefix[i]) return true;
  return false;
}
