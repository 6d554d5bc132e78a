// The command line's surface for main.ts: the root command and the one place that turns an
// error into what the operator sees and an exit code.

// First, before citty loads: output that is not a terminal gets no colour codes.
import "./_plain-output.ts";

export { rootCommand } from "./root.ts";
export { reportError } from "./_exit.ts";
export { runSqlProcessIfAsked } from "./sql-process.ts";
export { checkedArgs } from "./_strict-args.ts";
