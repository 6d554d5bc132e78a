// Starting a node on its data directory: the production io. Opens and locks the directory,
// binds the peer port, loads hard state, snapshots, WAL and store (load.ts), decides where the
// log starts (a new cluster, a lone node whose store outlived its WAL, a member that lost
// entries: bootstrap.ts), and builds the Raft core on what was loaded.

import { existsSync, mkdirSync, readdirSync, realpathSync, renameSync } from "node:fs";
import { dirname, join } from "node:path";
import type { Config } from "../config/index.ts";
import { freeBytes, isDiskFullError, systemClock } from "../io/index.ts";
import { RaftCore } from "../raft/index.ts";
import {
  FileLogStore, ballastBytes, ensureMemberMark, fsyncDir, hasLostLog, inspectRemovedMark, type RemovedMark, linkDataDirAliases, markLostLog, readMemberMark, lockDataDir, manageBallast, verifySnapshot, type DataPaths, type SnapshotEntry,
} from "../storage/index.ts";
import { createTransport, type MessageHandler } from "../transport/index.ts";
import type { Logger } from "../util/logger.ts";
import { createPrng } from "../util/prng.ts";
import { SvcError, errorMessage } from "../util/errors.ts";
import { bootstrapIfNew, clampCommit, forgetLocalState, planStart, rebaseOnStore, resumeBackupPause } from "./bootstrap.ts";
import { FileSnapshots } from "./file-snapshots.ts";
import { isPristine, loadState, prepareDataDir, toHardState } from "./load.ts";
import type { NodeParts } from "./context.ts";
import { adoptRestoredBackup } from "./restored.ts";
import { fileSnapshotTransfer } from "./snapshot-transfer.ts";
import type { GossipService } from "../gossip/index.ts";
import { openGossip } from "./gossip.ts";
import { fileWalArchiveIo } from "./wal-archive-io.ts";
import { PeerSecrets } from "./peer-tls.ts";
import { registerTransportMetrics } from "./transport-metrics.ts";
import { LoopLagProbe } from "./loop-lag.ts";
import { memoryBudget } from "./memory-budget.ts";
import { osThreadPriority } from "./catch-up-priority.ts";

/**
 * `secrets`: the peer port's certificates and gossip keys, already read (serve reloads them on
 * SIGHUP and file changes); read here when absent.
 */
export async function openNode(
  config: Config,
  logger: Logger,
  handlers: { onMessage: MessageHandler; onPeerUnreachable: (peerId: string) => void; onPeerReachable: (peerId: string) => void },
  secrets?: PeerSecrets,
): Promise<NodeParts> {
  const paths = prepareDataDir(config.dataDir);
  const lock = lockDataDir(config.dataDir, `node ${config.nodeId}`);
  const peerSecrets = secrets ?? PeerSecrets.load(config, logger.child("node"));
  const peerTls = peerSecrets.tls;
  const lag = new LoopLagProbe(systemClock);
  const transport = createTransport({
    nodeId: config.nodeId,
    clusterId: "",
    listen: { hostname: config.listen.peer.host, port: config.listen.peer.port },
    logger: logger.child("transport"),
    onMessage: handlers.onMessage,
    onPeerUnreachable: handlers.onPeerUnreachable,
    onPeerReachable: handlers.onPeerReachable,
    ...(peerTls === undefined ? {} : { tls: peerTls }),
  });
  peerSecrets.attach(transport);
  let gossip: GossipService | null = null;
  try {
    transport.start();
    // Gossip answers on the same port number over UDP: one port for the firewall.
    gossip = await openGossip(config, logger, peerSecrets.gossipKeyFor());
    const log = logger.child("node");
    log.info("recovery: starting", { nodeId: config.nodeId, dataDir: config.dataDir });
    const ballast = manageBallast(config.dataDir, ballastBytes);
    if (ballast === "released") {
      log.warn("disk full: removed the data directory's BALLAST file so that the node can start; writes are refused until space is freed", {
        bytes: ballastBytes, hint: "free space on the data directory's file system; the ballast is made again at a start that finds room",
      });
    }
    linkAliases(paths, log);
    const restored = await adoptRestoredBackup(paths, config, log);
    const multiMember = config.cluster.members.length > 1;
    // A member rebuilt from nothing (SPEC §4.6: raft/ and store/ removed, <data_dir>/MEMBER
    // kept) may have acknowledged entries before its state was removed. Its vote would let a
    // member that lacks them lead, and write over them: like a member that lost its WAL, it
    // votes only once a leader has caught it up, and the mark is made before anything else is
    // written (a crash in between would leave a store, and the next start would vote). See
    // peer-messages.ts for the votes it still gives: a new cluster's first election, and a
    // cluster other than the one it belonged to (restored onto this host with init-cluster). A
    // new host's empty data directory, and a member that kept its store while raft/ was cleared
    // on every node (SPEC §4.5's point-in-time restore), vote: a restored node's new history
    // needs a majority to begin.
    const memberOf = readMemberMark(paths.dataDir);
    const rebuilt = multiMember && memberOf !== null && !existsSync(paths.storePath) && !existsSync(paths.hardStatePath);
    if (rebuilt && !hasLostLog(paths.raftDir)) {
      mkdirSync(paths.raftDir, { recursive: true, mode: 0o750 });
      markLostLog(paths.raftDir, true);
      log.warn("recovery: this node belonged to a cluster (<data_dir>/MEMBER) and its raft/ and store/ are gone: it is rebuilt from the leader and does not vote until then", {
        clusterId: memberOf, hint: "a new, empty node is made by emptying the whole data directory",
      });
    }
    const state = await loadState(paths, config, logger.child("wal")).catch(async (e: unknown) => {
      // A member whose WAL starts after a gap nothing local bridges (the image that covered it
      // is damaged, the store gone): the leader holds the rest. The WAL is set aside, kept, and
      // the node recovers as after SPEC §4.6's removal of the WAL's contents: it does not vote
      // until caught up. Only with nothing local to lose (a store holding entries could hold
      // some no one else does), and only where others can lead: the configuration file names
      // other members, and the log's newest configuration, when the WAL holds one, has a
      // majority of voters besides this node (a cluster shrunk to this one voter, its file never
      // edited, would wait for ever). Otherwise it stops (LOG_GAP, exit 3) for the operator.
      if (!multiMember || !(e instanceof SvcError) || e.code !== "LOG_GAP" || e.details["walStartsAfterGap"] === undefined) throw e;
      const { storeAppliedIndex, otherVoters, voters } = e.details as { storeAppliedIndex: number; otherVoters: number | null; voters: number | null };
      if (storeAppliedIndex !== 0 || (otherVoters !== null && voters !== null && otherVoters < Math.floor(voters / 2) + 1)) throw e;
      const aside = setWalAside(paths);
      markLostLog(paths.raftDir, true);
      log.warn(`recovery: ${e.message}; the WAL was moved to ${aside} and this node gets the log from the leader (it does not vote until then)`, {
        hint: `once the node is healthy, ${aside} may be removed; to look into the gap first, stop the node and see \`svc admin verify-checksums\``,
      });
      return loadState(paths, config, logger.child("wal"));
    });
    if (state.imageToCheck !== null) checkImageLater(state.imageToCheck, log);
    const deferred = state.store.deferredConstraintTables();
    if (deferred.length > 0) {
      log.warn(`tables with an INITIALLY DEFERRED constraint, made before svc refused them: ${deferred.join(", ")}; a write that leaves one violated fails the store's commit on every node, which then stop`, {
        hint: "recreate each without deferral (CREATE TABLE new … with immediate constraints, INSERT INTO new SELECT * FROM old, DROP TABLE old, ALTER TABLE new RENAME TO old) before writing to it",
      });
    }
    const wasPristine = isPristine(state);
    // A lone node has no other member to rebuild it: with its raft/ and store/ gone but MEMBER
    // kept (SPEC §4.6's full rebuild, done on a single node), it would start a new, empty
    // cluster, and the data would be gone without a word. Emptying the whole data directory
    // (MEMBER too) is how a new, empty node is asked for.
    if (!multiMember && wasPristine && memberOf !== null) {
      throw new SvcError("DATA_GONE", `this lone node belonged to cluster ${memberOf} (${join(paths.dataDir, "MEMBER")}), but its raft/ and store/ are gone: ` +
        "no other member holds its data, and starting would make a new, empty cluster", {
        hint: `restore a backup (SPEC §4.5; see README "Backup and restore"); if the cluster has other members (added at run time), list them in [cluster] members so that this node is rebuilt from them; ` +
          `to start empty on purpose, remove ${join(paths.dataDir, "MEMBER")} too`,
      });
    }
    // Rebuilt, it never starts a cluster of its own: it waits for the one it belonged to.
    const mayBootstrap = config.cluster.bootstrap && !(multiMember && wasPristine && memberOf !== null);
    if (config.cluster.bootstrap && !mayBootstrap) {
      log.warn("bootstrap = true, but this data directory belonged to a cluster (<data_dir>/MEMBER): this node waits for that cluster's leader rather than start a new one", {
        clusterId: memberOf, hint: "set bootstrap = false on this node; to make a new cluster here, empty the whole data directory",
      });
    }
    const formed = wasPristine && mayBootstrap && multiMember
      ? await clusterOfPeers(transport, config, 2 * config.raft.electionTimeoutMs)
      : null;
    if (formed !== null) {
      // Rebuilt from nothing (SPEC §4.6 full state rebuild) with bootstrap = true left on: a new
      // cluster would be one the members refuse. This node waits to be sent the cluster's state.
      log.warn("bootstrap = true, but member " + formed.peer + " already belongs to a cluster: this node joins it rather than start a new one", {
        clusterId: formed.clusterId, hint: "bootstrap = true matters only at a new cluster's first start; set it to false on this node",
      });
    }
    const clusterId = formed !== null || (wasPristine && !mayBootstrap) ? "" : bootstrapIfNew(state, config, log);
    // (A lone voter has no one to catch up with: it never holds back.)
    let lostLog = multiMember && hasLostLog(paths.raftDir);
    // A restored backup's snapshot is a complete log's start, not a lost WAL.
    const walWasEmpty = state.walWasEmpty && restored === null;
    switch (planStart({ multiMember, walWasEmpty, wasPristine, needsSnapshotAt: state.needsSnapshotAt })) {
      case "as_loaded": {
        // A member that lost what it had voted or held keeps what it holds (a prefix of the log,
        // its term from the log) and gets the rest from the leader; until then its vote could
        // elect a member lacking acknowledged writes, or be cast twice in a term.
        const holdVote = (message: string, fields: Record<string, unknown>): void => {
          if (!lostLog) markLostLog(paths.raftDir, true);
          lostLog = true;
          log.warn(`recovery: ${message}; it does not vote until a leader has caught it up`, fields);
        };
        if (multiMember && state.hardStateLost) {
          holdVote("raft/hardstate is gone while the WAL holds a cluster's log: the votes this node cast are forgotten", {
            hint: "raft/hardstate is only ever replaced atomically; if it was moved away, stop the node and put it back",
          });
        }
        if (multiMember && state.lostCommitted !== null) {
          holdVote("this node's checkpoint shows entries its WAL no longer holds (segments lost from its end?); it fetches them from the leader", {
            checkpointedThrough: state.lostCommitted.committed, holdsThrough: state.lostCommitted.heldThrough,
            hint: "if WAL segments were moved away by mistake, stop the node and put them back into raft/wal/",
          });
        }
        break;
      }
      case "forget_local_state":
        forgetLocalState(state, log);
        lostLog = true;
        break;
      case "rebase_on_store":
        if (walWasEmpty && state.store.leftOpen) {
          // Its last applies were committed to the store only in part: the WAL held the rest.
          log.warn("the WAL was emptied after this node stopped without closing its store: writes it acknowledged last may be lost", {
            storeAppliedIndex: state.store.meta.appliedIndex,
            hint: "a lone node's WAL is removed only after a clean stop (restart it once after a crash, then stop it); with a backup of the WAL, stop the node and put it back",
          });
        }
        await rebaseOnStore(state, clusterId, log);
        // raft/ removed: a restore (SPEC §4.5), which starts a new history from the store.
        if (!state.hadHardState) resumeBackupPause(state, log);
        break;
    }
    if (clusterId !== "") ensureMemberMark(paths.dataDir, clusterId);
    const removedMark = loadRemovedMark(paths.raftDir, clusterId, log);
    const tickMs = config.raft.heartbeatIntervalMs;
    const raftLogger = logger.child("raft");
    const core = new RaftCore(
      {
        id: config.nodeId,
        electionTimeoutTicks: Math.max(2, Math.round(config.raft.electionTimeoutMs / tickMs)),
        heartbeatTicks: 1,
        prng: createPrng(Date.now() >>> 0, process.pid),
        logger: raftLogger,
        preVote: true,
        checkQuorum: true,
        maxInflightAppends: 64,
        maxEntriesPerAppend: 4096,
        // A member far behind is sent at most 4 MiB of entries before it acknowledges, in
        // appends of at most 512 KiB: what one turn of the loop encodes stays a few ms.
        maxBytesPerAppend: 512 * 1024,
        maxInflightBytes: 4 * 1024 * 1024,
        // A member behind the in-memory log is sent entries from the WAL while it holds them.
        catchUpFromLogStore: true,
        maxPendingProposals: 65_536,
      },
      {
        hardState: clampCommit(toHardState(state.hardState), state),
        snapshot: state.coreBase,
        entries: state.entries,
        appliedIndex: state.store.meta.appliedIndex,
        removal: removedMark === null ? null : { configIndex: removedMark.configIndex, by: removedMark.by },
      },
    );
    const network = {
      send: transport.send.bind(transport),
      setPeers: transport.setPeers.bind(transport),
      setClusterId: (id: string) => {
        transport.setClusterId(id);
        gossip?.setClusterId(id);
      },
      close: () => {
        transport.close();
        gossip?.close();
      },
      linkStatus: () => {
        const out: Record<string, { connected: boolean; inboundConnected: boolean; address: string; lastFailure: string | null }> = {};
        for (const [id, p] of Object.entries(transport.stats().peers)) {
          out[id] = { connected: p.connected, inboundConnected: p.inboundConnected, address: p.address, lastFailure: p.lastFailure };
        }
        return out;
      },
    };
    const collectGarbage = (full: boolean): void => Bun.gc(full);
    return {
      config,
      logger: log,
      io: {
        clock: systemClock,
        log: new FileLogStore(state.wal, paths),
        snapshots: new FileSnapshots(state.snapshots, paths.storePath, state.storeCacheKib, (dir, reason) => {
          log.error("this node's newest snapshot image was damaged; replaced by a new image of the same index", { dir, reason });
        }),
        network,
        collectGarbage,
        threadPriority: osThreadPriority(),
        diskSpace: { path: config.dataDir, freeBytes: () => freeBytes(config.dataDir) },
        ...(config.wal.archiveCommand === "" ? {} : { walArchive: fileWalArchiveIo(config.wal.archiveCommand, paths, state.wal) }),
      },
      core,
      raftLogger,
      store: state.store,
      hardState: state.hardState,
      clusterId,
      lostLog,
      removedMark,
      memberOf,
      // A refused dial is retried every few seconds: one refused within two minutes is current.
      peersOfAnotherCluster: () => transport.peersOfAnotherCluster(120_000),
      ofAnotherCluster: (peerId: string) => {
        const heard = transport.heardClusterIds().get(peerId) ?? "";
        return memberOf !== null && heard !== "" && heard !== memberOf;
      },
      checkpointIndex: state.checkpointIndex,
      makeTransfer: (hooks, metrics) => fileSnapshotTransfer(network, state.snapshots, paths.storePath, logger.child("snapshot"), metrics, hooks, systemClock, {
        everyBytes: memoryBudget(config.maxMemoryBytes).garbageBytes,
        collect: () => collectGarbage(true),
      }),
      release: () => {
        lag.stop();
        lock.release();
      },
      verifyTarget: { paths },
      registerMetrics: (registry) => {
        registerTransportMetrics(registry, transport);
        lag.register(registry);
        lag.start();
      },
      ...(gossip === null ? {} : { gossip }),
    };
  } catch (e) {
    transport.close();
    gossip?.close();
    lock.release();
    if (isDiskFullError(e) && !(e instanceof SvcError)) {
      // Only a node with nothing to serve yet stops here (a new cluster's first segment): an
      // existing one starts and waits for space (loop.ts).
      throw new SvcError("DISK_FULL", `cannot start: ${errorMessage(e)}`, {
        hint: "free space on the data directory's file system, or lower wal.segment_size_mb (each WAL segment is written in full when it is made)",
        cause: e,
      });
    }
    throw e;
  }
}

/**
 * <data_dir>/wal and <data_dir>/snapshots, the names SPEC §2.1 also gives raft/wal and
 * raft/snapshots (storage/aliases.ts): made as links when free; what an operator put there
 * instead is left alone, and said once per start.
 */
function linkAliases(paths: DataPaths, log: Logger): void {
  for (const alias of linkDataDirAliases(paths)) {
    const what = alias.name === "wal" ? "WAL" : "snapshot";
    if (alias.result === "made") log.info(`made ${alias.path} a link to ${alias.target}, the ${what} directory`);
    if (alias.result !== "blocked") continue;
    log.warn(`${alias.path} is ${alias.found}, not a link to ${alias.target}: left as it is`, {
      hint: `svc keeps its ${what} files in ${alias.target} and does not use ${alias.path}; to have that name lead to them, move it away and restart the node`,
    });
  }
}

/**
 * The newest image, not hashed at this start (the store was kept), is checked in the background:
 * a damaged one is reported with the way out, and is not what a rebuild or a follower relies on
 * (both hash it again before use).
 */
function checkImageLater(entry: SnapshotEntry, log: Logger): void {
  void verifySnapshot(entry).then(
    (check) => {
      if (check.ok) log.debug("the newest snapshot image checks", { dir: entry.dir });
      else log.error("the newest snapshot image is damaged", { dir: entry.dir, reason: check.reason, hint: "take a new one with `svc admin snapshot` (POST /admin/snapshot); a rebuild meanwhile uses an older image that checks" });
    },
    (e: unknown) => log.warn("could not check the newest snapshot image", { dir: entry.dir, error: errorMessage(e) }),
  );
}

/**
 * Whether the other members already form a cluster, asked of them before this node, empty and
 * told to bootstrap, makes a new one: it dials them without a cluster id, and waits up to
 * `waitMs` for one of them to show one (a member with a cluster id, refusing that dial, dials
 * back with it at once; one that no longer counts this node a member refuses it saying it is in
 * a cluster). Every other member heard with none, or none heard in time: no cluster.
 */
async function clusterOfPeers(
  transport: { setPeers(peers: Record<string, string>): void; heardClusterIds(): ReadonlyMap<string, string>; peersInAClusterUntold(): ReadonlySet<string> },
  config: Config,
  waitMs: number,
): Promise<{ clusterId: string; peer: string } | null> {
  const others = config.cluster.members.filter((m) => m.id !== config.nodeId);
  transport.setPeers(Object.fromEntries(others.map((m) => [m.id, m.peer.raw])));
  const deadline = Date.now() + waitMs;
  for (;;) {
    const heard = transport.heardClusterIds();
    for (const [peer, clusterId] of heard) if (clusterId !== "") return { clusterId, peer };
    // One that refused this node (removed from it, say) without dialling back is in a cluster all the same.
    for (const peer of transport.peersInAClusterUntold()) return { clusterId: "(not told)", peer };
    if (others.every((m) => heard.get(m.id) === "") || Date.now() >= deadline) return null;
    await Bun.sleep(20);
  }
}

/**
 * raft/REMOVED, as the core takes it: a member told this node it was removed (see
 * NodeContext.syncRemoval). One that is damaged, or of another cluster (the data was made a new
 * cluster since), is ignored with a warning: the node then campaigns, and a member tells it again.
 */
function loadRemovedMark(raftDir: string, clusterId: string, log: Logger): RemovedMark | null {
  const read = inspectRemovedMark(raftDir);
  if (read.kind === "none") return null;
  if (read.kind === "damaged") {
    log.warn(`raft/REMOVED is damaged (${read.reason}): ignored; if this node was removed from the cluster, a member tells it again once it reaches one`, {
      hint: "move raft/REMOVED aside to silence this",
    });
    return null;
  }
  if (read.mark.clusterId !== clusterId) {
    log.warn("raft/REMOVED names another cluster than this node's: ignored", { recorded: read.mark.clusterId, clusterId, hint: "move raft/REMOVED aside to silence this" });
    return null;
  }
  return read.mark;
}

/**
 * Move raft/wal's files to wal-gap-<time>/ beside it (kept for the operator; beside the WAL's
 * real directory, so that a WAL linked to another file system is moved within it); returns
 * that directory.
 */
function setWalAside(paths: DataPaths): string {
  const aside = join(dirname(realpathSync(paths.walDir)), `wal-gap-${new Date().toISOString().replace(/[:.]/g, "-")}`);
  mkdirSync(aside, { recursive: true, mode: 0o750 });
  fsyncDir(dirname(aside));
  for (const name of readdirSync(paths.walDir)) renameSync(join(paths.walDir, name), join(aside, name));
  fsyncDir(aside);
  fsyncDir(paths.walDir);
  return aside;
}
