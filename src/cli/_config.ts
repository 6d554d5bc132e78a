// Loading the configuration for a command: a file given with --config, else the file the
// environment variable SVC_CONFIG names, else the embedded default (one node on loopback, data
// in ./svc-data). Problems end the command with exit 2 (serve: 1 when every one is a file of
// [tls], [auth] or [gossip] as it is now, which a restart may find fixed); the warnings
// --validate prints are handed to serve, which logs them.
// Offline commands (init-cluster, wal-repair, wal-replay, verify-checksums --data-dir,
// cleanup-snapshots) find their data directory the same way: --data-dir, else data_dir in
// --config, else data_dir in the installed configuration, /etc/svc/config.toml (SVC_CONFIG names
// another file). Before touching it they refuse a directory that is not a svc data directory
// (init-cluster also takes a new or empty one).

import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { configWarnings, defaultConfig, formatProblem, formatProblems, loadConfigFile, type Config } from "../config/index.ts";
import { CliExit, ExitCode, usageError } from "./_exit.ts";

/** Where install.sh puts the configuration (SPEC §2.1). */
export const installedConfigPath = "/etc/svc/config.toml";

/** The configuration an installed node runs with: SVC_CONFIG when set, else /etc/svc/config.toml. */
export function defaultConfigPath(): string {
  const fromEnv = process.env.SVC_CONFIG;
  return fromEnv !== undefined && fromEnv !== "" ? fromEnv : installedConfigPath;
}

/**
 * The configuration file a command was pointed at: --config, else SVC_CONFIG, else none (the
 * embedded default; the online commands then ask http://127.0.0.1:9090).
 */
export function givenConfigPath(flag: string | undefined): { path: string; from: "--config" | "SVC_CONFIG" } | null {
  if (flag !== undefined && flag !== "") return { path: flag, from: "--config" };
  const fromEnv = process.env.SVC_CONFIG;
  return fromEnv !== undefined && fromEnv !== "" ? { path: fromEnv, from: "SVC_CONFIG" } : null;
}

/**
 * `from` names where the path came from (--config, SVC_CONFIG) for the message when it is missing.
 * `secretsFilesExit`: the exit code when every problem is with a file of [tls], [auth] or
 * [gossip] (missing, readable by others, not what it should hold) rather than the text.
 */
export function loadConfigOrExit(path: string | undefined, from?: string, options: { secretsFilesExit?: number } = {}): Config {
  return loadConfigWithWarningsOrExit(path, from, options).config;
}

/**
 * loadConfigOrExit, and the file's warnings (configWarnings) as lines naming the file, line and
 * key, for serve to log: the node starts with them.
 */
export function loadConfigWithWarningsOrExit(
  path: string | undefined, from?: string, options: { secretsFilesExit?: number } = {},
): { config: Config; warnings: readonly string[] } {
  if (path === undefined || path === "") return { config: defaultConfig(), warnings: [] };
  if (!existsSync(path)) {
    const fix = from === "SVC_CONFIG"
      ? `set SVC_CONFIG to the node's configuration file, or unset it; --config FILE also takes its place (install.sh writes ${installedConfigPath})`
      : `give the node's configuration with --config FILE (install.sh writes ${installedConfigPath})`;
    throw new CliExit(ExitCode.usage, `no configuration file at ${path}${from === undefined ? "" : ` (${from})`}\n  → ${fix}`);
  }
  const result = loadConfigFile(path);
  if (result.ok) return { config: result.config, warnings: configWarnings(result).map((w) => formatProblem(w, path)) };
  const filesOnly = result.problems.every((p) => p.secretsFile === true);
  throw new CliExit(
    filesOnly ? (options.secretsFilesExit ?? ExitCode.usage) : ExitCode.usage,
    `${path} is not a valid configuration (${result.problems.length} problem${result.problems.length === 1 ? "" : "s"}):\n${formatProblems(result.problems, path)}\n(check it with \`svc --config ${path} --validate\`)`,
  );
}

/**
 * The data directory of a stopped node for an offline command: --data-dir, else data_dir in
 * --config, else data_dir in the default configuration. A path that does not exist, or is not
 * a svc data directory, ends the command with a message naming it and what to do, before
 * anything is touched.
 */
export function offlineDataDir(args: { dataDir?: string | undefined; config?: string | undefined }): string {
  const given = (v: string | undefined): v is string => v !== undefined && v !== "";
  if (given(args.dataDir) && given(args.config)) throw usageError("give --data-dir DIR or --config FILE, not both");
  if (given(args.dataDir)) {
    requireDataDir(args.dataDir, "--data-dir");
    return args.dataDir;
  }
  const path = given(args.config) ? args.config : defaultConfigPath();
  if (!given(args.config) && !existsSync(path)) {
    throw usageError(`no data directory given and no configuration at ${path} to take it from\n  → pass --data-dir DIR (the stopped node's data_dir) or --config FILE`);
  }
  const dataDir = loadConfigOrExit(path).dataDir;
  requireDataDir(dataDir, `data_dir in ${path}`);
  return dataDir;
}

/** Whether `dir` holds raft/ or store/: every node makes both when it first starts, and a restore copies them back. */
function holdsSvcData(dir: string): boolean {
  return ["raft", "store"].some((name) => statSync(join(dir, name), { throwIfNoEntry: false })?.isDirectory() === true);
}

/** Top-level entries a directory may hold and still be a fine place for a new data directory. */
const harmlessInNewDataDir = new Set(["lost+found", "LOCK", "BALLAST"]);

/**
 * An existing svc data directory, for the offline commands that read or repair one: it holds
 * raft/ or store/. Anything else (/etc, an empty directory, a typo in data_dir) is refused, so
 * that a tool pointed at the wrong place neither writes there nor reports that all is well.
 * `from` says where the path came from (--data-dir, data_dir in FILE).
 */
export function requireDataDir(dir: string, from: string, options: { orFresh?: boolean } = {}): void {
  requireDir(dir, from);
  if (holdsSvcData(dir)) return;
  // A data directory install.sh made, whose node has not started yet: nothing in it to act on.
  if (options.orFresh === true && readdirSync(dir).every((name) => harmlessInNewDataDir.has(name))) return;
  throw usageError(
    `${dir} (${from}) is not a svc data directory: it holds no raft/ or store/, which a node makes on its first start and a restore copies back\n` +
    "  → point it at the node's data directory (data_dir in the node's configuration, e.g. /var/lib/svc); to restore a backup, copy its raft/ and store/ there first",
  );
}

/**
 * A place init-cluster may make a new data directory in: one that does not exist yet, an empty
 * one (a fresh file system's lost+found aside), or an existing svc data directory. A directory
 * holding other files is somebody else's: refused before anything is written into it.
 */
export function requireNewOrDataDir(dir: string, from: string): void {
  const st = statSync(dir, { throwIfNoEntry: false });
  if (st === undefined) return;
  if (!st.isDirectory()) throw usageError(`${dir} (${from}) is not a directory\n  → set data_dir to the directory the node keeps its data in (e.g. /var/lib/svc)`);
  if (holdsSvcData(dir)) return;
  const others = readdirSync(dir).filter((name) => !harmlessInNewDataDir.has(name)).sort();
  if (others.length === 0) return;
  const shown = others.slice(0, 5).join(", ") + (others.length > 5 ? `, … (${others.length} in all)` : "");
  throw usageError(
    `${dir} (${from}) is not a svc data directory: it holds no raft/ or store/ but other files (${shown})\n` +
    "  → set data_dir to an empty or new directory of its own (e.g. /var/lib/svc), or to the directory a restored backup's raft/ and store/ are in",
  );
}

function requireDir(dir: string, from: string): void {
  const st = statSync(dir, { throwIfNoEntry: false });
  if (st === undefined) throw usageError(`the data directory ${dir} (${from}) does not exist\n  → check the path: it is the stopped node's data_dir (see its configuration)`);
  if (!st.isDirectory()) throw usageError(`${dir} (${from}) is not a directory\n  → give the stopped node's data directory`);
}
