#!/usr/bin/env bun
// Entry point: the binary invoked as `svc-admin` acts as `svc admin`; otherwise run the
// root command. Every error reaches reportError() here, which picks the exit code.

import { basename } from "node:path";
import { runCommand } from "citty";
import { rootCommand } from "./cli/root.ts";
import { reportError } from "./cli/_exit.ts";

function invokedArgs(): string[] {
  const args = process.argv.slice(2);
  const name = basename(process.argv0);
  return name === "svc-admin" ? ["admin", ...args] : args;
}

try {
  await runCommand(rootCommand, { rawArgs: invokedArgs() });
} catch (e) {
  process.exitCode = reportError(e);
}
