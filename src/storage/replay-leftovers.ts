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

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: it runs, as another user.
    return (e as NodeJS.ErrnoException).code !== "ESRCH";
  }
}
