// Logging for svc: consola to stderr, filtered per target by RUST_LOG, text or JSON lines.

export { createLogger, ROOT_TARGET, type LoggerOptions, type LogStream } from "./logger.ts";
export { parseRustLog, levelFor, DEFAULT_LEVEL, type Directive, type LevelFilter, type RustLogProblem } from "./rust-log.ts";
export type { LogFormat } from "./_format.ts";
