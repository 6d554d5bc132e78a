// The Logger svc writes to: consola carries records to stderr through one reporter that
// renders our text or JSON line; which records are written is decided here, per target,
// once when a logger is made, so a disabled call costs one comparison.

import { createConsola, type ConsolaInstance, type LogObject } from "consola/core";
import type { Logger, LogLevel } from "../util/index.ts";
import { formatJson, formatText, type Fields, type LogFormat } from "./_format.ts";
import { LEVEL_RANK, levelFor, parseRustLog, type Directive } from "./rust-log.ts";

export const ROOT_TARGET = "tensor_chain";

export interface LogStream {
  write(chunk: string): unknown;
}

export interface LoggerOptions {
  /** Where RUST_LOG and SVC_LOG_FORMAT are read; process.env by default. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Overrides SVC_LOG_FORMAT. */
  readonly format?: LogFormat;
  /** process.stderr by default. */
  readonly stream?: LogStream;
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const env = options.env ?? process.env;
  const stream = options.stream ?? process.stderr;
  const formatSetting = env["SVC_LOG_FORMAT"];
  const format: LogFormat = options.format ?? (formatSetting === "json" ? "json" : "text");
  const render = format === "json" ? formatJson : formatText;

  const consola = createConsola({
    // Filtering is ours; consola passes everything through. No throttling: a repeated line
    // is still an event an operator may count, and throttling would hold lines back on a timer.
    level: 5,
    throttle: 0,
    reporters: [
      {
        log(record: LogObject) {
          const [target, message, fields] = record.args as [string, string, Fields | undefined];
          const level = record.type as LogLevel;
          stream.write(render(record.date, level, target, message, fields) + "\n");
        },
      },
    ],
  });

  const { directives, problems } = parseRustLog(env["RUST_LOG"]);
  const root = new TargetLogger(consola, directives, ROOT_TARGET);
  // Written whatever the filter says: a directive that was meant to change what is logged
  // and silently did nothing is worse than one extra line.
  const warnings = new TargetLogger(consola, [], `${ROOT_TARGET}::log`);
  for (const problem of problems) {
    warnings.write("warn", `ignoring RUST_LOG directive ${JSON.stringify(problem.directive)}: ${problem.message}`, undefined);
  }
  if (formatSetting !== undefined && formatSetting !== "json" && formatSetting !== "text" && options.format === undefined) {
    warnings.write("warn", `ignoring SVC_LOG_FORMAT=${JSON.stringify(formatSetting)}: expected "text" or "json"`, undefined);
  }
  return root;
}

class TargetLogger implements Logger {
  /** The most verbose rank written for this target (LEVEL_RANK); 0 writes nothing. */
  private readonly rankMax: number;

  constructor(private readonly consola: ConsolaInstance, private readonly directives: readonly Directive[], readonly target: string) {
    this.rankMax = LEVEL_RANK[levelFor(target, directives)];
  }

  enabled(level: LogLevel): boolean {
    return LEVEL_RANK[level] <= this.rankMax;
  }

  error(message: string, fields?: Record<string, unknown>): void {
    if (LEVEL_RANK.error <= this.rankMax) this.write("error", message, fields);
  }
  warn(message: string, fields?: Record<string, unknown>): void {
    if (LEVEL_RANK.warn <= this.rankMax) this.write("warn", message, fields);
  }
  info(message: string, fields?: Record<string, unknown>): void {
    if (LEVEL_RANK.info <= this.rankMax) this.write("info", message, fields);
  }
  debug(message: string, fields?: Record<string, unknown>): void {
    if (LEVEL_RANK.debug <= this.rankMax) this.write("debug", message, fields);
  }
  trace(message: string, fields?: Record<string, unknown>): void {
    if (LEVEL_RANK.trace <= this.rankMax) this.write("trace", message, fields);
  }

  child(module: string): Logger {
    return new TargetLogger(this.consola, this.directives, `${this.target}::${module}`);
  }

  write(level: LogLevel, message: string, fields: Fields | undefined): void {
    this.consola[level](this.target, message, fields);
  }
}
