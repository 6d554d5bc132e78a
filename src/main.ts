#!/usr/bin/env bun
// Entry point: the binary invoked as `svc-admin` acts as `svc admin`; otherwise run the
// root command. Every error reaches reportError() here, which picks the exit code.

// First: the cli module sets NO_COLOR for output that is not a terminal before citty loads.
import { checkedArgs, reportError, rootCommand, runSqlProcessIfAsked } from "./cli/index.ts";
import { basename } from "node:path";
import { renderUsage, runCommand, type CommandDef } from "citty";

function invokedArgs(): string[] {
  const args = process.argv.slice(2);
  const name = basename(process.argv0);
  return name === "svc-admin" ? ["admin", ...args] : args;
}

/** The command that `args` names, for --help at any depth. */
async function commandFor(args: string[]): Promise<[CommandDef, CommandDef | undefined]> {
  let cmd: CommandDef = rootCommand as CommandDef;
  let parent: CommandDef | undefined;
  for (const arg of args) {
    if (arg.startsWith("-")) continue;
    const subs = typeof cmd.subCommands === "function" ? await cmd.subCommands() : await cmd.subCommands;
    const next = subs?.[arg];
    if (next === undefined) break;
    parent = cmd;
    cmd = (typeof next === "function" ? await next() : await next) as CommandDef;
  }
  return [cmd, parent];
}

// Output piped into `head` and closed early is not an error of ours.
process.stdout.on("error", (e: NodeJS.ErrnoException) => {
  if (e.code === "EPIPE") process.exit(0);
  throw e;
});

const args = invokedArgs();
try {
  if (runSqlProcessIfAsked()) {
    // A node's SQL process: it serves the node until the node closes its channel.
  } else if (args.includes("--help") || args.includes("-h")) {
    const [cmd, parent] = await commandFor(args);
    process.stdout.write(`${await renderUsage(cmd, parent)}\n`);
  } else {
    await runCommand(rootCommand, { rawArgs: await checkedArgs(rootCommand as CommandDef, args) });
  }
} catch (e) {
  process.exitCode = reportError(e);
  // What a failed command leaves open (a node's peer listener, timers, child processes) must
  // not keep the process alive: holding the data directory's lock and its ports, a node that
  // failed to start would look to systemd like one still running. Output in flight drains first.
  setTimeout(() => process.exit(), 1000).unref();
}
