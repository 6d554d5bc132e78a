// Starting points of a node's log that the normal load cannot give: the birth of a new
// cluster, a lone node whose store outlived its WAL, and a cluster member that lost log
// entries it held. Each uses only committed data: the store holds applied (so committed)
// entries, and a snapshot is an image of the store.

import { randomUUID } from "node:crypto";
import { join } from "node:path";
import type { Config } from "../config/index.ts";
import { encodeMembership, type Entry, type Membership, type SnapshotMeta } from "../raft/types.ts";
import { markLostLog, snapshotStateFile, writeCheckpoint, writeHardState, type SnapshotEntry, type StoredHardState } from "../storage/index.ts";
import { backupPauseResumedText, createSnapshotImage, encodeCommand, restoreEntry, Store } from "../store/index.ts";
import type { Logger } from "../util/logger.ts";
import { isPristine, type LoadedState } from "./load.ts";

/** Where a loaded node's log starts: as loaded, or one of the two repairs below. */
export type StartPlan = "as_loaded" | "forget_local_state" | "rebase_on_store";

/**
 * The one rule for a node whose log cannot be taken as loaded. A member of a multi-node
 * cluster whose WAL is gone (SPEC §3.1: no WAL → the state comes from the leader), or whose
 * log has a gap the store bridges, forgets what it cannot vouch for and waits for the leader;
 * a lone voter has no one to fetch from, and starts its log after a snapshot of its store
 * (everything the store holds was committed).
 */
export function planStart(s: { multiMember: boolean; walWasEmpty: boolean; wasPristine: boolean; needsSnapshotAt: number | null }): StartPlan {
  if (s.multiMember && s.walWasEmpty && !s.wasPristine) return "forget_local_state";
  if (s.needsSnapshotAt === null) return "as_loaded";
  return s.multiMember ? "forget_local_state" : "rebase_on_store";
}

export function clampCommit(hs: { term: number; vote: string | null; commit: number }, state: LoadedState): { term: number; vote: string | null; commit: number } {
  const last = state.entries.at(-1)?.index ?? state.coreBase?.index ?? 0;
  return { ...hs, commit: Math.min(hs.commit, last) };
}

/**
 * A cluster is born once: on the first start of a node whose config says bootstrap = true
 * and whose data directory holds nothing, write a cluster id and the first membership.
 */
export function bootstrapIfNew(state: LoadedState, config: Config, logger: Logger): string {
  if (!isPristine(state)) {
    const clusterId = state.hardState.clusterId !== "" ? state.hardState.clusterId : state.store.meta.clusterId;
    return clusterId;
  }
  if (!config.cluster.bootstrap) return "";
  const clusterId = randomUUID();
  const voters = config.cluster.members.length > 0 ? config.cluster.members.map((m) => m.id) : [config.nodeId];
  const membership: Membership = { voters, learners: [] };
  const now = Date.now();
  const first: Entry = { term: 1, index: 1, kind: "config", timestampMs: now, data: encodeMembership(membership) };
  const second: Entry = { term: 1, index: 2, kind: "normal", timestampMs: now, data: encodeCommand({ op: "init_cluster", clusterId }) };
  state.wal.append([first, second]);
  state.wal.sync();
  const hardState: StoredHardState = { term: 1, vote: null, commit: 2, clusterId };
  writeHardState(state.paths.hardStatePath, hardState);
  state.store.setClusterId(clusterId);
  state.hardState = hardState;
  state.entries = [first, second];
  logger.info("bootstrapped a new cluster", { clusterId, voters });
  return clusterId;
}

/**
 * The store holds committed state the log no longer has (the WAL was cleared or the log
 * has a gap): take a snapshot of the store and start the log after it.
 */
export async function rebaseOnStore(state: LoadedState, clusterId: string, logger: Logger): Promise<void> {
  const tempDir = state.snapshots.beginTemp();
  const image = await createSnapshotImage(state.paths.storePath, join(tempDir, snapshotStateFile));
  const entry: SnapshotEntry = await state.snapshots.commit(tempDir, {
    clusterId, index: image.appliedIndex, term: image.appliedTerm, membership: image.membership, stateSha256: image.stateSha256,
  });
  const meta: SnapshotMeta = { index: entry.index, term: entry.term, membership: image.membership };
  state.wal.resetTo(entry.index + 1);
  state.wal.removeSegmentsCoveredBy(entry.index);
  state.snapshot = meta;
  state.coreBase = meta;
  state.entries = [];
  const hs = state.hardState;
  if (hs.term < meta.term || hs.commit < meta.index) {
    state.hardState = { ...hs, term: Math.max(hs.term, meta.term), commit: Math.max(hs.commit, meta.index), clusterId };
    writeHardState(state.paths.hardStatePath, state.hardState);
  }
  state.needsSnapshotAt = null;
  logger.info("recovery: the log starts after a snapshot of the store", { index: meta.index, term: meta.term });
}

/**
 * A lone node whose raft/ was removed starts a new history from its store (kept, or made from a
 * snapshot put back, as SPEC §4.5 restores a full backup), right after rebaseOnStore. A write
 * pause the store holds was the backup's (SPEC §4.4 pauses writes while it is taken), not the new
 * history's: it is resumed by the log's first entry, committed before the node starts, so the
 * store, a restart and any member added later all hold the same state.
 */
export function resumeBackupPause(state: LoadedState, logger: Logger): void {
  const { writesPaused, writesPausedUntilMs } = state.store.meta;
  if (!writesPaused) return;
  const base = state.coreBase;
  const index = (state.entries.at(-1)?.index ?? base?.index ?? 0) + 1;
  const term = Math.max(state.hardState.term, state.entries.at(-1)?.term ?? base?.term ?? 0);
  const entry = restoreEntry({ op: "resume_writes" }, index, term, Date.now());
  state.wal.append([entry]);
  state.wal.sync();
  state.entries = [...state.entries, entry];
  state.hardState = { ...state.hardState, term, commit: index };
  writeHardState(state.paths.hardStatePath, state.hardState);
  logger.warn(`recovery: ${backupPauseResumedText({ untilMs: writesPausedUntilMs }, "backup")}`, { index });
}

/**
 * A member of a multi-node cluster whose log lost entries (a cleared WAL) must not vouch for
 * what it no longer holds. It drops its store back to its newest local snapshot (or to
 * empty), starts the log after it, and fetches the rest from the leader — a newer snapshot
 * if the leader compacted past it. (The node also stops voting until then: see lostLog.)
 */
export function forgetLocalState(state: LoadedState, logger: Logger): void {
  const guard = Math.max(state.store.meta.appliedIndex, state.hardState.commit, state.entries.at(-1)?.index ?? 0);
  const base = state.snapshot;
  logger.warn("recovery: the WAL lost entries this node held; requesting them from the leader", {
    heldUpTo: guard, restartingFrom: base?.index ?? 0,
  });
  state.store.close({ discard: true });
  Store.remove(state.paths.storePath);
  const latest = base === null ? null : state.snapshots.list().find((e) => e.index === base.index && e.term === base.term);
  if (latest !== null && latest !== undefined) Store.installImage(join(latest.dir, snapshotStateFile), state.paths.storePath);
  state.store = Store.open(state.paths.storePath, { cacheKib: state.storeCacheKib });
  state.entries = [];
  state.coreBase = base;
  state.checkpointIndex = 0;
  writeCheckpoint(state.paths.raftDir, { index: base?.index ?? 0, term: base?.term ?? 0, clusterId: state.store.meta.clusterId });
  state.wal.resetTo((base?.index ?? 0) + 1);
  state.wal.removeSegmentsCoveredBy(Number.MAX_SAFE_INTEGER);
  state.hardState = { ...state.hardState, commit: base?.index ?? 0 };
  writeHardState(state.paths.hardStatePath, state.hardState);
  state.needsSnapshotAt = null;
  markLostLog(state.paths.raftDir, true);
}
