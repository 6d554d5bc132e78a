// Always-on assertions. A failed assertion is a bug in svc, never an input error:
// it throws AssertionError, which the process treats as fatal.

export class AssertionError extends Error {
  override name = "AssertionError";
}

/** `why` may be a function where its text would be built on a hot path: it is called only on failure. */
export function assert(condition: unknown, why: string | (() => string)): asserts condition {
  if (!condition) throw new AssertionError(`assertion failed: ${typeof why === "string" ? why : why()}`);
}

export function assertNever(value: never, why = "unexpected variant"): never {
  throw new AssertionError(`assertion failed: ${why}: ${JSON.stringify(value)}`);
}
