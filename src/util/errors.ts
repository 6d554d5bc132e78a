// Errors an operator or client can see. Each carries a stable code, a message that
// says what happened, and a hint that says what to do. Modules own their codes;
// mapping to HTTP statuses and exit codes happens only in http/ and cli/.

export class SvcError extends Error {
  override name = "SvcError";
  readonly code: string;
  readonly hint: string | undefined;
  readonly details: Readonly<Record<string, unknown>>;

  constructor(code: string, message: string, options: { hint?: string; details?: Record<string, unknown>; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.hint = options.hint;
    this.details = options.details ?? {};
  }

  /** One paragraph for a log line or a terminal: what happened, then what to do. */
  describe(): string {
    return this.hint === undefined ? this.message : `${this.message}\n  → ${this.hint}`;
  }
}

export function isSvcError(e: unknown, code?: string): e is SvcError {
  return e instanceof SvcError && (code === undefined || e.code === code);
}

/** Message of anything thrown, for logs. */
export function errorMessage(e: unknown): string {
  if (e instanceof Error) return e.message;
  return String(e);
}
