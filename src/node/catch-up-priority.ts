// A follower far behind its leader applies entries as fast as its CPU allows: on a host it
// shares with other members (or with anything that answers clients), that work competes with
// the leader's, and the leader's write latency pays for it. So while a follower or learner is
// more than `lowerBehindEntries` entries behind what the leader committed, its main thread
// (the one that receives, logs and applies entries) runs at nice `catchUpNice`; once within
// `restoreWithinEntries` of it, or as soon as it is anything but a follower, it runs at its
// usual priority again. Only the main thread is lowered (on Linux a nice value is a thread's),
// but a thread or process started meanwhile takes its creator's: when the main thread goes
// back, so does every thread of the node, and of its child processes (the SQL processes), left
// at the lowered value. On an idle host a lower priority costs nothing.
//
// Going back to the usual priority needs the right to raise one: CAP_SYS_NICE, or an
// RLIMIT_NICE of 20 or more (the unit install.sh writes sets LimitNICE=20). Without it the
// node never lowers its priority (it could not undo it) and says so once.

import { readdirSync, readFileSync } from "node:fs";
import * as os from "node:os";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/logger.ts";

export const catchUpNice = 10;
/** Entries behind the leader's commit index past which a follower lowers its priority. */
export const lowerBehindEntries = 10_000;
/** Entries behind within which it takes its usual priority back. */
export const restoreWithinEntries = 1_000;

/** How the node sets its main thread's nice value (production: the OS; the simulator: nothing). */
export interface ThreadPriority {
  /** The nice value the thread started at (its usual priority). */
  readonly usual: number;
  /** Whether the thread may go back to `usual` after a lower priority; null: it may, or the reason it may not. */
  readonly cannotRestore: string | null;
  /** Set the main thread's nice value. */
  set(nice: number): void;
  /**
   * Put back to `usual` every other thread of this process and of its child processes that
   * runs at `lowered` (started while the main thread ran at it). Returns how many it changed;
   * throws when one could not be changed (the others are changed all the same).
   */
  restoreInherited(lowered: number): number;
}

export class CatchUpPriority {
  private lowered = false;
  private closed = false;
  private toldCannot = false;
  /** A failure to lower or restore is logged once, not at every apply. */
  private toldFailure = false;

  constructor(private readonly thread: ThreadPriority, private readonly logger: Logger) {}

  /** The nice value the main thread runs at now. */
  get nice(): number {
    return this.lowered ? catchUpNice : this.thread.usual;
  }

  /**
   * After entries were applied, and at every tick: `behind` is leader commit − applied;
   * `following` is asked only when the answer matters (not on every apply of a leader).
   */
  update(following: () => boolean, behind: number): void {
    if (this.closed) return;
    if (!this.lowered && behind > lowerBehindEntries && following()) this.lower(behind);
    else if (this.lowered && (behind < restoreWithinEntries || !following())) this.restore();
  }

  /** The node stops: its thread goes back to its usual priority (an embedding process keeps running). */
  close(): void {
    this.closed = true;
    if (this.lowered) this.restore();
  }

  private lower(behind: number): void {
    if (this.thread.cannotRestore !== null) {
      if (!this.toldCannot) {
        this.toldCannot = true;
        this.logger.info("catching up at the usual CPU priority: a lower one could not be undone", { reason: this.thread.cannotRestore, entries_behind: behind });
      }
      return;
    }
    if (this.thread.usual >= catchUpNice) return;
    try {
      this.thread.set(catchUpNice);
    } catch (e) {
      if (!this.toldFailure) this.logger.warn("could not lower the CPU priority while catching up; catching up at the usual one", { error: errorMessage(e) });
      this.toldFailure = true;
      return;
    }
    this.lowered = true;
    this.logger.info("catching up at a lower CPU priority, so that a leader sharing this host keeps its latency", { nice: catchUpNice, entries_behind: behind });
  }

  private restore(): void {
    try {
      this.thread.set(this.thread.usual);
    } catch (e) {
      // Left lowered: the next update tries again.
      if (!this.toldFailure) {
        this.logger.error("could not take the usual CPU priority back after catching up; the node goes on at a lower one until it can", {
          nice: catchUpNice, error: errorMessage(e), hint: "run the node with CAP_SYS_NICE or LimitNICE=20 (install.sh's unit sets it)",
        });
      }
      this.toldFailure = true;
      return;
    }
    this.lowered = false;
    this.toldFailure = false;
    let others = 0;
    try {
      others = this.thread.restoreInherited(catchUpNice);
    } catch (e) {
      this.logger.warn("could not take the usual CPU priority back for every thread started while catching up", { error: errorMessage(e) });
    }
    this.logger.info("caught up: back at the usual CPU priority", { nice: this.thread.usual, threads_started_meanwhile: others });
  }
}

/** The calling thread's priority through setpriority(2) (on Linux, os.setPriority(n) changes the calling thread only). */
export function osThreadPriority(): ThreadPriority {
  const usual = os.getPriority();
  return {
    usual,
    cannotRestore: whyCannotRaise(usual),
    set: (nice) => os.setPriority(nice),
    restoreInherited: (lowered) => restoreThreadsAt(lowered, usual),
  };
}

/** The threads of this process other than the main one, and those of its child processes, at `lowered`: set to `usual`. */
function restoreThreadsAt(lowered: number, usual: number): number {
  const tids: number[] = [];
  const ownTasks = tasksOf("self").filter((tid) => tid !== process.pid);
  tids.push(...ownTasks);
  for (const tid of [process.pid, ...ownTasks]) {
    for (const child of readOr(`/proc/self/task/${tid}/children`).split(" ").filter((s) => s !== "")) tids.push(...tasksOf(child));
  }
  let changed = 0;
  let failure: unknown = null;
  for (const tid of tids) {
    const nice = niceOf(tid);
    if (nice !== lowered) continue;
    try {
      os.setPriority(tid, usual);
      changed++;
    } catch (e) {
      // A thread that ended meanwhile is no failure.
      if (niceOf(tid) !== null) failure ??= e;
    }
  }
  if (failure !== null) throw failure;
  return changed;
}

function tasksOf(pid: string): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).map(Number).filter((n) => Number.isInteger(n) && n > 0);
  } catch {
    return [];
  }
}

/** A thread's nice value (/proc/<tid>/stat field 19); null when it is gone. */
function niceOf(tid: number): number | null {
  const stat = readOr(`/proc/${tid}/stat`);
  if (stat === "") return null;
  const nice = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]);
  return Number.isInteger(nice) ? nice : null;
}

function readOr(path: string): string {
  try {
    return readFileSync(path, "utf8").trim();
  } catch {
    return "";
  }
}

/** null when this process may raise its nice value back to `usual`; else why not. */
function whyCannotRaise(usual: number): string | null {
  if (process.platform !== "linux") return `setpriority on ${process.platform} changes the whole process`;
  let status: string;
  let limits: string;
  try {
    status = readFileSync("/proc/self/status", "utf8");
    limits = readFileSync("/proc/self/limits", "utf8");
  } catch (e) {
    return `cannot read /proc/self: ${errorMessage(e)}`;
  }
  const capEff = /^CapEff:\s*([0-9a-f]+)/m.exec(status)?.[1];
  const capSysNice = 1n << 23n;
  if (capEff !== undefined && (BigInt(`0x${capEff}`) & capSysNice) !== 0n) return null;
  const soft = /^Max nice priority\s+(\S+)/m.exec(limits)?.[1];
  if (soft === "unlimited") return null;
  if (soft !== undefined && 20 - Number(soft) <= usual) return null;
  return `no CAP_SYS_NICE and RLIMIT_NICE is ${soft ?? "unknown"} (raising the nice value back to ${usual} needs ${20 - usual})`;
}
