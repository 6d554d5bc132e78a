// The split of max_memory_mb (node/memory-budget.ts): at every setting from the floor up the
// node and its SQL processes at their caps fit max_memory_mb + 64 MB, and from 256 MB up they fit
// max_memory_mb itself; a setting below the floor is named with what to do.

import { describe, expect, test } from "bun:test";
import { ceilingAllowanceBytes, memoryBudget, memoryFloorMb, memoryFloorWarning } from "../../src/node/memory-budget.ts";

const MIB = 2 ** 20;

describe("memory budget", () => {
  test("from the floor up, the node and its SQL processes at their caps fit max_memory_mb + 64 MB", () => {
    for (let mb = memoryFloorMb(); mb <= 8192; mb += 8) {
      const b = memoryBudget(mb * MIB);
      expect(b.totalBytesMax).toBeLessThanOrEqual(mb * MIB + ceilingAllowanceBytes);
      if (mb >= 256) expect(b.totalBytesMax).toBeLessThanOrEqual(mb * MIB);
    }
  });

  test("128 MB is above the floor and runs one SQL process for reads and write checks", () => {
    expect(memoryFloorMb()).toBeLessThanOrEqual(128);
    expect(memoryFloorWarning(128 * MIB)).toBeNull();
    const b = memoryBudget(128 * MIB);
    expect(b.sqlProcessesCount).toBe(1);
    expect(b.writeCheckOwnProcess).toBe(false);
    expect(b.resultBytesMax).toBe(4 * MIB);
  });

  test("from 512 MB two readers and a write-check process of its own", () => {
    const b = memoryBudget(512 * MIB);
    expect(b.readerProcessesCount).toBe(2);
    expect(b.writeCheckOwnProcess).toBe(true);
    expect(b.sqlProcessesCount).toBe(3);
  });

  test("a setting below the floor is named, with the floor to raise it to", () => {
    const warning = memoryFloorWarning(64 * MIB);
    expect(warning).not.toBeNull();
    expect(warning).toContain("max_memory_mb = 64");
    expect(warning).toContain(`at least ${memoryFloorMb()}`);
  });
});
