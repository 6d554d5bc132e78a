// Loading a node's state from its data directory at start: hard state, snapshots, the WAL,
// and the store, which is rebuilt from the latest valid snapshot plus the WAL when it is
// missing, damaged or behind the snapshot. The result is what the Raft core starts from.
//
// Every decision here only ever uses committed data: the store holds only applied (so
// committed) entries and a snapshot is an image of the store, so using either to stand in
// for a missing log prefix never invents a write.

import * as fs from "node:fs";
import { basename, join } from "node:path";
import type { Config } from "../config/index.ts";
import type { Entry, HardState, Membership, SnapshotMeta } from "../raft/types.ts";
import {
  SnapshotStore, Wal, dataPaths, parseSnapshotDirName, listSegments, ensureDir, initialHardState, readEntriesLost, readHardState, readMemberMark, removeAtomicWriteLeftovers, removeReplayLeftovers, snapshotStateFile,
  type DataPaths, type SnapshotEntry, type StoredHardState,
} from "../storage/index.ts";
import { Store, setAsideCopies } from "../store/index.ts";
import { openWalAroundDamage } from "./wal-damage.ts";
import { StartImages } from "./start-images.ts";
import { memoryBudget } from "./memory-budget.ts";
import type { CheckpointRecord } from "../io/index.ts";
import { SvcError, errorMessage, isSvcError } from "../util/errors.ts";
import type { Logger } from "../util/logger.ts";
import { processOwnerSpec, userNameOf } from "../util/user.ts";
import { pseudoFileSystemOf, pseudoFileSystemProblem } from "../util/pseudo-fs.ts";
import { decodeMembership, isOnlyMember } from "../util/log-data.ts";
import { judgeCheckpoint, refuseUnreachableCheckpoint } from "./checkpoint-trust.ts";

export interface LoadedState {
  paths: DataPaths;
  hardState: StoredHardState;
  wal: Wal;
  snapshots: SnapshotStore;
  store: Store;
  /** The newest image (snapshot directory), null when there is none. */
  snapshot: SnapshotMeta | null;
  /**
   * Where the Raft core's log starts: the store's applied state when the store holds more
   * than the newest image (the usual case), else that image; null for an empty node.
   */
  coreBase: SnapshotMeta | null;
  /** Log entries after coreBase, contiguous. */
  entries: Entry[];
  /** The index raft/checkpoint vouches the store durable to (0 when none). */
  checkpointIndex: number;
  /** The store's applied index needs a fresh local snapshot before the log can start (set by load). */
  needsSnapshotAt: number | null;
  /** raft/wal/ held no segment at all: on a cluster member, the state to fetch from the leader. */
  walWasEmpty: boolean;
  /** raft/hardstate was there: false when raft/ was removed (a restore) or never written. */
  hadHardState: boolean;
  /** The store's SQLite page cache (storeCacheKib), for a store opened again. */
  storeCacheKib: number;
  /** The newest image when this start did not need to hash it: to check once the node serves. */
  imageToCheck: SnapshotEntry | null;
  /**
   * A cluster member whose raft/ says it had committed entries past all it still holds (WAL
   * segments lost from its tail, a wal-repair that dropped some): it must not vote until a
   * leader gives them back (see start.ts). null when it holds all it committed.
   */
  lostCommitted: { committed: number; heldThrough: number } | null;
  /** raft/hardstate was missing beside a log past a bootstrap's first entries: the votes it cast are forgotten. */
  hardStateLost: boolean;
}

/** The entries a new cluster's bootstrap writes (its membership, its cluster id). */
const bootstrapEntries = 2;

/** Make the directory layout, checking that this process may write there. */
export function prepareDataDir(dataDir: string): DataPaths {
  const paths = dataPaths(dataDir);
  // Before anything is made there: as root, a directory under /dev would be made, and served from.
  const pseudo = pseudoFileSystemOf(dataDir);
  if (pseudo !== null) {
    throw new SvcError("DATA_DIR_INVALID", `the data directory ${pseudoFileSystemProblem(dataDir, pseudo)}`, {
      hint: "set data_dir to a directory on a disk (e.g. /var/lib/svc); `svc --config FILE --validate` checks it",
    });
  }
  checkOwner(dataDir);
  checkTreeShape(paths);
  try {
    ensureDir(dataDir);
    fs.accessSync(dataDir, fs.constants.W_OK | fs.constants.R_OK | fs.constants.X_OK);
    for (const dir of [paths.raftDir, paths.walDir, paths.snapshotsDir, paths.storeDir]) ensureDir(dir);
    const probe = join(dataDir, `.write-probe-${process.pid}`);
    fs.writeFileSync(probe, "");
    fs.rmSync(probe);
  } catch (e) {
    const errno = (e as NodeJS.ErrnoException).code;
    if (errno !== "EACCES" && errno !== "EPERM") {
      // Not a question of who may write: a full or failing disk, which may pass.
      throw new SvcError("STORAGE_FAILED", `cannot write to the data directory ${dataDir}: ${errorMessage(e)}`, {
        hint: errno === "ENOSPC" || errno === "EDQUOT"
          ? "free space (or inodes) on its file system; the node starts once it can write"
          : "check the disk and the kernel log (dmesg); the node starts once it can write",
        cause: e,
      });
    }
    const owner = ownerOf(dataDir);
    throw new SvcError("DATA_DIR_NOT_WRITABLE", `cannot write to the data directory ${dataDir}: ${errorMessage(e)}${owner}`, {
      hint: `give the user svc runs as ownership of it (e.g. \`chown -R ${processOwnerSpec()} ${dataDir}\`) or set data_dir to a writable place`,
    });
  }
  checkTreeAccess(paths);
  return paths;
}

/**
 * Every directory and file svc keeps below the data directory must be its to read and write: one
 * left to another user (a copy made as root, a chmod) otherwise surfaced later as a bare EACCES,
 * or only when a new WAL segment was due, hours into a run.
 */
function checkTreeAccess(paths: DataPaths): void {
  const { R_OK, W_OK, X_OK } = fs.constants;
  const refused: string[] = [];
  const check = (path: string, mode: number): void => {
    try {
      fs.accessSync(path, mode);
    } catch {
      let st: fs.Stats;
      try {
        st = fs.statSync(path);
      } catch {
        return; // gone meanwhile
      }
      refused.push(`${path} (owner uid ${st.uid}, mode ${(st.mode & 0o7777).toString(8).padStart(4, "0")})`);
    }
  };
  // Files in a snapshot directory are only read (and removed with their directory).
  const walk = (dir: string, depth: number, fileMode = R_OK | W_OK): void => {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      return; // the directory itself was checked (and refused) by its parent
    }
    for (const entry of entries) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        check(path, R_OK | W_OK | X_OK);
        if (depth > 0) walk(path, depth - 1, R_OK);
      } else if (entry.isFile()) {
        check(path, fileMode);
      }
    }
  };
  for (const dir of [paths.dataDir, paths.raftDir, paths.walDir, paths.snapshotsDir, paths.storeDir]) check(dir, R_OK | W_OK | X_OK);
  // At the top only svc's own files: the data directory may be a mount point (lost+found is root's).
  for (const name of ["LOCK", "MEMBER", "BALLAST"]) check(join(paths.dataDir, name), R_OK | W_OK);
  walk(paths.raftDir, 0);
  walk(paths.walDir, 0);
  walk(paths.snapshotsDir, 1);
  walk(paths.storeDir, 0);
  if (refused.length === 0) return;
  const uid = process.getuid?.();
  const shown = [...new Set(refused)];
  throw new SvcError("DATA_DIR_NOT_WRITABLE", `svc${uid === undefined ? "" : ` (uid ${uid})`} cannot read and write ${shown.length === 1 ? "" : `${shown.length} paths `}below its data directory: ${someOf(shown)}`, {
    hint: `give the user svc runs as everything below the data directory: \`chown -R ${processOwnerSpec()} ${paths.dataDir}\` (and \`chmod -R u+rwX ${paths.dataDir}\`)`,
  });
}

/**
 * A hard state of another cluster than both <data_dir>/MEMBER and the newest image say: the
 * file was copied in from another cluster's node. Taken as it is, the node would adopt that
 * cluster's id (and rewrite MEMBER to it), rebuild its store, and be refused by every member.
 * A restore or init-cluster brings its own image of the new cluster, so it is not refused here.
 */
function refuseForeignHardState(paths: DataPaths, hardState: StoredHardState | null, imageClusterId: string): void {
  if (hardState === null || hardState.clusterId === "") return;
  const member = readMemberMark(paths.dataDir);
  if (member === null || hardState.clusterId === member || imageClusterId !== member) return;
  throw new SvcError("RAFT_STATE_INVALID", `${paths.hardStatePath} is not this node's: it belongs to cluster ${hardState.clusterId}, while this node and its newest snapshot belong to ${member} (a file copied from another cluster)`, {
    hint: foreignHardStateWayOut(paths),
  });
}

/** What to do about a raft/hardstate that is not this node's (copied from another node or cluster, or an old copy). */
function foreignHardStateWayOut(paths: DataPaths): string {
  return `put back this node's own raft/hardstate; if it is lost, move ${paths.hardStatePath} aside: the node then resumes in the term of its log` +
    " (a cluster member also holds its vote until a leader has caught it up)";
}

/** The first few of `paths`, for a message (the rest counted by "…"). */
function someOf(paths: readonly string[]): string {
  return `${paths.slice(0, 5).join(", ")}${paths.length > 5 ? ", …" : ""}`;
}

/**
 * What svc keeps below its data directory must be of the kind it keeps there: a directory where
 * it keeps a file (or the other way round), or a link that leads nowhere, otherwise surfaced as
 * a bare EISDIR or ENOENT from deep in the start, naming no path. Absent ones are made as needed.
 */
function checkTreeShape(paths: DataPaths): void {
  const wrong: string[] = [];
  const expect = (path: string, kind: "file" | "directory"): void => {
    let st: fs.Stats;
    try {
      st = fs.lstatSync(path);
    } catch {
      return;
    }
    if (st.isSymbolicLink()) {
      try {
        st = fs.statSync(path);
      } catch {
        wrong.push(`${path} (a link that leads nowhere)`);
        return;
      }
    }
    const is = st.isDirectory() ? "directory" : st.isFile() ? "file" : "special file";
    if (is !== kind) wrong.push(`${path} (a ${is} where svc keeps a ${kind})`);
  };
  for (const dir of [paths.raftDir, paths.walDir, paths.snapshotsDir, paths.storeDir]) expect(dir, "directory");
  for (const name of ["LOCK", "MEMBER", "BALLAST"]) expect(join(paths.dataDir, name), "file");
  for (const name of ["hardstate", "checkpoint", "LOST_LOG", "ENTRIES_LOST", "REMOVED"]) expect(join(paths.raftDir, name), "file");
  expect(paths.storePath, "file");
  try {
    for (const name of fs.readdirSync(paths.walDir)) if (name.endsWith(".wal")) expect(join(paths.walDir, name), "file");
  } catch {
    // No WAL directory yet, or not one: said above.
  }
  if (wrong.length === 0) return;
  throw new SvcError("DATA_DIR_INVALID", `${wrong.length === 1 ? "a path" : `${wrong.length} paths`} below the data directory ${wrong.length === 1 ? "is" : "are"} not what svc keeps there: ${someOf(wrong)}`, {
    hint: "move what is named aside (it is not svc's, or it was damaged); svc makes what it needs at start. `svc admin verify-checksums --data-dir` checks what remains",
  });
}

/**
 * A data directory owned by another user is refused even when this process could write to
 * it (root can): files created now would belong to the wrong user and stop the service
 * from starting later.
 */
function checkOwner(dataDir: string): void {
  const uid = process.getuid?.();
  if (uid === undefined || !fs.existsSync(dataDir)) return;
  const st = fs.statSync(dataDir);
  if (st.uid === uid) return;
  const owner = userNameOf(st.uid);
  throw new SvcError("DATA_DIR_WRONG_OWNER", `the data directory ${dataDir} belongs to ${owner} (uid ${st.uid}), but svc runs as uid ${uid}`, {
    hint: `run svc as its owner (e.g. \`sudo -u ${owner} svc serve …\`, as the systemd unit does), or if this process's user is right, \`chown -R ${uid} ${dataDir}\``,
  });
}

function ownerOf(dir: string): string {
  try {
    const st = fs.statSync(dir);
    return ` (owned by uid ${st.uid}, mode ${(st.mode & 0o777).toString(8)}; svc runs as uid ${process.getuid?.() ?? "?"})`;
  } catch {
    return "";
  }
}

export async function loadState(paths: DataPaths, config: Config, logger: Logger): Promise<LoadedState> {
  // The new WAL of a wal-replay killed before it finished: nothing reads it, and it is big.
  for (const { path, pid } of removeReplayLeftovers(paths.raftDir)) {
    logger.warn("recovery: removed the unfinished work of a wal-replay that did not finish", { path, pid });
  }
  for (const path of [paths.dataDir, paths.raftDir].flatMap(removeAtomicWriteLeftovers)) {
    logger.info("recovery: removed a temp file an interrupted write left (the file it was to replace is intact)", { path });
  }
  const savedHardState = readHardState(paths.hardStatePath);
  let hardState = savedHardState ?? initialHardState;
  const snapshots = new SnapshotStore(paths.snapshotsDir);
  snapshots.prune(Number.MAX_SAFE_INTEGER); // only clears temp directories left by a crash
  // The newest image is hashed only when this start needs it: to rebuild or install the store,
  // or to judge damage in the WAL. A node that keeps its store starts without reading the image
  // (a full read of a store-sized file), and checks it in the background once serving.
  const images = new StartImages(snapshots, logger);
  refuseForeignHardState(paths, savedHardState, images.current()?.meta?.clusterId ?? "");
  // Judged before the store is touched: a damaged checkpoint is ignored, and one past all raft/
  // holds refuses a lone node's start before anything is rebuilt (checkpoint-trust.ts).
  const checkpointTrust = judgeCheckpoint(paths, { commit: savedHardState?.commit ?? 0, snapshotIndex: images.current()?.meta?.index ?? 0 }, logger);
  const checkpoint = checkpointTrust.checkpoint;

  const cacheKib = storeCacheKib(config);
  // A lone node with raft/ removed whole: its store is all there is (see unvouchedReason). With a
  // snapshot put back in raft/snapshots/ (SPEC §4.5 step 3), that snapshot is what it restarts
  // from; with its WAL still there, the WAL rebuilds the store.
  const lone = config.cluster.members.length <= 1 && images.current() === null && listSegments(paths.walDir).length === 0;
  // (The store's own membership must say so too: see openOrRebuildStore.)
  const refuseBeforeRebuild = (held: { appliedIndex: number; membership: Membership }): void =>
    refuseUnreachableCheckpoint(paths, checkpointTrust, held, { nodeId: config.nodeId, configuredMembers: config.cluster.members.length });
  const store = await openOrRebuildStore(paths, images, logger, { hardState: savedHardState, checkpoint, cacheKib, lone, refuseBeforeRebuild });
  const applied = store.meta.appliedIndex;
  const walWasEmpty = listSegments(paths.walDir).length === 0;
  logger.info("recovery: replaying the WAL", { dir: paths.walDir, after: applied });
  // Only the entries after what the store holds are read into memory: the WAL is kept back
  // to the newest image, which may lie far behind the store.
  const { wal, entries: walEntries, truncatedBytes, lastRecordTerm } = await openWalAroundDamage(paths, images, logger, () => Wal.open(paths.walDir, {
    segmentSizeBytes: config.wal.segmentSizeBytes,
    logger,
    keepEntriesAfter: applied,
  }), memberOfCluster(config, store));
  if (truncatedBytes > 0) logger.warn("recovery: the WAL ended in a torn write, which was cut", { bytes: truncatedBytes });
  const latest = images.current();

  const snapshotMeta: SnapshotMeta | null = latest?.meta === null || latest === null
    ? null
    : { index: latest.meta.index, term: latest.meta.term, membership: latest.meta.membership };
  const snapshotIndex = snapshotMeta?.index ?? 0;
  // The core's log starts after what the store holds (openOrRebuildStore leaves it at or past
  // the newest image): the store stands in for the log before it.
  const coreBase: SnapshotMeta | null = applied > snapshotIndex
    ? { index: applied, term: store.meta.appliedTerm, membership: store.meta.membership }
    : snapshotMeta;
  const baseIndex = coreBase?.index ?? 0;
  const entries = walEntries.filter((e) => e.index > baseIndex);
  const firstIndex = entries[0]?.index ?? baseIndex + 1;
  const lastIndex = Math.max(wal.lastIndex, entries.at(-1)?.index ?? 0);

  // The log must continue from what the store holds; a gap after it cannot be bridged.
  let needsSnapshotAt: number | null = null;
  if (firstIndex > baseIndex + 1) {
    // Only images past what the store holds could have bridged the gap.
    const couldBridge = images.ignored.filter((i) => (parseSnapshotDirName(basename(i.dir))?.index ?? 0) > baseIndex);
    const damaged = couldBridge.length === 0 ? "" : ` (a snapshot that may have held them could not be used: ${couldBridge.map((i) => `${i.dir}: ${i.reason}`).join("; ")})`;
    // Whether the log's newest configuration (in the WAL after the gap) has voters besides this
    // node: null when the WAL holds none. A member's start decides by it whether to ask the leader.
    const newestConfig = [...walEntries].reverse().find((e) => e.kind === "config");
    const configured = newestConfig === undefined ? null : decodeMembership(newestConfig.data);
    // Closed: a member's start sets this WAL aside and loads again (start.ts).
    wal.close();
    store.close();
    throw new SvcError("LOG_GAP", `the WAL starts at entry ${firstIndex} but the newest snapshot ends at ${snapshotIndex} and the store at ${applied}: entries in between are missing${damaged}`, {
      hint: "restore the missing WAL segments or snapshot. On a member of a multi-node cluster, removing the contents of raft/ and store/ rebuilds it from the leader; " +
        "never on a single-node cluster, where that erases all its data: there run `svc admin wal-repair --skip-corrupted`, which keeps every intact entry and reports what is lost",
      details: {
        walStartsAfterGap: firstIndex, storeAppliedIndex: applied,
        otherVoters: configured === null ? null : configured.voters.filter((v) => v !== config.nodeId).length,
        voters: configured?.voters.length ?? null,
      },
    });
  }
  if (applied > lastIndex) {
    // The WAL was cleared (or lost its tail) while the store kept what it had applied.
    logger.warn("recovery: the store is ahead of the WAL; its state becomes the starting snapshot", { applied, walLastIndex: lastIndex });
    needsSnapshotAt = applied;
  }
  const lostCommitted = lostCommittedEntries(paths, config, store, { hardState: savedHardState, checkpoint, lastIndex, snapshotIndex });
  logger.info("recovery: loaded", {
    snapshotIndex, checkpointIndex: checkpoint?.index ?? 0, walFirstIndex: entries[0]?.index ?? 0, walLastIndex: lastIndex, applied, term: hardState.term, commit: hardState.commit,
  });
  // A hard state behind the log it sits beside is not this log's: copied from another node or
  // cluster. The core would call the WAL damaged and send the operator to a wal-repair that
  // finds nothing; the file is what to fix.
  // Every record of its WAL counts, not only the entries after its store: a store that applied
  // everything (the usual case) leaves none. (Not the store's or a snapshot's own term: a
  // restored node holds a snapshot of terms it never took part in.)
  const heldTerm = Math.max(entries.at(-1)?.term ?? 0, lastRecordTerm ?? 0);
  const heldWhat = `its WAL holds entries of term ${heldTerm} (up to ${wal.lastIndex})`;
  if (savedHardState !== null && heldTerm > savedHardState.term) {
    const ownCluster = readMemberMark(paths.dataDir) ?? (store.meta.clusterId !== "" ? store.meta.clusterId : null);
    const foreign = ownCluster !== null && savedHardState.clusterId !== "" && savedHardState.clusterId !== ownCluster;
    throw new SvcError("RAFT_STATE_INVALID", `${paths.hardStatePath} is not this node's: it says term ${savedHardState.term}, but ${heldWhat}` +
      (foreign ? `, and it belongs to cluster ${savedHardState.clusterId} while this node belongs to ${ownCluster} (a file copied from another cluster)` : " (a file copied from another node, or an old copy)"), {
      hint: foreignHardStateWayOut(paths),
    });
  }
  // Its hard state gone but its log beyond a bootstrap's first entries: the votes it cast are
  // forgotten, and it could vote twice in a term. It must not vote until a leader caught it up.
  // (Decided by the WAL, not by the entries after the store: a store rebuilt from an image that
  // covers the whole WAL leaves none. A WAL of a new cluster's first entries only: a crash in
  // its bootstrap, before the first election, when no vote was cast.)
  const hardStateLost = savedHardState === null && lastIndex > bootstrapEntries;
  if (savedHardState === null && entries.length > 0) {
    // A crash during a cluster's bootstrap, between its first entries and the hard state:
    // no vote was cast yet (the first election comes after), so the term of the log is the
    // term to resume in.
    const term = entries.at(-1)?.term ?? 0;
    logger.warn("recovery: raft/hardstate is missing; resuming in the term of the log", { term });
    hardState = { term, vote: null, commit: 0, clusterId: store.meta.clusterId };
  }
  return {
    paths, hardState, wal, snapshots, store, snapshot: snapshotMeta, coreBase, entries, needsSnapshotAt, walWasEmpty, hadHardState: savedHardState !== null, storeCacheKib: cacheKib,
    imageToCheck: images.wasVerified ? null : latest,
    checkpointIndex: checkpoint !== null && checkpoint.index <= applied ? checkpoint.index : 0,
    lostCommitted,
    hardStateLost,
  };
}

/** What raft/ says of the store: a store it does not vouch for is not this log's, and is rebuilt. */
interface StoreVouchers {
  hardState: StoredHardState | null;
  checkpoint: CheckpointRecord | null;
  /** Not a voucher: the page cache the store opens with. */
  cacheKib: number;
  /** A lone node with no snapshot and no WAL: nothing else holds its data (see unvouchedReason). */
  lone: boolean;
  /** Called before the store is removed or made anew, with what it held: may refuse the start. */
  refuseBeforeRebuild: (held: { appliedIndex: number; membership: Membership }) => void;
}

/**
 * Entries this node had committed past all its WAL, store and images hold. A lone node commits
 * only what its own WAL has synced, so its saved commit index and its checkpoint are a floor on
 * what it must still hold: below it, acknowledged writes are gone (WAL segments lost, or the WAL
 * cut by hand with the store removed), and its start is refused, naming them and the ways out
 * (a loss a wal-repair recorded is known, and the node starts). A cluster member's saved commit
 * may cover entries it had not synced yet (the hard state is written as the term or vote
 * changes, before that Ready's entries), which its leader sends again: not evidence. Its
 * checkpoint is: the store was made durable there, so the entries were in its log. Past it, the
 * lost stretch is returned for its start to hold its vote back; the leader sends the entries.
 */
function lostCommittedEntries(
  paths: DataPaths, config: Config, store: Store,
  held: { hardState: StoredHardState | null; checkpoint: CheckpointRecord | null; lastIndex: number; snapshotIndex: number },
): { committed: number; heldThrough: number } | null {
  // Lone: this node is the one voter there is (a removed member whose membership names only
  // another is not; its saved commit may reach past what it wrote).
  const membership = store.meta.membership;
  const lone = membership.voters.length === 0 ? config.cluster.members.length <= 1 : isOnlyMember(membership, config.nodeId);
  const checkpointed = held.checkpoint?.index ?? 0;
  const committed = lone ? Math.max(held.hardState?.commit ?? 0, checkpointed) : checkpointed;
  const heldThrough = Math.max(held.lastIndex, store.meta.appliedIndex, held.snapshotIndex);
  if (committed <= heldThrough) return null;
  if (!lone) return { committed, heldThrough };
  if (readEntriesLost(paths.raftDir) !== null) return null;
  const missing = heldThrough + 1 === committed ? `entry ${committed}` : `entries ${heldThrough + 1}..${committed}`;
  throw new SvcError("LOG_GAP", `this node had committed entries through ${committed}, but its WAL ends at ${held.lastIndex}, its store at ${store.meta.appliedIndex} and its newest snapshot at ${held.snapshotIndex}: ${missing}, acknowledged writes, are missing (WAL segments were lost, or the WAL was cut with the store removed)`, {
    hint: `put the missing WAL segments back into ${paths.walDir} (a wal-repair keeps the old WAL in raft/wal-corrupt-*), or restore from a backup (SPEC §4.5). ` +
      `To go on without those writes, move ${paths.hardStatePath} and ${join(paths.raftDir, "checkpoint")} aside: the node then starts from what its WAL and store hold`,
    details: { committed, heldThrough },
  });
}

/**
 * Whether other members hold this node's log: the store's membership says so once it holds one
 * (members are added and removed at run time), else the configuration file.
 */
function memberOfCluster(config: Config, store: Store): boolean {
  const { voters, learners } = store.meta.membership;
  return voters.length > 0 ? voters.length + learners.length > 1 : config.cluster.members.length > 1;
}

/** The store's SQLite page cache: its share of max_memory_mb. */
export function storeCacheKib(config: Config): number {
  return Math.max(1024, Math.floor(memoryBudget(config.maxMemoryBytes).storeCacheBytes / 1024));
}

function unvouchedReason(meta: { appliedIndex: number; clusterId: string }, v: StoreVouchers): string | null {
  // A lone node's store is the only copy of its data, and all it holds was committed: with raft/
  // cleared it is kept, and the log starts after it (start.ts), as when only the WAL is gone.
  if (v.hardState === null && meta.appliedIndex > 0 && !v.lone) return "raft/hardstate is missing (raft/ was cleared), so nothing says this store belongs to this node's log";
  const raftCluster = v.hardState?.clusterId ?? "";
  if (raftCluster !== "" && meta.clusterId !== "" && raftCluster !== meta.clusterId) return `the store belongs to cluster ${meta.clusterId}, raft/ to ${raftCluster}`;
  const cp = v.checkpoint;
  if (cp !== null && cp.clusterId === meta.clusterId && meta.appliedIndex < cp.index) return `the store is at index ${meta.appliedIndex}, behind its checkpoint at ${cp.index}: it lost writes that were durable`;
  return null;
}

/**
 * The likeliest way a store goes back in time: a backup's store/ copied over a data directory
 * that still holds the newer history's raft/ (its WAL, hard state, checkpoint and snapshots).
 */
const restoreUndoneHint = "if a backup's store/ was copied over this data directory to restore it, this start undoes that: the newer history's WAL, " +
  "hard state and snapshots are still here and win. To restore, stop the node, empty the data directory, copy the backup's raft/ and store/ " +
  "into it and start (SPEC §4.5); on a cluster of several nodes do so on every node and run svc admin init-cluster --bootstrap on each " +
  "before starting them (an archive made by svc admin backup full needs no such step)";

async function openOrRebuildStore(paths: DataPaths, images: StartImages, logger: Logger, vouchers: StoreVouchers): Promise<Store> {
  if (fs.existsSync(paths.storePath)) {
    try {
      const store = Store.open(paths.storePath, { cacheKib: vouchers.cacheKib, consistentAfterMachineCrash: vouchers.checkpoint !== null });
      if (store.openedInEarlierBoot !== null) {
        logger.warn("recovery: the store was open when the machine went down; it is consistent, and the WAL after what it holds is replayed", {
          applied: store.meta.appliedIndex, checkpointIndex: vouchers.checkpoint?.index ?? 0,
        });
      }
      // A node grown into a cluster at run time may still have a configuration naming only itself.
      const { voters, learners } = store.meta.membership;
      if (vouchers.lone && (voters.length > 1 || learners.length > 0)) vouchers = { ...vouchers, lone: false };
      if (vouchers.lone && vouchers.hardState === null && store.meta.appliedIndex > 0) {
        logger.warn("recovery: raft/ holds no hard state; this lone node keeps its store, the only copy of its data, and its log starts after it", {
          applied: store.meta.appliedIndex, clusterId: store.meta.clusterId,
        });
      }
      const unvouched = unvouchedReason(store.meta, vouchers);
      if (unvouched !== null) {
        const behind = vouchers.checkpoint !== null && store.meta.appliedIndex < vouchers.checkpoint.index;
        logger.warn("recovery: the store is not vouched for by raft/ state; rebuilding it from the snapshot and the WAL", {
          reason: unvouched,
          ...(behind ? { hint: restoreUndoneHint } : {}),
        });
        try {
          vouchers.refuseBeforeRebuild(store.meta);
        } catch (e) {
          store.close();
          throw e;
        }
        store.close({ discard: true });
        Store.remove(paths.storePath);
        return installLatest(paths, await images.verified(), logger, vouchers.cacheKib);
      }
      // Behind the newest image as meta.json says: only then is it hashed (and an older one
      // taken if it is damaged), to decide.
      if (store.meta.appliedIndex >= (images.current()?.meta?.index ?? 0)) return store;
      const snapshotIndex = (await images.verified())?.meta?.index ?? 0;
      if (store.meta.appliedIndex >= snapshotIndex) return store;
      logger.warn("recovery: the store is behind the newest snapshot; installing the snapshot", {
        applied: store.meta.appliedIndex, snapshotIndex, hint: restoreUndoneHint,
      });
      store.close({ discard: true });
    } catch (e) {
      // Only a damaged store is rebuilt: one the disk refuses to write stays as it is.
      if (!isSvcError(e, "STORE_DAMAGED")) throw e;
      if (vouchers.lone) throw loneStoreDamaged(paths, e.message, e);
      vouchers.refuseBeforeRebuild(emptyStore);
      logger.error("recovery: the store is damaged; rebuilding it from the snapshot and the WAL", { error: errorMessage(e) });
    }
    Store.remove(paths.storePath);
  } else {
    // A start before (or systemd's restart) set the damaged store aside and refused: this one
    // too, rather than start empty where nothing else holds the data.
    const aside = setAsideCopies(paths.storePath);
    if (vouchers.lone && aside.length > 0) throw loneStoreDamaged(paths, `the store was set aside as damaged (${aside.at(-1)})`, null);
    vouchers.refuseBeforeRebuild(emptyStore);
    logger.info("recovery: the store is missing; rebuilding it from the snapshot and the WAL");
  }
  return installLatest(paths, await images.verified(), logger, vouchers.cacheKib);
}

/**
 * A lone node's damaged store, with no image and no WAL to rebuild it from: it was the only copy
 * of the data (set aside, kept), and the node does not start empty.
 */
function loneStoreDamaged(paths: DataPaths, what: string, cause: unknown): SvcError {
  return new SvcError("STORE_UNRECOVERABLE", `${what}; this lone node has no snapshot and no WAL to rebuild it from: it was the only copy of the data, and the node does not start empty`, {
    hint: `recover what SQLite can from the copy set aside (sqlite3 <copy>/state.db .recover), or restore a backup (SPEC §4.5); to start empty on purpose, remove the copies (${paths.storeDir}.damaged-*) or the data directory's contents`,
    ...(cause === null ? {} : { cause }),
  });
}

/** What a missing or damaged store holds: nothing (its membership then comes from the configuration). */
const emptyStore = { appliedIndex: 0, membership: { voters: [], learners: [] } };

/** A store made from the newest image (empty without one); the WAL replays on top. */
function installLatest(paths: DataPaths, latest: SnapshotEntry | null, logger: Logger, cacheKib: number): Store {
  if (latest !== null) {
    logger.info("recovery: installing snapshot into the store", { dir: latest.dir, index: latest.meta?.index ?? latest.index });
    Store.installImage(join(latest.dir, snapshotStateFile), paths.storePath);
  }
  return Store.open(paths.storePath, { cacheKib });
}

/** Whether this data directory holds no Raft state at all (a node that never joined). */
export function isPristine(state: Pick<LoadedState, "hardState" | "snapshot" | "entries" | "store">): boolean {
  return state.hardState.term === 0 && state.snapshot === null && state.entries.length === 0 && state.store.meta.appliedIndex === 0;
}

export function toHardState(s: StoredHardState): HardState {
  return { term: s.term, vote: s.vote, commit: s.commit };
}
