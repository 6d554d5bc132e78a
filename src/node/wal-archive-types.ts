// The shapes WAL archiving shares between the node's parts: what the archiver needs of the
// machine (production: wal-archive-io.ts), what it shows, and what the loop calls on it
// (wal-archiver.ts). Apart from both so that the context can name them without a cycle.

import type { Entry } from "../raft/index.ts";

/** What the archiver needs of the machine (production: wal-archive-io.ts). */
export interface WalArchiveIo {
  /** Committed entries from..to (fewer when `bytesMax` of data is reached first) out of the node's WAL. */
  readRange(from: number, to: number, bytesMax: number): Promise<
    { ok: true; entries: Entry[] } | { ok: false; firstHeld: number | null; reason: string }
  >;
  /** Write the segment (its header naming `clusterId`) and run the archive command on it; exit 0 means archived. */
  archive(entries: readonly Entry[], clusterId: string): Promise<ArchiveAttempt>;
  /**
   * The snapshot index after which this node's log was started over by a restore or by
   * init-cluster --bootstrap (raft/LOG_START); null when it was not.
   */
  logStartedOverAt(): number | null;
  /** Local WAL segments holding an entry after `index`: waiting to be archived. */
  segmentsAfter(index: number): number;
  /** Stop a command that runs (the node stops). */
  close(): void;
}

export type ArchiveAttempt =
  | { ok: true; name: string }
  | { ok: false; name: string; exitCode: number | null; stderr: string; /** Killed for running this long. */ timedOutAfterMs?: number };

/** What `svc admin stats`, cluster-status and /metrics show. */
export interface WalArchiveStatus {
  enabled: boolean;
  /** The cluster's replicated mark: every entry up to here is archived. */
  archivedThrough: number;
  lastArchivedSegment: string | null;
  lastArchivedAtMs: number | null;
  lastFailureAtMs: number | null;
  lastError: string | null;
  /** When the failures going on now began (the first since the last success); null while none is. */
  failingSinceMs: number | null;
  failures: number;
  segmentsWaiting: number;
}

/** The archiver as the loop and the status calls see it. */
export interface WalArchivePart {
  snapshot(): WalArchiveStatus;
  applied(entries: readonly Entry[]): void;
  tick(): void;
  /** Whether this node archives at its clean stop (asked while it is a member); see wal-archiver.ts. */
  archivesAtStop(): boolean;
  /** At a clean stop, once the node left the cluster: archive what it applied past the archive; bounded by timeoutMs. */
  archiveAtStop(timeoutMs: number): Promise<void>;
  stop(): void;
}
