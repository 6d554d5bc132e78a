// A test's world of real processes: a temp dir, the nodes started in it, and what happens
// when the test fails (each node's log tail is printed and the dir is kept for a look) or
// ends (every node is killed, the dir removed).

import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "bun:test";
import type { ConfigDraft } from "../../src/config/index.ts";
import { clusterConfigs, singleNodeConfig, type DraftOverrides } from "./proc-config.ts";
import { NodeProcess, type StartNodeOptions } from "./proc-node.ts";

export function makeTempDir(label: string): string {
  return fs.mkdtempSync(join(tmpdir(), `svc-${label.replace(/[^A-Za-z0-9_-]+/g, "-").slice(0, 40)}-`));
}

export class ProcEnv {
  readonly dir: string;
  readonly nodes: NodeProcess[] = [];
  private failed = false;

  constructor(readonly label: string) {
    this.dir = makeTempDir(label);
  }

  /** A node of this env, not started yet. */
  node(config: ConfigDraft, options: Omit<StartNodeOptions, "config" | "dir"> = {}): NodeProcess {
    const node = new NodeProcess({ ...options, config, dir: this.dir });
    this.nodes.push(node);
    return node;
  }

  /** Start a node and wait until it is healthy. */
  startNode(options: Omit<StartNodeOptions, "dir">): Promise<NodeProcess> {
    const { config, ...rest } = options;
    return this.node(config, rest).start();
  }

  /** A single node (bootstrapping its own cluster) on free ports, started and healthy. */
  async startSingleNode(overrides: DraftOverrides = {}, options: Omit<StartNodeOptions, "config" | "dir"> = {}): Promise<NodeProcess> {
    return this.node(await singleNodeConfig(this.dir, overrides), options).start();
  }

  /** Nodes of a new cluster (not started): node1 bootstraps, the others join. */
  async cluster(count: number, overrides: DraftOverrides = {}, options: Omit<StartNodeOptions, "config" | "dir"> = {}): Promise<NodeProcess[]> {
    return (await clusterConfigs(this.dir, count, overrides)).map((c) => this.node(c, options));
  }

  /** Print what a reader of a failed test needs: where everything is and each node's last lines. */
  reportFailure(error: unknown): void {
    this.failed = true;
    const parts = [`[${this.label}] failed: ${error instanceof Error ? error.message : String(error)}`, `test dir kept: ${this.dir}`];
    for (const node of this.nodes) parts.push(`--- ${node.logPath} (last 40 lines) ---\n${node.logTail(40)}`);
    console.error(parts.join("\n"));
  }

  /** Kill this env's nodes; remove the dir unless a test failed. */
  async dispose(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.kill9()));
    if (!this.failed) fs.rmSync(this.dir, { recursive: true, force: true });
  }

  /** A bun test whose failure reports this env's nodes. */
  test(name: string, fn: () => Promise<void>, timeoutMs = 60_000): void {
    test(name, async () => {
      try {
        await fn();
      } catch (e) {
        this.reportFailure(e);
        throw e;
      }
    }, timeoutMs);
  }
}

/** A test with its own ProcEnv: fresh temp dir, nodes killed at the end, logs shown on failure. */
export function procTest(name: string, fn: (env: ProcEnv) => Promise<void>, timeoutMs = 60_000): void {
  test(name, async () => {
    const env = new ProcEnv(name);
    try {
      await fn(env);
    } catch (e) {
      env.reportFailure(e);
      throw e;
    } finally {
      await env.dispose();
    }
  }, timeoutMs);
}
