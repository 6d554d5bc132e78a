// A follower far behind catches up at a lower CPU priority and takes its usual one back once
// caught up, or as soon as it stops following; one that could not undo it never lowers it.

import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import * as os from "node:os";
import { CatchUpPriority, catchUpNice, lowerBehindEntries, osThreadPriority, restoreWithinEntries, type ThreadPriority } from "../../src/node/catch-up-priority.ts";
import { silentLogger, type Logger } from "../../src/util/index.ts";

function fakeThread(cannotRestore: string | null = null): ThreadPriority & { calls: number[]; inherited: number[]; failNext: number } {
  const t = {
    usual: 0,
    cannotRestore,
    calls: [] as number[],
    inherited: [] as number[],
    /** How many of the next set() calls fail. */
    failNext: 0,
    set(nice: number) {
      if (t.failNext > 0) {
        t.failNext--;
        throw new Error("EACCES: permission denied");
      }
      t.calls.push(nice);
    },
    restoreInherited(lowered: number) {
      t.inherited.push(lowered);
      return 0;
    },
  };
  return t;
}

/** A thread's nice value: field 19 of /proc/<tid>/stat. */
function niceOf(tid: number): number {
  const stat = readFileSync(`/proc/${tid}/stat`, "utf8");
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]);
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
    p.update(() => true, lowerBehindEntries);
    expect(thread.calls).toEqual([]);
    p.update(() => true, lowerBehindEntries + 1);
    expect(thread.calls).toEqual([catchUpNice]);
    expect(p.nice).toBe(catchUpNice);
    p.update(() => true, restoreWithinEntries + 1); // still catching up: no change either way
    p.update(() => true, lowerBehindEntries + 5_000);
    expect(thread.calls).toEqual([catchUpNice]);
    p.update(() => true, restoreWithinEntries - 1);
    expect(thread.calls).toEqual([catchUpNice, 0]);
    expect(p.nice).toBe(0);
  });

  test("a node that stops following (candidate, leader) takes its usual priority back at once", () => {
    const thread = fakeThread();
    const p = new CatchUpPriority(thread, silentLogger);
    p.update(() => true, 50_000);
    p.update(() => false, 50_000);
    expect(thread.calls).toEqual([catchUpNice, 0]);
    p.update(() => false, 50_000); // not following: never lowered
    expect(thread.calls).toEqual([catchUpNice, 0]);
  });

  test("close restores a lowered priority, and nothing lowers it again after", () => {
    const thread = fakeThread();
    const p = new CatchUpPriority(thread, silentLogger);
    p.update(() => true, 50_000);
    p.close();
    expect(thread.calls).toEqual([catchUpNice, 0]);
    // A sync that completes while the node stops still applies: the node stays at its usual priority.
    p.update(() => true, 50_000);
    expect(thread.calls).toEqual([catchUpNice, 0]);
  });

  test("going back also puts back the threads and processes started while lowered", () => {
    const thread = fakeThread();
    const p = new CatchUpPriority(thread, silentLogger);
    p.update(() => true, 50_000);
    expect(thread.inherited).toEqual([]);
    p.update(() => true, 0);
    expect(thread.inherited).toEqual([catchUpNice]);
  });

  test("without the right to raise it back, the priority is never lowered, and the log says why once", () => {
    const thread = fakeThread("no CAP_SYS_NICE and RLIMIT_NICE is 0");
    const logger = recordingLogger();
    const p = new CatchUpPriority(thread, logger);
    p.update(() => true, 50_000);
    p.update(() => true, 60_000);
    expect(thread.calls).toEqual([]);
    expect(logger.lines.filter((l) => l.includes("usual CPU priority"))).toHaveLength(1);
  });

  test("a restore that fails is logged as an error once and tried again on each update", () => {
    const thread = fakeThread();
    const logger = recordingLogger();
    const p = new CatchUpPriority(thread, logger);
    p.update(() => true, 50_000);
    thread.failNext = 3;
    for (let i = 0; i < 3; i++) p.update(() => true, 0);
    expect(p.nice).toBe(catchUpNice);
    expect(logger.lines.filter((l) => l.startsWith("error ") && l.includes("usual CPU priority back"))).toHaveLength(1);
    p.update(() => true, 0);
    expect(thread.calls).toEqual([catchUpNice, 0]);
    expect(p.nice).toBe(0);
  });

  test("a priority that cannot be lowered is logged once; the node catches up at its usual one", () => {
    const thread = fakeThread();
    const logger = recordingLogger();
    const p = new CatchUpPriority(thread, logger);
    thread.failNext = 3;
    for (let i = 0; i < 3; i++) p.update(() => true, 50_000);
    expect(p.nice).toBe(0);
    expect(logger.lines.filter((l) => l.startsWith("warn ") && l.includes("could not lower"))).toHaveLength(1);
  });

  test("the OS layer changes the calling thread's nice value and can take it back", () => {
    const thread = osThreadPriority();
    const niceOfMainThread = (): number => niceOf(process.pid);
    expect(thread.usual).toBe(os.getPriority());
    if (thread.cannotRestore !== null) {
      // Not privileged here: the node would catch up at its usual priority (the case above).
      console.log(`catch-up priority: ${thread.cannotRestore}`);
      return;
    }
    const p = new CatchUpPriority(thread, silentLogger);
    try {
      p.update(() => true, 50_000);
      expect(niceOfMainThread()).toBe(Math.max(thread.usual, catchUpNice));
    } finally {
      p.close();
    }
    expect(niceOfMainThread()).toBe(thread.usual);
  });

  test("threads and child processes started while lowered go back with the main thread", async () => {
    const thread = osThreadPriority();
    if (thread.cannotRestore !== null || thread.usual >= catchUpNice) return; // not privileged here: nothing is ever lowered
    const tasks = (): number[] => readdirSync("/proc/self/task").map(Number);
    const before = new Set(tasks());
    const p = new CatchUpPriority(thread, silentLogger);
    const worker = new Worker(URL.createObjectURL(new Blob(["setInterval(() => {}, 1000)"], { type: "application/javascript" })));
    const child = Bun.spawn(["sleep", "30"]);
    try {
      p.update(() => true, 50_000);
      // Started while the main thread is lowered: they take its nice value.
      const worker2 = new Worker(URL.createObjectURL(new Blob(["setInterval(() => {}, 1000)"], { type: "application/javascript" })));
      const child2 = Bun.spawn(["sleep", "30"]);
      try {
        const deadline = Date.now() + 10_000;
        let started: number[] = [];
        while (Date.now() < deadline) {
          started = tasks().filter((t) => !before.has(t) && niceOf(t) === catchUpNice);
          if (started.length > 0) break;
          await Bun.sleep(20);
        }
        expect(started.length).toBeGreaterThan(0);
        expect(niceOf(child2.pid)).toBe(catchUpNice);
        expect(niceOf(child.pid)).toBe(thread.usual);
        p.update(() => true, 0);
        for (const t of started) expect(niceOf(t)).toBe(thread.usual);
        expect(niceOf(child2.pid)).toBe(thread.usual);
        expect(niceOf(process.pid)).toBe(thread.usual);
      } finally {
        worker2.terminate();
        child2.kill();
      }
    } finally {
      p.close();
      worker.terminate();
      child.kill();
    }
  });
});
