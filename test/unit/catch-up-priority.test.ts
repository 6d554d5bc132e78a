// A follower far behind catches up at a lower CPU priority and takes its usual one back once
// caught up, or as soon as it stops following; one that could not undo it never lowers it.

import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import * as os from "node:os";
import { CatchUpPriority, catchUpNice, lowerBehindEntries, osThreadPriority, restoreWithinEntries, type ThreadPriority } from "../../src/node/catch-up-priority.ts";
import { silentLogger, type Logger } from "../../src/util/index.ts";

function fakeThread(cannotRestore: string | null = null): ThreadPriority & { calls: number[]; failNext: boolean } {
  const t = {
    usual: 0,
    cannotRestore,
    calls: [] as number[],
    failNext: false,
    set(nice: number) {
      if (t.failNext) {
        t.failNext = false;
        throw new Error("EACCES: permission denied");
      }
      t.calls.push(nice);
    },
  };
  return t;
}

function recordingLogger(): Logger & { lines: string[] } {
  const lines: string[] = [];
  const at = (level: string) => (message: string) => lines.push(`${level} ${message}`);
  return { ...silentLogger, lines, info: at("info"), warn: at("warn"), error: at("error"), child: () => recordingLogger() } as Logger & { lines: string[] };
}

describe("catch-up priority", () => {
  test("lowers past the threshold, keeps it in between, restores within the restore distance", () => {
    const thread = fakeThread();
    const p = new CatchUpPriority(thread, silentLogger);
    p.update(true, lowerBehindEntries);
    expect(thread.calls).toEqual([]);
    p.update(true, lowerBehindEntries + 1);
    expect(thread.calls).toEqual([catchUpNice]);
    expect(p.nice).toBe(catchUpNice);
    p.update(true, restoreWithinEntries + 1); // still catching up: no change either way
    p.update(true, lowerBehindEntries + 5_000);
    expect(thread.calls).toEqual([catchUpNice]);
    p.update(true, restoreWithinEntries - 1);
    expect(thread.calls).toEqual([catchUpNice, 0]);
    expect(p.nice).toBe(0);
  });

  test("a node that stops following (candidate, leader) takes its usual priority back at once", () => {
    const thread = fakeThread();
    const p = new CatchUpPriority(thread, silentLogger);
    p.update(true, 50_000);
    p.update(false, 50_000);
    expect(thread.calls).toEqual([catchUpNice, 0]);
    p.update(false, 50_000); // not following: never lowered
    expect(thread.calls).toEqual([catchUpNice, 0]);
  });

  test("close restores a lowered priority", () => {
    const thread = fakeThread();
    const p = new CatchUpPriority(thread, silentLogger);
    p.update(true, 50_000);
    p.close();
    expect(thread.calls).toEqual([catchUpNice, 0]);
  });

  test("without the right to raise it back, the priority is never lowered, and the log says why once", () => {
    const thread = fakeThread("no CAP_SYS_NICE and RLIMIT_NICE is 0");
    const logger = recordingLogger();
    const p = new CatchUpPriority(thread, logger);
    p.update(true, 50_000);
    p.update(true, 60_000);
    expect(thread.calls).toEqual([]);
    expect(logger.lines.filter((l) => l.includes("usual CPU priority"))).toHaveLength(1);
  });

  test("a restore that fails is logged as an error and tried again on the next update", () => {
    const thread = fakeThread();
    const logger = recordingLogger();
    const p = new CatchUpPriority(thread, logger);
    p.update(true, 50_000);
    thread.failNext = true;
    p.update(true, 0);
    expect(p.nice).toBe(catchUpNice);
    expect(logger.lines.some((l) => l.startsWith("error ") && l.includes("usual CPU priority back"))).toBe(true);
    p.update(true, 0);
    expect(thread.calls).toEqual([catchUpNice, 0]);
    expect(p.nice).toBe(0);
  });

  test("the OS layer changes the calling thread's nice value and can take it back", () => {
    const thread = osThreadPriority();
    const niceOfMainThread = (): number => {
      const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, "utf8");
      return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]);
    };
    expect(thread.usual).toBe(os.getPriority());
    if (thread.cannotRestore !== null) {
      // Not privileged here: the node would catch up at its usual priority (the case above).
      console.log(`catch-up priority: ${thread.cannotRestore}`);
      return;
    }
    const p = new CatchUpPriority(thread, silentLogger);
    try {
      p.update(true, 50_000);
      expect(niceOfMainThread()).toBe(Math.max(thread.usual, catchUpNice));
    } finally {
      p.close();
    }
    expect(niceOfMainThread()).toBe(thread.usual);
  });
});
