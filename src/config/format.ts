// How problems and a valid config are shown to an operator (svc --validate, svc serve).

import type { Config, ConfigProblem } from "./types.ts";

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

/** One line for a valid file. */
export function summarizeConfig(config: Config): string {
  const members = config.cluster.members.length;
  return (
    `node_id=${config.nodeId} data_dir=${config.dataDir} ` +
    `client=${config.listen.client.raw} admin=${config.listen.admin.raw} peer=${config.listen.peer.raw} ` +
    `members=${members} bootstrap=${config.cluster.bootstrap}`
  );
}
