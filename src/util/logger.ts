// The logging interface the rest of svc writes to. src/log implements it on consola with
// RUST_LOG filtering; the pure core and tests get a silent or capturing one.

export type LogLevel = "error" | "warn" | "info" | "debug" | "trace";

export interface Logger {
  error(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  debug(message: string, fields?: Record<string, unknown>): void;
  trace(message: string, fields?: Record<string, unknown>): void;
  /** Whether a message at this level would be written (to skip building costly fields). */
  enabled(level: LogLevel): boolean;
  /** A logger for a sub-target, e.g. child("raft") of tensor_chain gives tensor_chain::raft. */
  child(module: string): Logger;
}

export const silentLogger: Logger = {
  error() {}, warn() {}, info() {}, debug() {}, trace() {},
  enabled: () => false,
  child: () => silentLogger,
};
