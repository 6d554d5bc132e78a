// Where everything lives under the data directory (DESIGN.md §4).

import { join } from "node:path";

export interface DataPaths {
  dataDir: string;
  raftDir: string;
  walDir: string;
  snapshotsDir: string;
  hardStatePath: string;
  storeDir: string;
  storePath: string;
}

export function dataPaths(dataDir: string): DataPaths {
  const raftDir = join(dataDir, "raft");
  const storeDir = join(dataDir, "store");
  return {
    dataDir,
    raftDir,
    walDir: join(raftDir, "wal"),
    snapshotsDir: join(raftDir, "snapshots"),
    hardStatePath: join(raftDir, "hardstate"),
    storeDir,
    storePath: join(storeDir, "state.db"),
  };
}
