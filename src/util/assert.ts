// Always-on assertions. A failed assertion is a bug in svc, never an input error:
// it throws AssertionError, which the process treats as fatal.

export class AssertionError extends Error {
  override name = "AssertionError";
}

export function assert(condition: unknown, why: string): asserts condition {
  if (!condition) throw new AssertionError(`assertion failed: ${why}`);
}

export function assertNever(value: never, why = "unexpected variant"): never {
  throw new AssertionError(`assertion failed: ${why}: ${JSON.stringify(value)}`);
}
