// Exit codes and the one place where an error becomes what the operator sees.

import { SvcError, errorMessage } from "../util/index.ts";

export const ExitCode = {
  ok: 0,
  /** The command ran and failed (node unreachable, check found damage, I/O error). */
  failure: 1,
  /** The command line or the configuration is wrong; nothing was done. */
  usage: 2,
} as const;

/** An error that ends a command with a given exit code after printing its message. */
export class CliExit extends Error {
  constructor(readonly exitCode: number, message: string) {
    super(message);
  }
}

export function usageError(message: string): CliExit {
  return new CliExit(ExitCode.usage, message);
}

/** Print an error for a terminal and return the exit code that fits it. */
export function reportError(e: unknown): number {
  if (e instanceof CliExit) {
    if (e.message !== "") process.stderr.write(`svc: ${e.message}\n`);
    return e.exitCode;
  }
  if (e instanceof SvcError) {
    process.stderr.write(`svc: ${e.describe()}\n`);
    // A wrong command line or configuration is a CliExit with ExitCode.usage, raised before
    // anything runs; an SvcError is the command failing.
    return ExitCode.failure;
  }
  if (e instanceof Error && e.name === "CLIError") {
    // citty's own complaints about the command line: unknown command, missing argument.
    process.stderr.write(`svc: ${stripAnsi(e.message)} (see --help)\n`);
    return ExitCode.usage;
  }
  process.stderr.write(`svc: ${errorMessage(e)}\n`);
  if (e instanceof Error && e.stack !== undefined && process.env.SVC_DEBUG === "1") process.stderr.write(`${e.stack}\n`);
  return ExitCode.failure;
}

function stripAnsi(text: string): string {
  // biome-ignore lint: matching the escape character is the point.
  return text.replace(/\u001b\[[0-9;]*m/g, "");
}
