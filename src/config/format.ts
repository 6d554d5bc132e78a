// How problems and a valid config are shown to an operator (svc --validate, svc serve).

import type { Config, ConfigProblem, ConfigResult } from "./types.ts";

/** `config.toml:12:3: cluster.members[1].peer: message`; parts that are unknown are left out. */
export function formatProblem(problem: ConfigProblem, sourceName: string): string {
  let where = sourceName;
  if (problem.line !== undefined) {
    where += `:${problem.line}`;
    if (problem.column !== undefined) where += `:${problem.column}`;
  }
  const key = problem.keyPath === "" ? "" : `${problem.keyPath}: `;
  return `${where}: ${key}${problem.message}`;
}

/** One line per problem, in file order (problems without a line first). */
export function formatProblems(problems: readonly ConfigProblem[], sourceName: string): string {
  const sorted = [...problems].sort((a, b) => (a.line ?? 0) - (b.line ?? 0) || (a.column ?? 0) - (b.column ?? 0));
  return sorted.map((p) => formatProblem(p, sourceName)).join("\n");
}

/**
 * What a file that loads holds and the node starts with, but an operator should hear of: its own
 * member entry that only NAT or a port mapping explains, and [backup] locations the backups will
 * refuse. --validate prints them, serve logs them at start.
 */
export function configWarnings(result: ConfigResult & { ok: true }): readonly ConfigProblem[] {
  return [...(result.selfEntryWarnings ?? []), ...(result.warnings ?? [])];
}

/** One line for a valid file. */
export function summarizeConfig(config: Config): string {
  const members = config.cluster.members.length;
  return (
    `node_id=${config.nodeId} data_dir=${config.dataDir} ` +
    `client=${config.listen.client.raw} admin=${config.listen.admin.raw} peer=${config.listen.peer.raw} ` +
    `members=${members} bootstrap=${config.cluster.bootstrap}`
  );
}
