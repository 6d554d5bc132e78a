// raft/wal.replay-<pid>/: where a wal-replay writes the new WAL before moving it in. A replay
// killed before it finished leaves it behind (segments of megabytes). Whoever holds the data
// directory's lock next removes those of processes no longer running.

import * as fs from "node:fs";
import { join } from "node:path";

const replayDirPattern = /^wal\.replay-(\d+)$/;

/** Remove the replay directories of dead processes in `raftDir`; returns those removed. */
export function removeReplayLeftovers(raftDir: string): { path: string; pid: number }[] {
  let names: string[];
  try {
    names = fs.readdirSync(raftDir);
  } catch {
    return [];
  }
  const removed: { path: string; pid: number }[] = [];
  for (const name of names) {
    const pid = Number(replayDirPattern.exec(name)?.[1] ?? Number.NaN);
    if (!Number.isSafeInteger(pid) || pid === process.pid || processAlive(pid)) continue;
    const path = join(raftDir, name);
    fs.rmSync(path, { recursive: true, force: true });
    removed.push({ path, pid });
  }
  return removed;
}

/** What writeFileAtomic writes before its rename: `<name>.tmp-<pid>`. */
const atomicTempPattern = /^.+\.tmp-(\d+)$/;

/**
 * Remove the temp files of atomic writes (hard state, checkpoint, marks) that processes no
 * longer running left in `dir` when killed between the write and the rename; returns them.
 * The file they were to replace is intact: it was never renamed over.
 */
export function removeAtomicWriteLeftovers(dir: string): string[] {
  return removeFilesOfDeadProcesses(dir, atomicTempPattern);
}

/**
 * Remove the files in `dir` whose names match `pattern`, its first group the pid of the process
 * that wrote them, when that process no longer runs (and, with `minAgeMs`, the file was last
 * changed at least that long ago); returns them.
 */
export function removeFilesOfDeadProcesses(dir: string, pattern: RegExp, minAgeMs = 0): string[] {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    const pid = Number(pattern.exec(name)?.[1] ?? Number.NaN);
    if (!Number.isSafeInteger(pid) || pid === process.pid || processAlive(pid)) continue;
    const path = join(dir, name);
    const st = fs.statSync(path, { throwIfNoEntry: false });
    if (st === undefined || !st.isFile() || Date.now() - st.mtimeMs < minAgeMs) continue;
    fs.rmSync(path, { force: true });
    removed.push(path);
  }
  return removed;
}

/** Whether a process with this pid runs (as any user). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: it runs, as another user.
    return (e as NodeJS.ErrnoException).code !== "ESRCH";
  }
}
