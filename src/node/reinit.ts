// init-cluster --bootstrap: turn restored data into a new cluster. The store's data is kept
// whole; the cluster gets a new id and the membership of the configuration file; the log
// starts over after a snapshot of the store. Nodes of the old cluster are refused by the
// new id, and the new members, started empty, receive the snapshot from this node.

import { randomUUID } from "node:crypto";
import { join } from "node:path";
import type { Config } from "../config/index.ts";
import { snapshotStateFile, writeHardState } from "../storage/index.ts";
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

export async function reinitCluster(state: LoadedState, config: Config, logger: Logger): Promise<ReinitResult> {
  const clusterId = randomUUID();
  const voters = config.cluster.members.length > 0 ? config.cluster.members.map((m) => m.id) : [config.nodeId];
  const membership = { voters, learners: [] };
  const { store, snapshots, wal, paths } = state;
  // Entries the old cluster committed but the store had not applied yet are data too.
  const committed = state.entries.filter((e) => e.index > store.meta.appliedIndex && e.index <= state.hardState.commit);
  if (committed.length > 0) store.apply(committed);
  store.setClusterId(clusterId);
  store.setMembership(membership);
  store.checkpoint();
  const tempDir = snapshots.beginTemp();
  const image = await createSnapshotImage(paths.storePath, join(tempDir, snapshotStateFile));
  // Index 0 would read as "no snapshot": a store that never applied anything starts at 1.
  const index = Math.max(1, image.appliedIndex);
  const term = Math.max(1, image.appliedTerm, state.hardState.term);
  const entry = await snapshots.commit(tempDir, { clusterId, index, term, membership, stateSha256: image.stateSha256 });
  wal.resetTo(index + 1);
  wal.removeSegmentsCoveredBy(Number.MAX_SAFE_INTEGER);
  wal.close();
  writeHardState(paths.hardStatePath, { term, vote: null, commit: index, clusterId });
  snapshots.prune(1);
  const rows = store.stats().totalEntries;
  logger.info("initialized a new cluster from the data", { clusterId, index, term, voters, snapshot: entry.dir });
  return { clusterId, index, term, voters, rows };
}
