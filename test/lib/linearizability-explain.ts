// Turns a failed search into something a person can act on. A prefix of a history, cut at time T,
// keeps the operations called by T, and those still running at T become unknown-outcome ones. If a
// prefix has no legal order, no longer one has, so a binary search over return times finds the
// shortest failing prefix; the operation whose return ends it is where the history goes wrong.

import { describeOperation, describeState, outcomeUnknown, type Operation } from "./linearizability-model.ts";
import { searchLinearization, type SearchResult } from "./linearizability-search.ts";

const ORDER_LINES_MAX = 12;
const OVERLAP_LINES_MAX = 20;

function prefixAt(ops: readonly Operation[], cutMs: number): Operation[] {
  const prefix: Operation[] = [];
  for (const op of ops) {
    if (op.callMs > cutMs) continue;
    if (op.returnMs <= cutMs) prefix.push(op);
    else if (op.kind !== "read") prefix.push({ ...op, returnMs: Infinity, output: null });
  }
  return prefix;
}

type Failure = Extract<SearchResult, { kind: "fail" }>;

/** The shortest failing prefix's cut time and its search result; the whole history's if time runs out. */
function shortestFailingPrefix(ops: readonly Operation[], whole: Failure, deadlineMs: number): { cutMs: number; prefix: Operation[]; failure: Failure } {
  const cuts = [...new Set(ops.filter((op) => !outcomeUnknown(op)).map((op) => op.returnMs))].sort((a, b) => a - b);
  let best = { cutMs: cuts[cuts.length - 1] ?? Infinity, prefix: [...ops], failure: whole };
  // Invariant: the prefix at cuts[hi] fails; every prefix before cuts[lo] passes.
  let lo = 0;
  let hi = cuts.length - 1;
  // The whole history's result counts operations called after the last return; redo it on the cut.
  const last = cuts[hi];
  if (last !== undefined) {
    const prefix = prefixAt(ops, last);
    const result = searchLinearization(prefix, deadlineMs);
    if (result.kind === "fail") best = { cutMs: last, prefix, failure: result };
  }
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const prefix = prefixAt(ops, cuts[mid]!);
    const result = searchLinearization(prefix, deadlineMs);
    if (result.kind === "timeout") break;
    if (result.kind === "fail") {
      hi = mid;
      best = { cutMs: cuts[mid]!, prefix, failure: result };
    } else {
      lo = mid + 1;
    }
  }
  return best;
}

function lines(title: string, items: readonly string[], max: number): string[] {
  if (items.length === 0) return [];
  const shown = items.length > max ? items.slice(items.length - max) : items;
  const skipped = items.length - shown.length;
  return [title, ...(skipped > 0 ? [`  … ${skipped} earlier`] : []), ...shown.map((s) => `  ${s}`)];
}

export function explainFailure(key: string, ops: readonly Operation[], whole: Failure, deadlineMs: number): string {
  const { cutMs, prefix, failure } = shortestFailingPrefix(ops, whole, deadlineMs);
  const ending = prefix.filter((op) => op.returnMs === cutMs);
  const first = ending[0];
  const out: string[] = [`key ${JSON.stringify(key)} is not linearizable.`];
  out.push(
    `Shortest failing prefix: the ${prefix.length} of ${ops.length} operations on this key called by ${cutMs} ms have no legal order;`,
    "it fails when this returns:",
    ...ending.map((op) => `  ${describeOperation(op)}`),
  );

  if (first !== undefined) {
    const overlapping = ops.filter((op) => op !== first && op.callMs <= first.returnMs && op.returnMs >= first.callMs);
    out.push(...lines("Operations overlapping it:", overlapping.map(describeOperation), OVERLAP_LINES_MAX));
    if (first.kind === "read" || (first.kind === "cas" && first.output === true)) {
      const seen = first.kind === "read" ? first.output : first.input.expected;
      const writers = ops.filter((op) => (op.kind === "write" && op.input === seen) || (op.kind === "cas" && op.input.new === seen));
      const what = `Operations that could have stored ${describeState(seen)} (the value it observed):`;
      if (seen === null) out.push("It observed null, the value before any write.");
      else if (writers.length === 0) out.push(`No operation ever stored ${describeState(seen)}, the value it observed.`);
      else out.push(...lines(what, writers.map(describeOperation), OVERLAP_LINES_MAX));
    }
  }

  const order = failure.longest.map((i) => describeOperation(prefix[i]!));
  if (order.length === 0) {
    out.push("No operation can take effect first; the register holds null at the start.");
  } else {
    out.push(...lines(`Longest legal order found (${order.length} operations):`, order, ORDER_LINES_MAX));
    out.push(`The register then holds ${describeState(failure.stateAfterLongest)}.`);
  }
  if (failure.blocking !== null) {
    out.push(`Next, this must take effect before it returns and cannot: ${describeOperation(prefix[failure.blocking]!)}`);
  }
  return out.join("\n");
}
