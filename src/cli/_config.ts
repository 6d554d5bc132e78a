// Loading the configuration for a command: a file given with --config, or the embedded
// default (one node on loopback, data in ./svc-data). Problems end the command with exit 2.

import { defaultConfig, formatProblems, loadConfigFile, type Config } from "../config/index.ts";
import { CliExit, ExitCode } from "./_exit.ts";

export function loadConfigOrExit(path: string | undefined): Config {
  if (path === undefined || path === "") return defaultConfig();
  const result = loadConfigFile(path);
  if (result.ok) return result.config;
  throw new CliExit(
    ExitCode.usage,
    `${path} is not a valid configuration (${result.problems.length} problem${result.problems.length === 1 ? "" : "s"}):\n${formatProblems(result.problems, path)}\n(check it with \`svc --config ${path} --validate\`)`,
  );
}
