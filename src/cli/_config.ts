// Loading the configuration for a command: a file given with --config, or the embedded
// default (one node on loopback, data in ./svc-data). Problems end the command with exit 2.
// Offline commands (init-cluster, wal-repair, verify-checksums --data-dir, cleanup-snapshots)
// find their data directory the same way: --data-dir, else data_dir in --config, else data_dir
// in the installed configuration, /etc/svc/config.toml (SVC_CONFIG names another file).

import { existsSync, statSync } from "node:fs";
import { defaultConfig, formatProblems, loadConfigFile, type Config } from "../config/index.ts";
import { CliExit, ExitCode, usageError } from "./_exit.ts";

/** Where install.sh puts the configuration (SPEC §2.1). */
export const installedConfigPath = "/etc/svc/config.toml";

/** The configuration an installed node runs with: SVC_CONFIG when set, else /etc/svc/config.toml. */
export function defaultConfigPath(): string {
  const fromEnv = process.env.SVC_CONFIG;
  return fromEnv !== undefined && fromEnv !== "" ? fromEnv : installedConfigPath;
}

export function loadConfigOrExit(path: string | undefined): Config {
  if (path === undefined || path === "") return defaultConfig();
  if (!existsSync(path)) {
    throw new CliExit(ExitCode.usage, `no configuration file at ${path}\n  → give the node's configuration with --config FILE (install.sh writes ${installedConfigPath})`);
  }
  const result = loadConfigFile(path);
  if (result.ok) return result.config;
  throw new CliExit(
    ExitCode.usage,
    `${path} is not a valid configuration (${result.problems.length} problem${result.problems.length === 1 ? "" : "s"}):\n${formatProblems(result.problems, path)}\n(check it with \`svc --config ${path} --validate\`)`,
  );
}

/**
 * The data directory of a stopped node for an offline command: --data-dir, else data_dir in
 * --config, else data_dir in the default configuration. A path that does not exist ends the
 * command with a message naming it and what to do, before anything is touched.
 */
export function offlineDataDir(args: { dataDir?: string | undefined; config?: string | undefined }): string {
  const given = (v: string | undefined): v is string => v !== undefined && v !== "";
  if (given(args.dataDir) && given(args.config)) throw usageError("give --data-dir DIR or --config FILE, not both");
  if (given(args.dataDir)) {
    requireDir(args.dataDir, "--data-dir");
    return args.dataDir;
  }
  const path = given(args.config) ? args.config : defaultConfigPath();
  if (!given(args.config) && !existsSync(path)) {
    throw usageError(`no data directory given and no configuration at ${path} to take it from\n  → pass --data-dir DIR (the stopped node's data_dir) or --config FILE`);
  }
  const dataDir = loadConfigOrExit(path).dataDir;
  requireDir(dataDir, `data_dir in ${path}`);
  return dataDir;
}

function requireDir(dir: string, from: string): void {
  const st = statSync(dir, { throwIfNoEntry: false });
  if (st === undefined) throw usageError(`the data directory ${dir} (${from}) does not exist\n  → check the path: it is the stopped node's data_dir (see its configuration)`);
  if (!st.isDirectory()) throw usageError(`${dir} (${from}) is not a directory\n  → give the stopped node's data directory`);
}
