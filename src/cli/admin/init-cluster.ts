// init-cluster: offline, before the node starts. On an empty data directory it creates a
// new cluster (as the first start with bootstrap = true would); with --bootstrap it turns
// restored data (a backup, a point-in-time replay) into a new cluster, keeping all data.
// A data_dir that holds files other than svc's is refused before anything is written there.
// --data-dir takes the place of data_dir (the configuration still gives node id and members).

import { defineCommand } from "citty";
import { createLogger } from "../../log/index.ts";
import { bootstrapIfNew, isPristine, loadState, prepareDataDir, reinitCluster } from "../../node/index.ts";
import { giveToDataDirOwner, lockDataDir } from "../../storage/index.ts";
import { SvcError } from "../../util/index.ts";
import { defaultConfigPath, givenConfigPath, installedConfigPath, loadConfigOrExit, requireNewOrDataDir } from "../_config.ts";
import { printJson, printKeyValues } from "../_client.ts";
import { CliExit, ExitCode, usageError } from "../_exit.ts";

export const initClusterCommand = defineCommand({
  meta: { name: "init-cluster", description: "Create a new cluster on this (stopped) node; --bootstrap keeps restored data" },
  args: {
    config: { type: "string", description: `Configuration file (node id, data_dir, members; default ${defaultConfigPath()})`, valueHint: "FILE" },
    "data-dir": { type: "string", description: "The data directory to initialize, instead of data_dir in the configuration", valueHint: "DIR" },
    bootstrap: { type: "boolean", description: "Turn the data in data_dir (restored from a backup) into a new cluster" },
    force: { type: "boolean", description: "With --bootstrap: go on although the Raft state is newer than the restored snapshot" },
    json: { type: "boolean", description: "Print machine-readable JSON" },
  },
  async run({ args }) {
    const given = givenConfigPath(args.config);
    const configPath = given?.path ?? installedConfigPath;
    const loaded = loadConfigOrExit(configPath, given?.from);
    const dataDirFlag = args["data-dir"];
    const config = dataDirFlag === undefined || dataDirFlag === "" ? loaded : { ...loaded, dataDir: dataDirFlag };
    requireNewOrDataDir(config.dataDir, config === loaded ? `data_dir in ${configPath}` : "--data-dir");
    const logger = createLogger();
    const paths = prepareDataDir(config.dataDir);
    let lock;
    try {
      lock = lockDataDir(config.dataDir, "init-cluster");
    } catch (e) {
      throw e instanceof SvcError ? new CliExit(ExitCode.failure, `${e.message}\n  → stop the node first (systemctl stop svc)`) : e;
    }
    try {
      const state = await loadState(paths, config, logger.child("wal"));
      let result: Record<string, unknown>;
      if (isPristine(state) && args.bootstrap === true) {
        // Disaster recovery with the archive not extracted yet (or into another directory):
        // a new, empty cluster would take the restored one's place without a word. Closed
        // first: the store's open mark must not be left for the archive extracted next.
        state.wal.close();
        state.store.close();
        throw usageError(`${config.dataDir} holds no restored data (no snapshot in raft/snapshots/, no store/): --bootstrap makes a cluster of a restored backup\n` +
          `  → extract the archive into it first (tar xzf svc-backup-….tar.gz -C ${config.dataDir} raft store), or leave --bootstrap out to make a new, empty cluster`);
      }
      if (isPristine(state)) {
        const clusterId = bootstrapIfNew(state, { ...config, cluster: { ...config.cluster, bootstrap: true } }, logger.child("node"));
        result = { cluster_id: clusterId, data: "none (new cluster)", voters: config.cluster.members.map((m) => m.id) };
      } else if (args.bootstrap !== true) {
        throw usageError(`${config.dataDir} already holds data (applied index ${state.store.meta.appliedIndex}); pass --bootstrap to make a new cluster of it, or start the node to rejoin its cluster`);
      } else {
        const r = await reinitCluster(state, config, logger.child("node"), { force: args.force === true });
        result = { cluster_id: r.clusterId, snapshot_index: r.index, term: r.term, voters: r.voters, total_entries: r.rows };
      }
      state.wal.close();
      state.store.close();
      if (args.json) printJson(result);
      else {
        printKeyValues(result);
        process.stdout.write("start this node now, then the other members (empty, bootstrap = false); check with `svc admin cluster-status`\n");
      }
    } finally {
      lock.release();
      giveToDataDirOwner(config.dataDir);
    }
  },
});
