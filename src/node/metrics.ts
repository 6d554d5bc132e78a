// The node's metrics (SPEC §2.3 names, tensor_chain_ prefix). Values the node already holds
// are read at scrape time; only events on the write path are counted as they happen.

import type { TransferMetrics } from "./snapshot-transfer.ts";
import { CatchUpMeter } from "./catch-up-meter.ts";
import { MetricsRegistry, exponentialBuckets, type Counter, type Gauge, type Histogram } from "../metrics/index.ts";

export interface NodeMetrics {
  registry: MetricsRegistry;
  writeLatency: Histogram;
  writesTotal: Counter;
  writeErrorsTotal: Counter;
  readsTotal: Counter;
  readErrorsTotal: Counter;
  walSyncs: Counter;
  walSyncLatency: Histogram;
  walEntriesPerSync: Histogram;
  walAppendedBytes: Counter;
  walSegmentsRemoved: Counter;
  /** Leader: entries read back from the WAL for members behind the in-memory log. */
  catchUpLogEntries: Counter;
  /** Leader: reads of the WAL for a member behind the in-memory log, by result. */
  catchUpLogReads: Counter;
  snapshotsTotal: Counter;
  snapshotFailuresTotal: Counter;
  snapshotDuration: Histogram;
  snapshotInProgress: Gauge;
  snapshotLastCompletedTimestamp: Gauge;
  snapshotSizeBytes: Gauge;
  readIndexRounds: Counter;
  peerMessagesDropped: Counter;
  recoveryTransitions: Counter;
  checkpointsTotal: Counter;
  checkpointFailuresTotal: Counter;
  checkpointDuration: Histogram;
  transfer: TransferMetrics;
  /** Sampled by the loop; read by the tensor_chain_recovery_* gauges. */
  catchUp: CatchUpMeter;
}

/** What the scrape-time gauges read from the node. */
export interface NodeGaugeSource {
  commitIndex(): number;
  appliedIndex(): number;
  leaderCommitIndex(): number;
  term(): number;
  isLeader(): boolean;
  /** 0 follower, 1 pre-candidate, 2 candidate, 3 leader. */
  roleCode(): number;
  recoveryStateCode(): number;
  snapshotIndex(): number;
  checkpointIndex(): number;
  lastLogIndex(): number;
  walSegments(): number;
  walSizeBytes(): number;
  pendingWrites(): number;
  writesPaused(): boolean;
  diskFull(): boolean;
  votersDiskFull(): number;
  storeUncommitted(): number;
}

const latencyBucketsSeconds = exponentialBuckets(0.0001, 2, 16); // 0.1 ms … 3.3 s

export function createNodeMetrics(source: NodeGaugeSource): NodeMetrics {
  const r = new MetricsRegistry();
  r.gaugeFn("tensor_chain_commit_index", "Highest log index this node knows to be committed", () => source.commitIndex());
  r.gaugeFn("tensor_chain_applied_index", "Highest log index applied to this node's store", () => source.appliedIndex());
  r.gaugeFn("tensor_chain_leader_commit_index", "The leader's commit index as last heard by this node", () => source.leaderCommitIndex());
  r.gaugeFn("tensor_chain_term", "Current Raft term", () => source.term());
  r.gaugeFn("tensor_chain_is_leader", "1 when this node is the leader", () => (source.isLeader() ? 1 : 0));
  r.gaugeFn("tensor_chain_role", "Raft role: 0 follower, 1 pre-candidate, 2 candidate, 3 leader, 4 learner, 5 removed from the cluster", () => source.roleCode());
  r.gaugeFn("tensor_chain_recovery_state",
    "Recovery flow state: 0 starting, 1 replaying_wal, 2 requesting_snapshot, 3 installing_snapshot, 4 replaying_after_snapshot, 5 joining, 6 healthy",
    () => source.recoveryStateCode());
  r.gaugeFn("tensor_chain_last_log_index", "Index of the last entry in this node's log", () => source.lastLogIndex());
  r.gaugeFn("tensor_chain_checkpoint_index", "Applied index up to which the store is durable (the newest checkpoint)", () => source.checkpointIndex());
  r.gaugeFn("tensor_chain_snapshot_index", "Log index covered by the newest snapshot", () => source.snapshotIndex());
  r.gaugeFn("tensor_chain_wal_segments", "WAL segment files on disk", () => source.walSegments());
  r.gaugeFn("tensor_chain_wal_size_bytes", "Total size of the WAL segment files", () => source.walSizeBytes());
  r.gaugeFn("tensor_chain_pending_writes", "Writes proposed and not yet applied", () => source.pendingWrites());
  r.gaugeFn("tensor_chain_writes_paused", "1 while writes are paused (pause-writes)", () => (source.writesPaused() ? 1 : 0));
  r.gaugeFn("tensor_chain_disk_full", "1 while the data directory's disk is full: writes are refused (DISK_FULL), reads served", () => (source.diskFull() ? 1 : 0));
  r.gaugeFn("tensor_chain_voters_disk_full",
    "On the leader: other voters that said their disk is full (they take no entries until they have room; writes get 507 DISK_FULL when too few are left for a majority); 0 elsewhere",
    () => source.votersDiskFull());
  r.gaugeFn("tensor_chain_store_uncommitted_entries",
    "Entries applied to the store but not yet committed to its file (reads in SQL processes commit first; above 0 for long only while a full disk refuses the commit)",
    () => source.storeUncommitted());
  r.gaugeFn("tensor_chain_memory_rss_bytes", "Resident set size of the process", () => process.memoryUsage.rss());
  r.gaugeFn("tensor_chain_memory_heap_used_bytes", "JavaScript heap in use", () => process.memoryUsage().heapUsed);

  const catchUpsTotal = r.counter("tensor_chain_recovery_catch_ups_total", "Catch-ups completed: the leader confirmed this node applied all it committed, after a start or a fall back into the recovery flow");
  const catchUp = new CatchUpMeter(() => catchUpsTotal.inc());
  const entriesBehind = (): number => Math.max(0, source.leaderCommitIndex() - source.appliedIndex());
  r.gaugeFn("tensor_chain_recovery_entries_behind", "Entries the leader has committed that this node has not applied (leader commit index - applied index)", entriesBehind);
  r.gaugeFn("tensor_chain_recovery_catch_up_rate_entries_per_second", "Entries this node applied per second over the last few seconds", () => catchUp.ratePerSecond);
  r.gaugeFn("tensor_chain_recovery_estimated_seconds", "Estimated seconds until this node has applied all the leader committed, at the current rate: 0 when not behind, -1 when not progressing",
    () => catchUp.estimatedSeconds(entriesBehind()));
  r.gaugeFn("tensor_chain_recovery_last_catch_up_seconds", "How long the last catch-up took, from entering the recovery flow (start, or a serving follower falling back) to the leader confirming this node caught up; 0 before the first",
    () => catchUp.lastSeconds ?? 0);

  const writesTotal = r.counter("tensor_chain_writes_total", "Write batches applied and acknowledged");
  let lastScrapeMs = performance.now();
  let lastWrites = 0;
  let throughput = 0;
  r.onScrape(() => {
    const now = performance.now();
    const writes = writesTotal.get();
    if (now - lastScrapeMs >= 100) {
      throughput = ((writes - lastWrites) * 1000) / (now - lastScrapeMs);
      lastScrapeMs = now;
      lastWrites = writes;
    }
  });
  r.gaugeFn("tensor_chain_write_throughput_per_second", "Acknowledged writes per second since the previous scrape", () => throughput);

  return {
    registry: r,
    catchUp,
    writesTotal,
    writeLatency: r.histogram("tensor_chain_write_latency_seconds", "Time from a write's arrival to its acknowledgement", latencyBucketsSeconds),
    writeErrorsTotal: r.counter("tensor_chain_write_errors_total", "Writes answered with an error", ["code"]),
    readsTotal: r.counter("tensor_chain_reads_total", "Queries answered"),
    readErrorsTotal: r.counter("tensor_chain_read_errors_total", "Queries answered with an error", ["code"]),
    walSyncs: r.counter("tensor_chain_wal_syncs_total", "fdatasync calls on the WAL (each covers a group of records)"),
    walSyncLatency: r.histogram("tensor_chain_wal_sync_latency_seconds", "Duration of one WAL fdatasync", latencyBucketsSeconds),
    walEntriesPerSync: r.histogram("tensor_chain_wal_entries_per_sync", "Entries made durable by one WAL fdatasync (group commit)", exponentialBuckets(1, 2, 12)),
    walAppendedBytes: r.counter("tensor_chain_wal_appended_bytes_total", "Bytes of entries appended to the WAL"),
    walSegmentsRemoved: r.counter("tensor_chain_wal_segments_removed_total", "WAL segments removed after a snapshot covered them"),
    catchUpLogEntries: r.counter("tensor_chain_catch_up_log_entries_total", "Entries the leader read back from its WAL to send to members behind its in-memory log"),
    catchUpLogReads: r.counter("tensor_chain_catch_up_log_reads_total", "Reads of the leader's WAL for members behind its in-memory log, by result (not_held: the WAL no longer holds them, the member is sent a snapshot)", ["result"]),
    snapshotsTotal: r.counter("tensor_chain_snapshots_total", "Snapshots completed"),
    snapshotFailuresTotal: r.counter("tensor_chain_snapshot_failures_total", "Snapshots that failed"),
    snapshotDuration: r.histogram("tensor_chain_snapshot_duration_seconds", "Time to take a snapshot", exponentialBuckets(0.01, 2, 14)),
    snapshotInProgress: r.gauge("tensor_chain_snapshot_in_progress", "1 while a snapshot is being taken"),
    snapshotLastCompletedTimestamp: r.gauge("tensor_chain_snapshot_last_completed_timestamp_seconds", "Unix time the newest snapshot completed"),
    snapshotSizeBytes: r.gauge("tensor_chain_snapshot_size_bytes", "Size of the newest snapshot's state.db"),
    readIndexRounds: r.counter("tensor_chain_read_index_rounds_total", "ReadIndex rounds (each serves a batch of linearizable reads)"),
    checkpointsTotal: r.counter("tensor_chain_checkpoints_total", "Checkpoints completed: the store made durable up to an applied index (every snapshot_interval entries)"),
    checkpointFailuresTotal: r.counter("tensor_chain_checkpoint_failures_total", "Checkpoints that failed (retried later)"),
    checkpointDuration: r.histogram("tensor_chain_checkpoint_duration_seconds", "Time to make the store durable at a checkpoint", exponentialBuckets(0.001, 2, 14)),
    recoveryTransitions: r.counter("tensor_chain_recovery_transitions_total", "Transitions of the recovery flow (SPEC §3.1), by state left and state entered", ["from", "to"]),
    peerMessagesDropped: r.counter("tensor_chain_peer_messages_dropped_total", "Peer messages dropped before the Raft core, by reason", ["reason"]),
    transfer: {
      sentBytes: r.counter("tensor_chain_snapshot_transfer_sent_bytes_total", "Snapshot bytes streamed to followers"),
      receivedBytes: r.counter("tensor_chain_snapshot_transfer_received_bytes_total", "Snapshot bytes received from the leader"),
      transfers: r.counter("tensor_chain_snapshot_transfers_total", "Snapshot transfers finished, by result", ["result"]),
      inProgress: r.gauge("tensor_chain_snapshot_transfer_in_progress", "Snapshot streams this node is sending"),
      progressBytes: r.gauge("tensor_chain_snapshot_transfer_progress_bytes", "Bytes of the current snapshot transfer acknowledged or received"),
      totalBytes: r.gauge("tensor_chain_snapshot_transfer_total_bytes", "Size of the current snapshot transfer"),
    },
  };
}
