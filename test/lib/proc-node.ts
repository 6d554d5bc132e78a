// A node run as the compiled binary: `svc serve --config <dir>/<nodeId>.toml`, its stdout and
// stderr appended to <dir>/<nodeId>.log across restarts. One NodeProcess stands for one node
// (its config and data) and may be started, killed and started again any number of times.

import * as fs from "node:fs";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { renderConfigToml, type ConfigDraft } from "../../src/config/index.ts";
import { ensureBinary } from "./proc-binary.ts";
import { addressText } from "./proc-config.ts";
import { GiveUp, request, waitFor, withinDeadline } from "./proc-http.ts";
import { trackProcess, withPdeathsig } from "./proc-registry.ts";

export interface StartNodeOptions {
  /** The node's configuration; written to `<dir>/<nodeId>.toml`. */
  config: ConfigDraft;
  /** Where the config file and the log go. */
  dir: string;
  /** Extra environment for the process (RUST_LOG, say). */
  env?: Record<string, string>;
  /** Run as another user (root only), e.g. { user: "nobody", group: "nogroup" }. */
  runAs?: { user: string; group: string };
  /** Bound on the wait for GET /health = 200. */
  healthyDeadlineMs?: number;
  /** The executable to run (default: the compiled binary, ensureBinary()). */
  binary?: string;
}

export class NodeProcess {
  readonly nodeId: string;
  readonly configPath: string;
  readonly logPath: string;
  readonly clientUrl: string;
  readonly adminUrl: string;
  private proc: Subprocess | null = null;
  private starts = 0;

  constructor(readonly options: StartNodeOptions) {
    this.nodeId = options.config.nodeId;
    this.configPath = join(options.dir, `${this.nodeId}.toml`);
    this.logPath = join(options.dir, `${this.nodeId}.log`);
    this.clientUrl = `http://${addressText(options.config.listen?.client, "listen.client")}`;
    this.adminUrl = `http://${addressText(options.config.listen?.admin, "listen.admin")}`;
  }

  get config(): ConfigDraft {
    return this.options.config;
  }

  get dataDir(): string {
    const dir = this.options.config.dataDir;
    if (dir === undefined) throw new Error(`${this.nodeId} has no data_dir in its test config`);
    return dir;
  }

  get pid(): number | null {
    return this.proc?.pid ?? null;
  }

  get running(): boolean {
    return this.proc !== null && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  /** Exit code of the last run, or null while it runs (or was killed by a signal). */
  get exitCode(): number | null {
    return this.proc?.exitCode ?? null;
  }

  /** Start the process without waiting for it to serve. */
  spawn(): void {
    if (this.running) throw new Error(`${this.nodeId} is already running (pid ${this.pid})`);
    fs.mkdirSync(this.options.dir, { recursive: true });
    fs.writeFileSync(this.configPath, renderConfigToml(this.options.config));
    this.starts++;
    fs.appendFileSync(this.logPath, `\n===== test harness: start #${this.starts} of ${this.nodeId} at ${new Date().toISOString()} =====\n`);
    const logFd = fs.openSync(this.logPath, "a");
    try {
      this.proc = Bun.spawn(withPdeathsig([this.options.binary ?? ensureBinary(), "serve", "--config", this.configPath], this.options.runAs), {
        cwd: this.options.dir,
        env: { ...process.env, NO_COLOR: "1", ...this.options.env },
        stdin: "ignore",
        stdout: logFd,
        stderr: logFd,
      });
    } finally {
      fs.closeSync(logFd);
    }
    trackProcess(this.proc);
  }

  /** Start the process and wait until GET /health on the client port answers 200. */
  async start(): Promise<this> {
    this.spawn();
    await this.waitHealthy();
    return this;
  }

  async waitHealthy(deadlineMs = this.options.healthyDeadlineMs ?? 30_000): Promise<void> {
    await waitFor(`${this.nodeId} to answer GET /health with 200`, async () => {
      if (!this.running) {
        throw new GiveUp(`${this.nodeId} exited (code ${this.proc?.exitCode}, signal ${this.proc?.signalCode}) before it was healthy`);
      }
      const r = await request(`${this.clientUrl}/health`, { timeoutMs: 2_000 });
      return r.status === 200;
    }, { deadlineMs }).catch((e: unknown) => {
      throw new Error(`${e instanceof Error ? e.message : String(e)}\n--- ${this.logPath} (tail) ---\n${this.logTail()}`);
    });
  }

  /** SIGKILL, and wait until the process is gone. */
  async kill9(): Promise<void> {
    const proc = this.proc;
    if (proc === null) return;
    if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
    await proc.exited;
  }

  /** SIGTERM and wait for a clean exit; returns the exit code. A node that hangs is killed and reported. */
  async stop(deadlineMs = 20_000): Promise<number> {
    const proc = this.proc;
    if (proc === null) throw new Error(`${this.nodeId} was never started`);
    if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode ?? -1;
    proc.kill("SIGTERM");
    const outcome = await withinDeadline(proc.exited, deadlineMs);
    if (outcome === "expired") {
      proc.kill("SIGKILL");
      await proc.exited;
      throw new Error(`${this.nodeId} did not exit within ${deadlineMs} ms of SIGTERM\n--- ${this.logPath} (tail) ---\n${this.logTail()}`);
    }
    return outcome;
  }

  /** Wait for the process to exit by itself (a node expected to fail at start). */
  async waitExit(deadlineMs = 20_000): Promise<number> {
    const proc = this.proc;
    if (proc === null) throw new Error(`${this.nodeId} was never started`);
    const outcome = await withinDeadline(proc.exited, deadlineMs);
    if (outcome === "expired") throw new Error(`${this.nodeId} was expected to exit but still runs after ${deadlineMs} ms\n--- ${this.logPath} (tail) ---\n${this.logTail()}`);
    return outcome;
  }

  /** The log written so far (every run of this node). */
  log(): string {
    try {
      return fs.readFileSync(this.logPath, "utf8");
    } catch {
      return "";
    }
  }

  /** Output of the most recent run only. */
  lastRunLog(): string {
    const text = this.log();
    const marker = text.lastIndexOf("===== test harness: start #");
    if (marker < 0) return text;
    const lineEnd = text.indexOf("\n", marker);
    return lineEnd < 0 ? "" : text.slice(lineEnd + 1);
  }

  logTail(lines = 40): string {
    return this.log().split("\n").slice(-lines).join("\n");
  }
}

/** Start a node from `options` and wait until it is healthy. */
export async function startNode(options: StartNodeOptions): Promise<NodeProcess> {
  return new NodeProcess(options).start();
}
