// A stand-in for systemd's notification socket: a unix datagram socket that records what
// sd_notify sends. Bun has no unix datagram sockets, so python3 holds it; each datagram
// comes back as one JSON line on its stdout.

import * as fs from "node:fs";
import { join } from "node:path";

const RECEIVER = `
import json, os, socket, sys
path = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
os.chmod(path, 0o777)  # a node running as another user must be able to send
print(json.dumps("bound"), flush=True)
while True:
    print(json.dumps(s.recv(65536).decode("utf-8", "replace")), flush=True)
`;

export class NotifySocket {
  readonly messages: string[] = [];
  private constructor(
    readonly path: string,
    private readonly proc: ReturnType<typeof Bun.spawn>,
  ) {}

  /** Binds `<dir>/notify.sock` and resolves once python3 is receiving. */
  static async open(dir: string): Promise<NotifySocket> {
    const path = join(dir, "notify.sock");
    fs.rmSync(path, { force: true });
    const proc = Bun.spawn(["python3", "-c", RECEIVER, path], { stdout: "pipe", stderr: "inherit" });
    const socket = new NotifySocket(path, proc);
    void socket.pump(proc.stdout as ReadableStream<Uint8Array>);
    await socket.waitFor((m) => m === "bound", 10_000, "python3 to bind the notify socket");
    return socket;
  }

  private async pump(stream: ReadableStream<Uint8Array>): Promise<void> {
    let buffered = "";
    const decoder = new TextDecoder();
    for await (const chunk of stream) {
      buffered += decoder.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = buffered.indexOf("\n")) >= 0) {
        this.messages.push(JSON.parse(buffered.slice(0, nl)) as string);
        buffered = buffered.slice(nl + 1);
      }
    }
  }

  /** Polls until a message matches, failing after the deadline. */
  async waitFor(match: (message: string) => boolean, deadlineMs: number, what: string): Promise<string> {
    const until = Date.now() + deadlineMs;
    for (;;) {
      const found = this.messages.find(match);
      if (found !== undefined) return found;
      if (Date.now() > until) throw new Error(`timed out waiting for ${what}; received: ${JSON.stringify(this.messages)}`);
      await Bun.sleep(20);
    }
  }

  close(): void {
    this.proc.kill();
    fs.rmSync(this.path, { force: true });
  }
}
