// Runs the Raft simulation over many seeds. Prints the seeds first; a failure names its seed
// and replays exactly with SEED=<n>. SIM_SEEDS=<n> runs n seeds (default 300) starting at
// SIM_FIRST_SEED (default 1). SIM_TRACE=1 prints the cores' logs (useful with SEED).

import { describe, expect, test } from "bun:test";
import { runSeed } from "./simulation.ts";
import { consoleLogger } from "./trace-logger.ts";

const single = process.env["SEED"];
const count = Number(process.env["SIM_SEEDS"] ?? 300);
const first = Number(process.env["SIM_FIRST_SEED"] ?? 1);
const seeds = single !== undefined ? [Number(single)] : Array.from({ length: count }, (_, i) => first + i);
const chunkSize = 25;

console.log(single !== undefined ? `raft simulation: SEED=${single}` : `raft simulation: seeds ${first}..${first + count - 1} (replay one with SEED=<n>)`);

describe("raft simulation", () => {
  for (let i = 0; i < seeds.length; i += chunkSize) {
    const chunk = seeds.slice(i, i + chunkSize);
    test(`safety and liveness hold under faults for seeds ${chunk[0]}..${chunk.at(-1)}`, () => {
      for (const seed of chunk) {
        const stats = runSeed(seed, process.env["SIM_TRACE"] === "1" ? consoleLogger() : undefined);
        if (single !== undefined) console.log(JSON.stringify(stats));
        expect(stats.finalMembers).toBeGreaterThan(0);
      }
    }, 120_000);
  }
});
