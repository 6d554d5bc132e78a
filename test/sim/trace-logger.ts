// A Logger that prints every core log line with its node, for replaying one seed.

import type { Logger } from "../../src/util/index.ts";

export function consoleLogger(prefix = ""): Logger {
  const line = (level: string) => (message: string, fields?: Record<string, unknown>) =>
    console.log(`${level} ${prefix} ${message}${fields === undefined ? "" : ` ${JSON.stringify(fields)}`}`);
  return {
    error: line("E"),
    warn: line("W"),
    info: line("I"),
    debug: line("D"),
    trace: line("T"),
    enabled: () => true,
    child: (module: string) => consoleLogger(prefix === "" ? module : `${prefix}::${module}`),
  };
}
