// Setting aside unknown-outcome operations that cannot matter. Fault tests produce many of them
// (every timeout during a partition), and each one may take effect anywhere after its call, which
// multiplies the search. One whose stored value nobody ever observed can be removed without
// changing the verdict: in any legal order, the register holds its value only until the next
// change, and no operation in that stretch can depend on it (no read returns it, no
// compare-and-set expects it, and no known failed compare-and-set runs then); removing it leaves
// the order legal, and conversely an order without it stays legal with it placed last.

import { outcomeUnknown, stateKey, type Operation } from "./linearizability-model.ts";

export function withoutUnobservedUnknowns(ops: readonly Operation[]): { kept: Operation[]; setAside: number } {
  const observed = new Set<string>();
  let failedCasReturnMsMax = -Infinity;
  for (const op of ops) {
    if (op.kind === "read" && !outcomeUnknown(op)) observed.add(stateKey(op.output));
    if (op.kind === "cas") {
      observed.add(stateKey(op.input.expected));
      if (op.output === false && !outcomeUnknown(op)) failedCasReturnMsMax = Math.max(failedCasReturnMsMax, op.returnMs);
    }
  }
  const kept = ops.filter((op) => {
    if (!outcomeUnknown(op) || op.kind === "read") return true;
    const stored = op.kind === "write" ? op.input : op.input.new;
    return observed.has(stateKey(stored)) || op.callMs <= failedCasReturnMsMax;
  });
  return { kept, setAside: ops.length - kept.length };
}
