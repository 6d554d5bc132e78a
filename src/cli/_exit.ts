// Exit codes and the one place where an error becomes what the operator sees.

import { DiskFullError, isDiskFullError } from "../io/index.ts";
import { SvcError, errorMessage } from "../util/index.ts";

export const ExitCode = {
  ok: 0,
  /** The command ran and failed (node unreachable, check found damage, I/O error). */
  failure: 1,
  /** The command line or the configuration is wrong; nothing was done. */
  usage: 2,
  /**
   * `serve` only: the node cannot start, or go on, until the operator acts on what the message
   * names (damaged or foreign Raft state, a gap in the log, a restore whose backup is damaged,
   * files it may not use). Starting it again unchanged fails the same way, so the unit
   * install.sh writes does not restart it (RestartPreventExitStatus).
   */
  needsOperator: 3,
} as const;

/**
 * The errors after which a restart alone cannot help: each names what to repair in the data
 * directory or the configuration. Everything else a node stops on may pass, and a restart is
 * what fixes it, so those exit 1: a failing or full disk, a port or data directory still held
 * by a process going away, and the TLS, token and gossip key files, which another unit or a
 * rotation may still be writing when the node starts (a half-rotated pair reads as a key that
 * is not the certificate's).
 */
const needsOperatorCodes: ReadonlySet<string> = new Set([
  "LOG_GAP", "HISTORY_DIVERGED", "RAFT_STATE_INVALID", "HARDSTATE_CORRUPT", "WAL_CORRUPT", "RESTORE_REFUSED", "STORE_UNRECOVERABLE", "DATA_GONE",
  "DATA_DIR_NOT_WRITABLE", "DATA_DIR_WRONG_OWNER", "DATA_DIR_INVALID", "TRANSPORT_BAD_ADDRESS", "TRANSPORT_BAD_OPTION",
  // A port this user may not bind: a restart binds it no better (an address not yet on the
  // host, ADDRESS_NOT_LOCAL, may be one whose interface comes up late: that one exits 1).
  "PORT_NOT_PERMITTED",
]);

/** The exit code of `serve` for the error that stopped the node (at start, or a fatal one later). */
export function serveExitCode(e: SvcError): number {
  return needsOperatorCodes.has(e.code) ? ExitCode.needsOperator : ExitCode.failure;
}

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
  if (isDiskFullError(e)) {
    // What ran out is said in the message; what to do is the same for every command.
    const where = e instanceof DiskFullError ? `the file system holding ${e.path} (df -h ${e.path})` : "the file system it was writing to";
    process.stderr.write(`  → free space on ${where}, then run the command again\n`);
  }
  if (e instanceof Error && e.stack !== undefined && process.env.SVC_DEBUG === "1") process.stderr.write(`${e.stack}\n`);
  return ExitCode.failure;
}

function stripAnsi(text: string): string {
  // biome-ignore lint: matching the escape character is the point.
  return text.replace(/\u001b\[[0-9;]*m/g, "");
}
