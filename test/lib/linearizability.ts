// Linearizability checker for recorded client histories of svc, one register per key.
// Keys are independent (linearizability is compositional), so each key's operations are checked
// alone. Operations with an unknown outcome (returnMs = Infinity) may take effect at any point
// after their call or never; those whose value nobody observed are set aside first. On failure the explanation names the shortest prefix of the history
// (cut at a return) that already has no legal order, the operation whose return ends it, the
// operations overlapping it and the longest legal order the search found.

import { explainFailure } from "./linearizability-explain.ts";
import { outcomeUnknown, type Operation } from "./linearizability-model.ts";
import { withoutUnobservedUnknowns } from "./linearizability-prune.ts";
import { searchLinearization } from "./linearizability-search.ts";

export { describeOperation, type Operation, type RegisterState, type Value } from "./linearizability-model.ts";

export type CheckResult =
  | { readonly ok: true }
  | { readonly ok: false; readonly key: string; readonly explanation: string }
  | { readonly ok: "unknown"; readonly key: string; readonly reason: string };

export interface CheckOptions {
  /** Budget for the whole check, explanation included; past it the answer is "unknown". */
  readonly timeoutMs?: number;
}

function validate(op: Operation, index: number): void {
  const where = `operation ${index} (client ${op.clientId}, key ${JSON.stringify(op.key)})`;
  if (!Number.isFinite(op.callMs)) throw new Error(`${where}: callMs must be finite`);
  if (!(op.returnMs >= op.callMs)) throw new Error(`${where}: returnMs ${op.returnMs} is before callMs ${op.callMs}`);
}

function byKey(history: readonly Operation[]): Map<string, Operation[]> {
  const keys = new Map<string, Operation[]>();
  history.forEach((op, i) => {
    validate(op, i);
    // A read whose answer never came constrains nothing.
    if (op.kind === "read" && outcomeUnknown(op)) return;
    const list = keys.get(op.key);
    if (list === undefined) keys.set(op.key, [op]);
    else list.push(op);
  });
  return keys;
}

export function checkLinearizable(history: readonly Operation[], options: CheckOptions = {}): CheckResult {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const deadlineMs = Date.now() + timeoutMs;
  for (const [key, all] of byKey(history)) {
    const { kept: ops } = withoutUnobservedUnknowns(all);
    const result = searchLinearization(ops, deadlineMs);
    if (result.kind === "ok") continue;
    if (result.kind === "timeout") return { ok: "unknown", key, reason: `search for key ${JSON.stringify(key)} ran out of its ${timeoutMs} ms` };
    return { ok: false, key, explanation: explainFailure(key, ops, result, deadlineMs) };
  }
  return { ok: true };
}
