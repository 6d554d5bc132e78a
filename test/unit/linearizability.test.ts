// The linearizability checker the fault tests rely on: hand-made histories for each rule, then
// seeded random histories from a simulated register (all must pass) and mutations of them that
// break linearizability for sure (all must fail). Replay a run with SEED=<n>.

import { describe, expect, test } from "bun:test";
import { checkLinearizable, type Operation, type Value } from "../lib/linearizability.ts";
import { createPrng, type Prng } from "../../src/util/index.ts";

const U = Infinity;

function read(clientId: number, callMs: number, returnMs: number, output: Value | null, key = "x"): Operation {
  return { clientId, key, kind: "read", output, callMs, returnMs };
}
function write(clientId: number, callMs: number, returnMs: number, input: Value, key = "x"): Operation {
  return { clientId, key, kind: "write", input, callMs, returnMs };
}
function cas(clientId: number, callMs: number, returnMs: number, expected: Value | null, next: Value, output: boolean | null, key = "x"): Operation {
  return { clientId, key, kind: "cas", input: { expected, new: next }, output, callMs, returnMs };
}

function expectOk(history: Operation[]): void {
  const result = checkLinearizable(history);
  if (result.ok !== true) throw new Error(`expected linearizable, got ${JSON.stringify(result, null, 2)}`);
}

function expectFail(history: Operation[]): string {
  const result = checkLinearizable(history);
  if (result.ok !== false) throw new Error(`expected a violation, got ${JSON.stringify(result)}`);
  return result.explanation;
}

describe("linearizability checker: hand-made histories", () => {
  test("an empty history is linearizable", () => {
    expectOk([]);
  });

  test("a sequential history that reads what was written is linearizable", () => {
    expectOk([read(1, 0, 1, null), write(1, 2, 3, "a"), read(2, 4, 5, "a"), write(2, 6, 7, "b"), read(1, 8, 9, "b")]);
  });

  test("a read concurrent with a write may see the old or the new value", () => {
    expectOk([write(1, 0, 10, "a"), read(2, 1, 2, null), read(3, 3, 4, "a"), read(2, 5, 6, "a")]);
  });

  test("concurrent writes may take effect in either order, seen consistently", () => {
    expectOk([write(1, 0, 10, "a"), write(2, 0, 10, "b"), read(3, 5, 6, "b"), read(3, 7, 8, "a"), read(4, 11, 12, "a")]);
  });

  test("reads may not flip between two completed writes", () => {
    expectFail([write(1, 0, 10, "a"), write(2, 0, 10, "b"), read(3, 11, 12, "a"), read(4, 13, 14, "b"), read(3, 15, 16, "a")]);
  });

  test("a stale read is detected and explained", () => {
    const explanation = expectFail([write(1, 0, 1, "a"), write(1, 2, 3, "b"), read(2, 4, 5, "a")]);
    expect(explanation).toContain('key "x"');
    expect(explanation).toContain('client 2: read() → "a"   [4 ms, 5 ms]');
    expect(explanation).toContain('could have stored "a"');
  });

  test("a lost acknowledged write is detected", () => {
    const explanation = expectFail([write(1, 0, 1, "a"), read(2, 2, 3, null)]);
    expect(explanation).toContain("read() → null");
  });

  test("a read of a value nobody wrote is detected", () => {
    expect(expectFail([write(1, 0, 1, "a"), read(2, 0, 3, "zzz")])).toContain('No operation ever stored "zzz"');
  });

  test("a compare-and-set succeeds only on the expected value", () => {
    expectOk([cas(1, 0, 1, null, "a", true), cas(2, 2, 3, null, "b", false), cas(2, 4, 5, "a", "b", true), read(1, 6, 7, "b")]);
    expectFail([write(1, 0, 1, "a"), cas(2, 2, 3, "zzz", "b", true)]);
  });

  test("a compare-and-set that fails on the expected value is detected", () => {
    expectFail([write(1, 0, 1, "a"), cas(2, 2, 3, "a", "b", false)]);
  });

  test("two concurrent compare-and-sets from the same value cannot both succeed", () => {
    expectOk([cas(1, 0, 5, null, "a", true), cas(2, 0, 5, null, "b", false)]);
    expectFail([cas(1, 0, 5, null, "a", true), cas(2, 0, 5, null, "b", true)]);
  });

  test("an unknown-outcome write that shows up later is linearizable", () => {
    expectOk([write(1, 0, U, "a"), read(2, 1, 2, null), read(2, 10, 11, "a"), read(3, 20, 21, "a")]);
  });

  test("an unknown-outcome write that never shows up is linearizable", () => {
    expectOk([write(1, 0, U, "a"), read(2, 1, 2, null), read(2, 100, 101, null)]);
  });

  test("an unknown-outcome write seen before its call is detected", () => {
    const explanation = expectFail([read(2, 0, 1, "a"), write(1, 5, U, "a")]);
    expect(explanation).toContain("outcome unknown");
  });

  test("an unknown-outcome write, once seen, stays unless overwritten", () => {
    expectFail([write(1, 0, U, "a"), read(2, 1, 2, "a"), read(2, 3, 4, null)]);
    expectOk([write(1, 0, U, "a"), read(2, 1, 2, "a"), write(3, 3, 4, "b"), read(2, 5, 6, "b")]);
  });

  test("an unknown-outcome compare-and-set may swap or not", () => {
    expectOk([cas(1, 0, U, null, "a", null), read(2, 5, 6, "a")]);
    expectOk([cas(1, 0, U, null, "a", null), read(2, 5, 6, null)]);
    expectFail([write(3, 0, 1, "b"), cas(1, 2, U, null, "a", null), read(2, 5, 6, "a")]);
  });

  test("an unknown-outcome write nobody read can still explain a failed compare-and-set", () => {
    expectOk([write(1, 0, 1, "a"), write(2, 2, U, "b"), cas(3, 5, 6, "a", "c", false)]);
    expectFail([write(1, 0, 1, "a"), cas(3, 5, 6, "a", "c", false), write(2, 7, U, "b")]);
  });

  test("many unknown-outcome writes nobody observed do not stall the check of a bad history", () => {
    const history: Operation[] = [];
    for (let i = 0; i < 200; i++) {
      history.push(write(1, i * 10, i * 10 + 5, `v${i}`), read(2, i * 10 + 6, i * 10 + 9, `v${i}`));
      history.push(write(3 + i, i * 10 + 1, U, `timed out ${i}`));
    }
    history.push(read(999, 5000, 5001, "v3"));
    const result = checkLinearizable(history, { timeoutMs: 60_000 });
    expect(result.ok).toBe(false);
  });

  test("a read with an unknown outcome constrains nothing", () => {
    expectOk([write(1, 0, 1, "a"), read(2, 2, U, "whatever")]);
  });

  test("keys are checked independently and the failing key is named", () => {
    expectOk([write(1, 0, 1, "a", "x"), read(2, 2, 3, null, "y"), read(2, 4, 5, "a", "x")]);
    const result = checkLinearizable([write(1, 0, 1, "a", "x"), write(1, 0, 1, "a", "y"), read(2, 2, 3, null, "y")]);
    expect(result.ok === false && result.key).toBe("y");
  });

  test("the explanation points at the first operation where the history goes wrong", () => {
    const history: Operation[] = [];
    for (let i = 0; i < 200; i++) {
      history.push(write(1, i * 10, i * 10 + 5, `v${i}`), read(2, i * 10 + 1, i * 10 + 6, i === 0 ? null : `v${i - 1}`));
    }
    history.push(read(3, 2000, 2001, "v42"));
    for (let i = 0; i < 50; i++) history.push(read(2, 3000 + i, 3000 + i, "v199"));
    const explanation = expectFail(history);
    expect(explanation).toContain("called by 2001 ms have no legal order");
    expect(explanation).toContain('client 3: read() → "v42"   [2000 ms, 2001 ms]');
  });

  test("a search past its time budget answers unknown", () => {
    // Thirty concurrent writes and an impossible read: every subset of writes gets explored.
    const history: Operation[] = Array.from({ length: 30 }, (_, i) => write(i, 0, 100, `v${i}`));
    history.push(read(99, 50, 200, "nobody wrote this"));
    for (let i = 0; i < 30; i++) history.push(read(100 + i, 60, 200, `v${i}`));
    const result = checkLinearizable(history, { timeoutMs: 50 });
    expect(result.ok).toBe("unknown");
  });

  test("an operation returning before its call is rejected as a bad history", () => {
    expect(() => checkLinearizable([read(1, 5, 4, null)])).toThrow(/before callMs/);
  });
});

// ---- random histories from a simulated register ----

interface Draft {
  op: Operation;
  /** Where it takes effect in the simulation; null if it never does (unknown outcome only). */
  readonly effectMs: number | null;
  readonly tiebreak: number;
}

function generateHistory(prng: Prng): Operation[] {
  const clients = 2 + prng.nextInt(4);
  const keys = ["x", "y", "z"].slice(0, 1 + prng.nextInt(2));
  const opCount = 10 + prng.nextInt(50);
  const freeAtMs = Array.from({ length: clients }, () => prng.nextInt(5));
  const written = new Map<string, Value[]>(keys.map((k) => [k, []]));
  let valueSeq = 0;
  const drafts: Draft[] = [];
  for (let i = 0; i < opCount; i++) {
    const client = prng.nextInt(clients);
    const key = keys[prng.nextInt(keys.length)]!;
    const callMs = freeAtMs[client]! + prng.nextInt(5);
    const durationMs = 1 + prng.nextInt(20);
    freeAtMs[client] = callMs + durationMs;
    const roll = prng.next();
    const unknown = prng.next() < 0.12;
    const returnMs = unknown ? Infinity : callMs + durationMs;
    // Known operations take effect within their interval; unknown ones anywhere after the call, or never.
    const effectMs = !unknown ? callMs + prng.nextInt(durationMs + 1) : prng.next() < 0.6 ? callMs + prng.nextInt(3 * durationMs + 1) : null;
    let op: Operation;
    if (roll < 0.4) {
      op = read(client, callMs, returnMs, null, key);
    } else if (roll < 0.75) {
      const value = `v${valueSeq++}`;
      written.get(key)!.push(value);
      op = write(client, callMs, returnMs, value, key);
    } else {
      const seen = written.get(key)!;
      const expected = seen.length === 0 || prng.next() < 0.2 ? null : seen[seen.length - 1 - prng.nextInt(Math.min(3, seen.length))]!;
      const value = `v${valueSeq++}`;
      seen.push(value);
      op = cas(client, callMs, returnMs, expected, value, null, key);
    }
    drafts.push({ op, effectMs, tiebreak: prng.next() });
  }
  // Run the register in effect order to fill in what each known operation returned.
  const state = new Map<string, Value | null>();
  const inEffectOrder = drafts.filter((d) => d.effectMs !== null).sort((a, b) => a.effectMs! - b.effectMs! || a.tiebreak - b.tiebreak);
  for (const d of inEffectOrder) {
    const op = d.op;
    const current = state.get(op.key) ?? null;
    if (op.kind === "read") {
      if (op.returnMs !== Infinity) d.op = { ...op, output: current };
    } else if (op.kind === "write") {
      state.set(op.key, op.input);
    } else {
      const swapped = current === op.input.expected;
      if (swapped) state.set(op.key, op.input.new);
      if (op.returnMs !== Infinity) d.op = { ...op, output: swapped };
    }
  }
  return drafts.map((d) => d.op);
}

type Mutation = { readonly name: string; readonly history: Operation[] };

function writersOf(history: Operation[], key: string, value: Value | null): Operation[] {
  return history.filter((op) => op.key === key && ((op.kind === "write" && op.input === value) || (op.kind === "cas" && op.input.new === value)));
}

/** A change that makes the history non-linearizable for certain, or null if none applies. */
function mutate(history: Operation[], prng: Prng): Mutation | null {
  const reads = history.map((op, i) => [op, i] as const).filter(([op]) => op.kind === "read" && op.returnMs !== Infinity);
  if (reads.length === 0) return null;
  const [target, index] = reads[prng.nextInt(reads.length)]!;
  const replaced = (output: Value | null, extra: Operation[] = []): Operation[] =>
    [...history.slice(0, index), { ...target, output } as Operation, ...history.slice(index + 1), ...extra];

  const kind = prng.nextInt(3);
  if (kind === 0) return { name: "phantom value", history: replaced("never written") };
  if (kind === 1) {
    // The only write of the value is called after the read returned, and its outcome is unknown.
    const future = write(99, target.returnMs + 1 + prng.nextInt(5), Infinity, "from the future", target.key);
    return { name: "read from the future", history: replaced("from the future", [future]) };
  }
  // Stale read: a value all of whose writers finished before a later completed write that
  // finished before the read began.
  const overwrites = history.filter((op) =>
    op.key === target.key && op.returnMs < target.callMs && (op.kind === "write" || (op.kind === "cas" && op.output === true)));
  for (const w of overwrites) {
    const newer = w.kind === "write" ? w.input : w.kind === "cas" ? w.input.new : null;
    const candidates: (Value | null)[] = [null, ...history.filter((op) => op.key === target.key && op.kind !== "read").map((op) => (op.kind === "write" ? op.input : op.kind === "cas" ? op.input.new : null))];
    for (const stale of candidates) {
      if (stale === newer) continue;
      if (writersOf(history, target.key, stale).every((op) => op.returnMs < w.callMs)) {
        return { name: "stale read", history: replaced(stale) };
      }
    }
  }
  return null;
}

/** The definition, enumerated: some order of all known operations and any unknown ones is legal. */
function bruteForceLinearizable(history: Operation[]): boolean {
  const ops = history.filter((op) => !(op.kind === "read" && op.returnMs === Infinity));
  const done = new Array<boolean>(ops.length).fill(false);
  const model = (state: Value | null, op: Operation): Value | null | undefined => {
    const unknown = op.returnMs === Infinity;
    if (op.kind === "read") return op.output === state ? state : undefined;
    if (op.kind === "write") return op.input;
    const matches = state === op.input.expected;
    if (unknown) return matches ? op.input.new : state;
    return op.output === matches ? (matches ? op.input.new : state) : undefined;
  };
  const extend = (state: Value | null): boolean => {
    if (ops.every((op, i) => done[i] || op.returnMs === Infinity)) return true;
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i]!;
      if (done[i]) continue;
      // Every operation that returned before this one was called must already be placed.
      if (ops.some((other, j) => !done[j] && j !== i && other.returnMs < op.callMs)) continue;
      const next = model(state, op);
      if (next === undefined) continue;
      done[i] = true;
      const ok = extend(next);
      done[i] = false;
      if (ok) return true;
    }
    return false;
  };
  return extend(null);
}

function arbitraryHistory(prng: Prng): Operation[] {
  const values: (Value | null)[] = [null, "a", "b", "c"];
  const pick = () => values[prng.nextInt(values.length)]!;
  const pickValue = () => values[1 + prng.nextInt(values.length - 1)]!;
  return Array.from({ length: 2 + prng.nextInt(6) }, (_, i): Operation => {
    const callMs = prng.nextInt(20);
    const returnMs = prng.next() < 0.15 ? Infinity : callMs + prng.nextInt(8);
    const roll = prng.nextInt(3);
    if (roll === 0) return read(i, callMs, returnMs, pick());
    if (roll === 1) return write(i, callMs, returnMs, pickValue());
    return cas(i, callMs, returnMs, pick(), pickValue(), returnMs === Infinity ? null : prng.next() < 0.5);
  });
}

describe("linearizability checker: random histories", () => {
  const seed = Number(process.env.SEED ?? Math.floor(Math.random() * 2 ** 32));
  console.log(`linearizability random histories: SEED=${seed}`);

  test("agrees with a brute-force enumeration on small arbitrary histories", () => {
    const prng = createPrng(seed, 1);
    let linearizable = 0;
    for (let round = 0; round < 3000; round++) {
      const history = arbitraryHistory(prng);
      const expected = bruteForceLinearizable(history);
      const got = checkLinearizable(history).ok;
      if (got !== expected) {
        throw new Error(`SEED=${seed} round ${round}: checker says ${got}, enumeration says ${expected}\n${JSON.stringify(history)}`);
      }
      if (expected) linearizable++;
    }
    // Both verdicts must be well represented for the comparison to mean something.
    expect(linearizable).toBeGreaterThan(300);
    expect(linearizable).toBeLessThan(2700);
  });

  test("histories of a simulated register always pass, and sure mutations of them always fail", () => {
    const prng = createPrng(seed);
    const mutations = new Map<string, number>();
    for (let round = 0; round < 400; round++) {
      const history = generateHistory(prng);
      const result = checkLinearizable(history);
      if (result.ok !== true) {
        throw new Error(`SEED=${seed} round ${round}: generated history rejected: ${JSON.stringify(result, null, 2)}\n${JSON.stringify(history)}`);
      }
      const mutation = mutate(history, prng);
      if (mutation === null) continue;
      const mutated = checkLinearizable(mutation.history);
      if (mutated.ok !== false) {
        throw new Error(`SEED=${seed} round ${round}: ${mutation.name} not detected: ${JSON.stringify(mutated)}\n${JSON.stringify(mutation.history)}`);
      }
      mutations.set(mutation.name, (mutations.get(mutation.name) ?? 0) + 1);
    }
    expect(mutations.get("phantom value") ?? 0).toBeGreaterThan(20);
    expect(mutations.get("read from the future") ?? 0).toBeGreaterThan(20);
    expect(mutations.get("stale read") ?? 0).toBeGreaterThan(5);
  });
});
