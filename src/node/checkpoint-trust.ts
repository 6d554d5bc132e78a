// Whether raft/checkpoint may vouch for the store at start. The checkpoint says the store was
// made durable up to an index; every entry up to it was in the WAL (synced before it was
// applied) and, after a clean stop, is under raft/hardstate's commit too. A checkpoint that
// fails its CRC is ignored with a warning: the WAL and the hard state still vouch. One that
// reaches past everything raft/ holds (hard state, WAL, newest image) is either damaged or the
// only witness of lost writes; on a lone node that is a refusal, made before the store is
// touched, naming the file and both ways out.

import type { CheckpointRecord } from "../io/index.ts";
import type { Membership } from "../raft/types.ts";
import { checkpointPath, inspectCheckpoint, listSegments, readEntriesLost, readSegment, type DataPaths } from "../storage/index.ts";
import { SvcError } from "../util/errors.ts";
import type { Logger } from "../util/logger.ts";
import { isOnlyMember } from "../util/log-data.ts";

export interface CheckpointTrust {
  /** The checkpoint to go by; null when there is none or it is damaged. */
  checkpoint: CheckpointRecord | null;
  /** Its CRC matched (false for one an older version wrote, which has none). */
  checksummed: boolean;
  /** Set when the checkpoint lies past all raft/ holds: what each of them reaches. */
  beyondRaft: RaftReach | null;
}

export interface RaftReach {
  commit: number;
  walLastIndex: number;
  snapshotIndex: number;
}

/** Judge raft/checkpoint against raft/hardstate, the newest image and (only when needed) the WAL's last entry. */
export function judgeCheckpoint(paths: DataPaths, held: { commit: number; snapshotIndex: number }, logger: Logger): CheckpointTrust {
  const read = inspectCheckpoint(paths.raftDir);
  if (read.kind === "none") return { checkpoint: null, checksummed: false, beyondRaft: null };
  if (read.kind === "damaged") {
    logger.warn("recovery: raft/checkpoint is damaged and is ignored; the WAL and raft/hardstate vouch for the store (the next checkpoint rewrites it)", {
      path: checkpointPath(paths.raftDir), reason: read.reason,
    });
    return { checkpoint: null, checksummed: false, beyondRaft: null };
  }
  const { checkpoint, checksummed } = read;
  // The usual case: the hard state or the newest image reaches it, and the WAL is not read.
  if (checkpoint.index <= Math.max(held.commit, held.snapshotIndex)) return { checkpoint, checksummed, beyondRaft: null };
  const walLastIndex = walLastIndexOf(paths.walDir);
  if (checkpoint.index <= walLastIndex) return { checkpoint, checksummed, beyondRaft: null };
  return { checkpoint, checksummed, beyondRaft: { commit: held.commit, walLastIndex, snapshotIndex: held.snapshotIndex } };
}

/** The last entry's index in the WAL on disk (0 when empty); unreadable counts as reaching everywhere. */
function walLastIndexOf(walDir: string): number {
  try {
    const segments = listSegments(walDir);
    for (let i = segments.length - 1; i >= 0; i--) {
      const last = readSegment(segments[i]!.path).entries.at(-1)?.index;
      if (last !== undefined) return last;
    }
    return 0;
  } catch {
    // Judged later by the WAL's own recovery; the checkpoint is not called wrong on that ground.
    return Number.MAX_SAFE_INTEGER;
  }
}

/**
 * Before a store is removed, rebuilt or made: a lone node whose checkpoint lies past all that
 * raft/ and the store hold would refuse after the rebuild anyway (load.ts
 * refuseLostCommittedEntries), so it refuses now, with the data directory as it found it.
 */
export function refuseUnreachableCheckpoint(
  paths: DataPaths, trust: CheckpointTrust, store: { appliedIndex: number; membership: Membership }, node: { nodeId: string; configuredMembers: number },
): void {
  const cp = trust.checkpoint;
  const reach = trust.beyondRaft;
  if (cp === null || reach === null || store.appliedIndex >= cp.index) return;
  const lone = store.membership.voters.length === 0 ? node.configuredMembers <= 1 : isOnlyMember(store.membership, node.nodeId);
  if (!lone || readEntriesLost(paths.raftDir) !== null) return;
  const heldThrough = Math.max(reach.commit, reach.walLastIndex, reach.snapshotIndex, store.appliedIndex);
  const path = checkpointPath(paths.raftDir);
  const damaged = trust.checksummed
    ? "its CRC matches, so it is likely right"
    : "it carries no checksum (an older version wrote it), so a changed digit cannot be told from the truth";
  throw new SvcError("LOG_GAP",
    `${path} says the store was durable up to entry ${cp.index}, but nothing else in this data directory reaches past ${heldThrough} ` +
      `(raft/hardstate commits ${reach.commit}, the WAL ends at ${reach.walLastIndex}, the newest snapshot is at ${reach.snapshotIndex}, the store at ${store.appliedIndex}): ` +
      `either that file is damaged (${damaged}), or entries ${heldThrough + 1}..${cp.index}, acknowledged writes, were lost with the WAL's tail and the store. Nothing was changed`,
    {
      hint: `if no WAL segment was removed and store/ was not replaced (\`svc admin verify-checksums --offline\` passes), the checkpoint is wrong: move it aside ` +
        `(\`mv ${path} ${path}.bad\`) and start; the WAL and raft/hardstate vouch for the store. Otherwise put the missing WAL segments back into ${paths.walDir}, or restore from a backup (SPEC §4.5)`,
      details: { checkpointIndex: cp.index, heldThrough },
    });
}
