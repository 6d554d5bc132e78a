// init-cluster --bootstrap: turn restored data into a new cluster. The store's data is kept
// whole; the cluster gets a new id and the membership of the configuration file; the log
// starts over after a snapshot of the store. Nodes of the old cluster are refused by the
// new id, and the new members, started empty, receive the snapshot from this node.
//
// Deterministic: the new cluster id is derived from the restored snapshot (its cluster id,
// term, index and SHA-256) and the member list, and the log's start (the new snapshot's
// index, term and membership) from the same, so every node restored from one archive and
// initialized with one member list makes the same cluster, not one each. Running it again on a
// data directory it initialized (nothing written since) derives from the same restored snapshot
// (kept in raft/LOG_START), so an operator unsure whether the first run finished gets the same id.

import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { join } from "node:path";
import type { Config } from "../config/index.ts";
import { clearEntriesLost, markLostLog, snapshotStateFile, writeHardState, writeRemovedMark } from "../storage/index.ts";
import { readLogStart, readRestoreMarker, removeRestoreMarker, writeLogStart, type LogStart } from "../storage/restore-marker.ts";
import { SvcError } from "../util/errors.ts";
import { createSnapshotImage } from "../store/index.ts";
import type { Logger } from "../util/logger.ts";
import type { LoadedState } from "./load.ts";

export interface ReinitResult {
  clusterId: string;
  index: number;
  term: number;
  voters: string[];
  rows: number;
}

/** Where the restored data ends beyond the restored snapshot, or null when it does not. */
export function newerThanRestored(state: LoadedState): string | null {
  const marker = readRestoreMarker(state.paths.raftDir);
  const base = marker ?? state.snapshot;
  const baseIndex = base?.index ?? 0;
  const lastLogIndex = state.entries.at(-1)?.index ?? 0;
  const found: string[] = [];
  if (state.hardState.commit > baseIndex) found.push(`raft/hardstate commits up to ${state.hardState.commit}`);
  if (lastLogIndex > baseIndex) found.push(`the WAL holds entries up to ${lastLogIndex}`);
  if (state.store.meta.appliedIndex > baseIndex) found.push(`the store has applied up to ${state.store.meta.appliedIndex}`);
  if (found.length === 0) return null;
  return `${found.join(", ")}, past the ${marker === null ? "newest" : "restored"} snapshot at ${baseIndex}`;
}

/** The new cluster's id: a UUID-shaped digest of the restored snapshot and the member list. */
export function derivedClusterId(snapshot: { clusterId: string; index: number; term: number; stateSha256: string }, voters: readonly string[]): string {
  const h = createHash("sha256")
    .update(JSON.stringify({ from: snapshot, voters: [...voters].sort() }))
    .digest("hex");
  // RFC 4122 layout, version 8 (custom), variant 10.
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-${((Number.parseInt(h.slice(16, 17), 16) & 0x3) | 0x8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

const reinitReason = "init-cluster --bootstrap";

/**
 * The earlier init-cluster --bootstrap this data directory is the untouched result of (its
 * log starts at the newest snapshot, which is of the cluster the hard state and the store
 * name, and nothing was written after it), or null.
 */
function earlierInit(state: LoadedState): { start: LogStart; clusterId: string; voters: readonly string[] } | null {
  const start = readLogStart(state.paths.raftDir);
  if (start?.reason !== reinitReason) return null;
  const newest = state.snapshots.list().filter((e) => e.meta !== null).at(-1)?.meta ?? null;
  if (newest === null || newest.index !== start.index || newest.term !== start.term) return null;
  const clusterId = state.store.meta.clusterId;
  if (newest.clusterId !== clusterId || state.hardState.clusterId !== clusterId) return null;
  if ((state.entries.at(-1)?.index ?? 0) > start.index || state.store.meta.appliedIndex > start.index) return null;
  return { start, clusterId, voters: newest.membership.voters };
}

/** The source an earlier run cut short derived from, when the newest snapshot is the one it made. */
function interruptedFrom(state: LoadedState): LogStart["derivedFrom"] | null {
  const start = readLogStart(state.paths.raftDir);
  const newest = state.snapshots.list().filter((e) => e.meta !== null).at(-1)?.meta ?? null;
  if (start?.reason !== reinitReason || start.derivedFrom === undefined || newest === null) return null;
  return newest.index === start.index && newest.term === start.term ? start.derivedFrom : null;
}

const sameMembers = (a: readonly string[], b: readonly string[]): boolean => JSON.stringify([...a].sort()) === JSON.stringify([...b].sort());

export async function reinitCluster(state: LoadedState, config: Config, logger: Logger, options: { force?: boolean } = {}): Promise<ReinitResult> {
  const voters = config.cluster.members.length > 0 ? config.cluster.members.map((m) => m.id) : [config.nodeId];
  const earlier = earlierInit(state);
  if (earlier !== null && sameMembers(earlier.voters, voters)) {
    // Run before with these members, and nothing written since: the same cluster, left as it is.
    logger.info("already initialized as this cluster by an earlier init-cluster --bootstrap; nothing changed", { clusterId: earlier.clusterId, index: earlier.start.index });
    state.wal.close();
    return { clusterId: earlier.clusterId, index: earlier.start.index, term: earlier.start.term, voters, rows: state.store.stats().totalEntries };
  }
  if (earlier !== null && earlier.start.derivedFrom === undefined) {
    throw new SvcError("RESTORE_REFUSED", `this data directory was already made cluster ${earlier.clusterId} (members ${earlier.voters.join(", ")}) by init-cluster --bootstrap, and the configuration now names ${voters.join(", ")}`, {
      hint: "an id for the new member list cannot be derived from what is left here: extract the archive into an emptied data directory again and run init-cluster --bootstrap there (on every node)",
    });
  }
  const newer = newerThanRestored(state);
  if (newer !== null && options.force !== true) {
    throw new SvcError("RESTORE_REFUSED", `this data directory holds Raft state newer than the restored snapshot: ${newer}`, {
      hint: "it was not (only) restored from a backup: extract the archive into an emptied data directory, or pass --force to make a new cluster of everything it holds (nodes initialized from the archive alone would then differ)",
    });
  }
  const membership = { voters, learners: [] };
  const { store, snapshots, wal, paths } = state;
  const restored = snapshots.list().filter((e) => e.meta !== null).at(-1)?.meta ?? null;
  // Run again with another member list: from the snapshot restored the first time, as a node
  // initialized only once with this list derives it.
  const derivedFrom = earlier?.start.derivedFrom ?? interruptedFrom(state) ?? (restored === null
    ? { clusterId: store.meta.clusterId, index: store.meta.appliedIndex, term: store.meta.appliedTerm, stateSha256: "" }
    : { clusterId: restored.clusterId, index: restored.index, term: restored.term, stateSha256: restored.stateSha256 });
  const clusterId = derivedClusterId(derivedFrom, voters);
  // Entries the old cluster committed but the store had not applied yet are data too.
  const committed = state.entries.filter((e) => e.index > store.meta.appliedIndex && e.index <= state.hardState.commit);
  if (committed.length > 0) store.apply(committed);
  store.setClusterId(clusterId);
  store.setMembership(membership);
  // The new cluster's addresses are those of the configuration (the hosts it runs on now): the
  // old cluster's add-node and set-member rows would send every node to the old hosts.
  store.forgetMemberAddresses();
  // The new cluster's log starts after the image made below: whichever member leads, WAL
  // archiving starts there (every member started empty gets this in the image).
  store.setArchivedThrough(Math.max(1, store.meta.appliedIndex));
  if (store.meta.writesPaused) {
    // Paused in the data restored: the pause was the old cluster's, for its backup.
    logger.warn("writes had been paused when the backup was taken (the restored data holds that pause); the new cluster starts with writes resumed");
    store.clearWritesPause();
  }
  store.checkpoint();
  const tempDir = snapshots.beginTemp();
  const image = await createSnapshotImage(paths.storePath, join(tempDir, snapshotStateFile));
  // Index 0 would read as "no snapshot": a store that never applied anything starts at 1.
  const index = Math.max(1, image.appliedIndex);
  // Not the hard state's term: a node that ran after the restore may have a later one.
  const term = Math.max(1, image.appliedTerm);
  // The old cluster's image at the same term and index (a restored backup's) would be kept in
  // place of this one, with the old cluster id that members started empty would then adopt.
  for (const old of snapshots.list()) {
    if (old.index === index && old.term === term) fs.rmSync(old.dir, { recursive: true, force: true });
  }
  // Before the new snapshot becomes the newest: a run cut short after it still finds what the id
  // was derived from (interruptedFrom), and a run again derives the same one.
  writeLogStart(paths.raftDir, { index, term, reason: reinitReason, derivedFrom });
  const entry = await snapshots.commit(tempDir, { clusterId, index, term, membership, stateSha256: image.stateSha256 });
  wal.resetTo(index + 1);
  wal.removeSegmentsCoveredBy(Number.MAX_SAFE_INTEGER);
  wal.close();
  writeHardState(paths.hardStatePath, { term, vote: null, commit: index, clusterId });
  snapshots.prune(1);
  // The new cluster's log is whole: what the old one lost (a member restored from a snapshot
  // copied by hand starts with LOST_LOG) is no part of it.
  markLostLog(paths.raftDir, false);
  clearEntriesLost(paths.raftDir);
  // Nor is a removal from it: the new cluster's membership is the one just written.
  writeRemovedMark(paths.raftDir, null);
  writeLogStart(paths.raftDir, { index, term, reason: reinitReason, derivedFrom });
  removeRestoreMarker(paths.raftDir);
  const rows = store.stats().totalEntries;
  logger.info("initialized a new cluster from the data", { clusterId, index, term, voters, snapshot: entry.dir });
  return { clusterId, index, term, voters, rows };
}
