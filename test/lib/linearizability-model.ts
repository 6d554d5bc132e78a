// The recorded operations and the sequential model they are checked against: one register per
// key, initially null, with read, write and compare-and-set.

export type Value = string | number;

interface Timing {
  readonly clientId: string | number;
  readonly key: string;
  /** When the client sent the request. */
  readonly callMs: number;
  /**
   * When the client got the answer; Infinity when the outcome is unknown (timeout, lost
   * connection): the operation may then have taken effect at any point after its call, or never,
   * and its output is ignored. A definite failure (the store refused it) is not an operation:
   * leave it out of the history.
   */
  readonly returnMs: number;
}

export type Operation =
  | (Timing & { readonly kind: "read"; readonly input?: null; readonly output: Value | null })
  | (Timing & { readonly kind: "write"; readonly input: Value; readonly output?: null })
  | (Timing & {
      readonly kind: "cas";
      readonly input: { readonly expected: Value | null; readonly new: Value };
      /** Whether the value was swapped; null when the outcome is unknown. */
      readonly output: boolean | null;
    });

export type RegisterState = Value | null;

export function outcomeUnknown(op: Operation): boolean {
  return op.returnMs === Infinity;
}

/** The state after op, or undefined when op cannot take effect in this state with its output. */
export function step(state: RegisterState, op: Operation): RegisterState | undefined {
  const unknown = outcomeUnknown(op);
  switch (op.kind) {
    case "read":
      return unknown || op.output === state ? state : undefined;
    case "write":
      return op.input;
    case "cas": {
      const matches = state === op.input.expected;
      // An unknown CAS that did not swap is indistinguishable from one that never ran, which the
      // search covers by placing it after everything else.
      if (unknown) return matches ? op.input.new : state;
      if (op.output === true) return matches ? op.input.new : undefined;
      return matches ? undefined : state;
    }
  }
}

export function stateKey(state: RegisterState): string {
  return state === null ? "null" : typeof state === "number" ? `n${state}` : `s${state}`;
}

function show(v: RegisterState): string {
  return typeof v === "string" ? JSON.stringify(v) : String(v);
}

export function describeState(state: RegisterState): string {
  return show(state);
}

/** One line: `client 3: cas("a" → "b") → ok   [12 ms, 15 ms]`. */
export function describeOperation(op: Operation): string {
  const unknown = outcomeUnknown(op);
  let what: string;
  switch (op.kind) {
    case "read":
      what = `read() → ${unknown ? "?" : show(op.output)}`;
      break;
    case "write":
      what = `write(${show(op.input)})${unknown ? " → ?" : ""}`;
      break;
    case "cas":
      what = `cas(${show(op.input.expected)} → ${show(op.input.new)}) → ${unknown ? "?" : op.output === true ? "ok" : "failed"}`;
      break;
  }
  const end = unknown ? "outcome unknown" : `${op.returnMs} ms`;
  return `client ${op.clientId}: ${what}   [${op.callMs} ms, ${end}]`;
}
