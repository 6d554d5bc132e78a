// sd_notify through libsystemd: a no-op outside systemd; delivered to NOTIFY_SOCKET inside it.
// The last test drives the release binary, whose node must notify readiness for Type=notify.

import { describe, expect, setDefaultTimeout, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { sdNotify } from "../../src/io/sdnotify.ts";
import { NotifySocket } from "./_notify.ts";
import { releaseBinary, removeRoot, run } from "./_helpers.ts";

// Each test runs install.sh or the binary, some build it first; a loaded machine is slow.
setDefaultTimeout(120_000);

const SDNOTIFY = resolve(import.meta.dir, "../../src/io/sdnotify.ts");

/** sdNotify(state) in a fresh process, so that NOTIFY_SOCKET is in its environment from the start. */
function notifyFromChild(state: string, notifySocket: string): string {
  const code = `import { sdNotify } from ${JSON.stringify(SDNOTIFY)}; process.stdout.write(String(sdNotify(${JSON.stringify(state)})));`;
  return run([process.execPath, "-e", code], { env: { NOTIFY_SOCKET: notifySocket } }).stdout;
}

describe("sdNotify", () => {
  test("is a no-op returning false when NOTIFY_SOCKET is unset", () => {
    const saved = process.env.NOTIFY_SOCKET;
    delete process.env.NOTIFY_SOCKET;
    try {
      expect(sdNotify("READY=1")).toBe(false);
    } finally {
      if (saved !== undefined) process.env.NOTIFY_SOCKET = saved;
    }
  });

  test("delivers the state lines to the socket named by NOTIFY_SOCKET and returns true", async () => {
    const dir = fs.mkdtempSync(join(tmpdir(), "svc-notify-"));
    const socket = await NotifySocket.open(dir);
    try {
      expect(notifyFromChild("READY=1\nSTATUS=serving", socket.path)).toBe("true");
      expect(await socket.waitFor((m) => m.startsWith("READY=1"), 10_000, "READY=1")).toBe("READY=1\nSTATUS=serving");
    } finally {
      socket.close();
      removeRoot(dir);
    }
  });

  test("returns false when nothing listens at NOTIFY_SOCKET", () => {
    const dir = fs.mkdtempSync(join(tmpdir(), "svc-notify-"));
    try {
      expect(notifyFromChild("READY=1", join(dir, "missing.sock"))).toBe("false");
    } finally {
      removeRoot(dir);
    }
  });

  test("the release binary's node sends READY=1 once healthy and STOPPING=1 on SIGTERM", async () => {
    const dir = fs.mkdtempSync(join(tmpdir(), "svc-notify-node-"));
    const socket = await NotifySocket.open(dir);
    // No --config: the embedded default, one node on loopback that forms its own cluster. It
    // gets a loopback of its own (a private network namespace), so its fixed ports are free.
    const inPrivateNet = ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"];
    const node = Bun.spawn([...inPrivateNet, releaseBinary(), "serve"], {
      cwd: dir,
      env: { ...process.env, NOTIFY_SOCKET: socket.path, NO_COLOR: "1" },
      stdout: "ignore",
      stderr: "ignore",
    });
    try {
      await socket.waitFor((m) => m.split("\n").includes("READY=1"), 60_000, "READY=1 from svc serve");
      node.kill("SIGTERM");
      await socket.waitFor((m) => m.split("\n").includes("STOPPING=1"), 30_000, "STOPPING=1 from svc serve");
      expect(await node.exited).toBe(0);
    } finally {
      node.kill("SIGKILL");
      socket.close();
      removeRoot(dir);
    }
  }, 120_000);
});
