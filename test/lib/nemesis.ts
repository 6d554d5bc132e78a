// The nemesis of the fault tests: a seeded schedule of faults on a test cluster — kill -9 and
// restart of one node or of all at once, SIGSTOP and SIGCONT, and cutting a node's peer links
// or a single link between two nodes (those need a proxied cluster) — one at a time, each
// healed before the next. The schedule is drawn from the seed alone, so
// SEED=<n> replays the same faults at the same offsets; which node "leader" means is decided
// when the fault starts, and the interleaving with clients is the operating system's.

import { createPrng } from "../../src/util/prng.ts";
import type { Cluster } from "./cluster.ts";
import type { NodeProcess } from "./proc-node.ts";

export type FaultKind = "kill" | "kill-all" | "pause" | "isolate" | "cut-link";

export interface Fault {
  /** Offset from the start of the run. */
  readonly atMs: number;
  readonly kind: FaultKind;
  /** A node id, or "leader": the node that leads when the fault starts. */
  readonly target: string;
  /** How long the fault lasts before it is healed. */
  readonly durationMs: number;
  /** For cut-link: which of the other nodes (in id order) the target loses its link to. */
  readonly otherIndex: number;
}

export interface ScheduleOptions {
  readonly seed: number;
  readonly nodeIds: readonly string[];
  /** Faults start within [0, runMs); the last one may end a little after. */
  readonly runMs: number;
  readonly kinds?: readonly FaultKind[];
  readonly durationMsMin?: number;
  readonly durationMsMax?: number;
  /** Quiet time between a heal and the next fault. */
  readonly gapMsMin?: number;
  readonly gapMsMax?: number;
}

export function drawSchedule(options: ScheduleOptions): Fault[] {
  const prng = createPrng(options.seed, 0x6e656d);
  const kinds = options.kinds ?? ["kill", "kill", "pause", "pause", "isolate", "isolate", "cut-link", "kill-all"];
  const between = (lo: number, hi: number): number => lo + prng.nextInt(hi - lo + 1);
  const faults: Fault[] = [];
  let t = between(options.gapMsMin ?? 500, options.gapMsMax ?? 1_500);
  while (t < options.runMs) {
    const kind = kinds[prng.nextInt(kinds.length)]!;
    // Half the faults hit whichever node leads: the interesting failures are the leader's.
    const target = prng.nextInt(2) === 0 ? "leader" : options.nodeIds[prng.nextInt(options.nodeIds.length)]!;
    const durationMs = between(options.durationMsMin ?? 800, options.durationMsMax ?? 4_000);
    faults.push({ atMs: t, kind, target, durationMs, otherIndex: prng.nextInt(options.nodeIds.length - 1) });
    t += durationMs + between(options.gapMsMin ?? 500, options.gapMsMax ?? 1_500);
  }
  return faults;
}

export function describeFault(f: Fault): string {
  const what = f.kind === "kill-all" ? "kill-all" : f.kind === "cut-link" ? `cut-link ${f.target}–other#${f.otherIndex}` : `${f.kind} ${f.target}`;
  return `+${(f.atMs / 1000).toFixed(1)}s ${what} for ${f.durationMs} ms`;
}

/** Runs a schedule against a cluster; every fault it started is healed by heal(), even if run() failed. */
export class Nemesis {
  private stopped = false;
  readonly log: string[] = [];

  constructor(private readonly cluster: Cluster, private readonly schedule: readonly Fault[]) {}

  async run(): Promise<void> {
    const startMs = performance.now();
    for (const fault of this.schedule) {
      const waitMs = fault.atMs - (performance.now() - startMs);
      if (waitMs > 0) await Bun.sleep(waitMs);
      if (this.stopped) return;
      const node = await this.resolve(fault.target);
      const other = this.cluster.others(node)[fault.otherIndex] ?? this.cluster.others(node)[0]!;
      const at = ((performance.now() - startMs) / 1000).toFixed(1);
      const who = fault.kind === "kill-all" ? "all nodes" : fault.kind === "cut-link" ? `${node.nodeId}–${other.nodeId}` : node.nodeId;
      this.log.push(`+${at}s ${fault.kind} ${who}${fault.target === "leader" && fault.kind !== "kill-all" ? " (leader)" : ""} for ${fault.durationMs} ms`);
      await this.apply(fault.kind, node, other);
      await Bun.sleep(fault.durationMs);
      await this.undo(fault.kind, node);
    }
  }

  stop(): void {
    this.stopped = true;
  }

  /** Undo every fault: resume paused nodes, restore links, start nodes that are down; wait until all are healthy. */
  async heal(): Promise<void> {
    this.stopped = true;
    this.cluster.resumeAll();
    this.cluster.heal();
    for (const n of this.cluster.nodes) if (!n.running) n.spawn();
    await Promise.all(this.cluster.nodes.map((n) => n.waitHealthy(30_000)));
  }

  private async resolve(target: string): Promise<NodeProcess> {
    if (target !== "leader") return this.cluster.node(target);
    // When no leader shows up quickly (an election is under way), any node will do.
    return this.cluster.waitLeader(this.cluster.live, 2_000).catch(() => this.cluster.nodes[0]!);
  }

  private async apply(kind: FaultKind, node: NodeProcess, other: NodeProcess): Promise<void> {
    switch (kind) {
      case "kill":
        await this.cluster.kill9(node);
        return;
      case "kill-all":
        // Every node at once: only what was fsynced survives, and every acknowledged write was.
        await Promise.all(this.cluster.nodes.map((n) => this.cluster.kill9(n)));
        return;
      case "cut-link":
        this.cluster.cutLink(node, other);
        return;
      case "pause":
        if (node.running) this.cluster.pause(node);
        return;
      case "isolate":
        this.cluster.isolate(node);
        return;
    }
  }

  private async undo(kind: FaultKind, node: NodeProcess): Promise<void> {
    switch (kind) {
      case "kill":
        if (!node.running) node.spawn();
        return;
      case "kill-all":
        for (const n of this.cluster.nodes) if (!n.running) n.spawn();
        return;
      case "pause":
        this.cluster.resume(node);
        return;
      case "isolate":
      case "cut-link":
        this.cluster.heal();
        return;
    }
  }
}
