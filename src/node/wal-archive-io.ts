// The production side of WAL archiving: committed entries read back out of raft/wal/, the
// segment written under raft/archive-staging/<name>, and wal.archive_command run on it
// through /bin/sh with PostgreSQL's substitutions (%p the file's path, %f its name, %% a
// percent sign). Exit status 0 means archived; the staged file is then removed.

import * as fs from "node:fs";
import { readLogStart } from "../storage/restore-marker.ts";
import { join } from "node:path";
import type { Subprocess } from "bun";
import type { Entry } from "../raft/index.ts";
import { archiveSegmentName, encodeArchiveSegment, ensureDir, readWalRange, type DataPaths, type Wal } from "../storage/index.ts";
import type { ArchiveAttempt, WalArchiveIo } from "./wal-archive-types.ts";

/** The stderr kept from one run of the command (its tail). */
const stderrBytesMax = 4096;

/**
 * How long one run of the command may take. A run that hangs (a mount gone, an upload that
 * stalls) would hold archiving, and every WAL segment after the mark, with no failure to show:
 * past this it is killed, with whatever it started, and counts as a failure that is retried.
 * 64 MiB in 15 minutes is 75 KB/s.
 */
export const archiveRunMsMax = 15 * 60_000;

export function archiveStagingDir(paths: DataPaths): string {
  return join(paths.raftDir, "archive-staging");
}

/** The command line for one file: %p its path, %f its name, %% a percent sign. */
export function archiveCommandFor(command: string, path: string, name: string): string {
  return command.replace(/%[pf%]/g, (m) => (m === "%p" ? path : m === "%f" ? name : "%"));
}

/**
 * A text with the values of secret-looking environment variables (names holding KEY,
 * SECRET, TOKEN or PASSWORD) cut out: a command's stderr may echo its credentials.
 */
export function redactEnvSecrets(text: string, env: Readonly<Record<string, string | undefined>> = process.env): string {
  let out = text;
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined || value.length < 4 || !/KEY|SECRET|TOKEN|PASSWORD/i.test(name)) continue;
    out = out.split(value).join(`[${name} redacted]`);
  }
  return out;
}

export function fileWalArchiveIo(command: string, paths: DataPaths, wal: Wal, runMsMax = archiveRunMsMax): WalArchiveIo {
  const staging = archiveStagingDir(paths);
  ensureDir(staging);
  // Whatever a crash left staged is made again from the WAL when its turn comes.
  for (const name of fs.readdirSync(staging)) fs.rmSync(join(staging, name), { force: true });
  let running: Subprocess | null = null;
  return {
    readRange: (from, to, bytesMax) => readWalRange(paths.walDir, from, to, bytesMax, wal.finalFrom()?.seq ?? null),
    async archive(entries: readonly Entry[], clusterId: string): Promise<ArchiveAttempt> {
      const first = entries[0];
      const last = entries.at(-1);
      if (first === undefined || last === undefined) throw new Error("an archived segment holds at least one entry");
      const name = archiveSegmentName({ firstIndex: first.index, lastIndex: last.index, term: last.term });
      const path = join(staging, name);
      await Bun.write(path, encodeArchiveSegment(entries, clusterId));
      // A process group of its own: what the shell starts is stopped with it.
      const proc = Bun.spawn(["/bin/sh", "-c", archiveCommandFor(command, path, name)], {
        cwd: paths.dataDir, stdin: "ignore", stdout: "ignore", stderr: "pipe", detached: true,
      });
      running = proc;
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        killGroup(proc, "SIGKILL");
      }, runMsMax);
      try {
        const stderr = await tailOf(proc.stderr);
        const exitCode = await proc.exited;
        if (timedOut) return { ok: false, name, exitCode: null, stderr: redactEnvSecrets(stderr.trim()), timedOutAfterMs: runMsMax };
        if (exitCode === 0) return { ok: true, name };
        return { ok: false, name, exitCode: proc.signalCode === null ? exitCode : null, stderr: redactEnvSecrets(stderr.trim()) };
      } finally {
        clearTimeout(timer);
        running = null;
        fs.rmSync(path, { force: true });
      }
    },
    logStartedOverAt: () => readLogStart(paths.raftDir)?.index ?? null,
    segmentsAfter: (index) => wal.segments().filter((s) => s.maxIndex > index).length,
    close(): void {
      if (running !== null) killGroup(running, "SIGTERM");
    },
  };
}

function killGroup(proc: Subprocess, signal: NodeJS.Signals): void {
  try {
    process.kill(-proc.pid, signal);
  } catch {
    proc.kill(signal); // the group is gone: the shell alone, if it is not
  }
}

async function tailOf(stream: ReadableStream<Uint8Array>): Promise<string> {
  let kept = new Uint8Array(0);
  for await (const chunk of stream) {
    const joined = new Uint8Array(kept.length + chunk.length);
    joined.set(kept, 0);
    joined.set(chunk, kept.length);
    kept = joined.length > stderrBytesMax ? joined.slice(joined.length - stderrBytesMax) : joined;
  }
  return new TextDecoder().decode(kept);
}
