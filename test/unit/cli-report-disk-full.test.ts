// An offline command (init-cluster, wal-repair, wal-replay) stopped by a full disk: what the
// operator reads says what ran out and what to do, not the storage layer's bare message.

import { afterEach, expect, spyOn, test } from "bun:test";
import { reportError } from "../../src/cli/_exit.ts";
import { DiskFullError } from "../../src/io/index.ts";

let spy: ReturnType<typeof spyOn<typeof process.stderr, "write">> | null = null;
afterEach(() => {
  spy?.mockRestore();
  spy = null;
});

function printed(e: unknown): { text: string; exitCode: number } {
  let text = "";
  spy = spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
    text += typeof chunk === "string" ? chunk : new TextDecoder().decode(chunk);
    return true;
  });
  const exitCode = reportError(e);
  spy.mockRestore();
  spy = null;
  return { text, exitCode };
}

test("a full disk that stopped a command is reported with the file system to free and running the command again (exit 1)", () => {
  const e = new DiskFullError("no space for a new WAL segment of 64 MiB (wal.segment_size_mb = 64) in /var/lib/svc/raft/wal: 8310784 bytes free", "/var/lib/svc/raft/wal", 8310784);
  const { text, exitCode } = printed(e);
  expect(exitCode).toBe(1);
  expect(text).toBe("svc: no space for a new WAL segment of 64 MiB (wal.segment_size_mb = 64) in /var/lib/svc/raft/wal: 8310784 bytes free\n" +
    "  → free space on the file system holding /var/lib/svc/raft/wal (df -h /var/lib/svc/raft/wal), then run the command again\n");
});

test("ENOSPC from the system, with no path of ours, still says to free space", () => {
  const e = Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
  expect(printed(e).text).toBe("svc: ENOSPC: no space left on device, write\n  → free space on the file system it was writing to, then run the command again\n");
});
