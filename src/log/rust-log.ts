// RUST_LOG directives with env_logger's semantics: comma-separated `target=level`; a bare
// level sets the default; a bare target enables every level for it; `off` is a level; the
// directive with the longest matching target wins. Targets match whole `::` segments, so
// `tensor_chain::raft` covers `tensor_chain::raft::log` but not `tensor_chain::raftx`.
//
// Where svc departs from env_logger, on purpose: env_logger shows only errors when RUST_LOG is
// unset, and nothing for unnamed targets when it lists only targets. An svc operator must see
// startup and recovery lines (recovery, replay, caught_up) without configuring anything, and
// narrowing in on one module must not hide errors elsewhere; so the default is `info` unless
// a bare level says otherwise (`off,tensor_chain::raft=trace` shows raft alone).

import type { LogLevel } from "../util/index.ts";

export type LevelFilter = LogLevel | "off";

export interface Directive {
  /** undefined for a bare level: the default for every target. */
  readonly target: string | undefined;
  readonly level: LevelFilter;
}

export interface RustLogProblem {
  readonly directive: string;
  readonly message: string;
}

export const DEFAULT_LEVEL: LevelFilter = "info";

/** 0 is off; a message at level L is written when LEVEL_RANK[L] <= the target's rank. */
export const LEVEL_RANK: Readonly<Record<LevelFilter, number>> = { off: 0, error: 1, warn: 2, info: 3, debug: 4, trace: 5 };

const LEVELS: ReadonlySet<string> = new Set(Object.keys(LEVEL_RANK));
const TARGET = /^[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*$/;

function parseLevel(text: string): LevelFilter | undefined {
  const lower = text.toLowerCase();
  return LEVELS.has(lower) ? (lower as LevelFilter) : undefined;
}

/**
 * Parses a RUST_LOG value. Bad directives are reported and left out; the rest still apply.
 * A later directive for the same target replaces an earlier one, as in env_logger.
 */
export function parseRustLog(spec: string | undefined): { directives: Directive[]; problems: RustLogProblem[] } {
  const byTarget = new Map<string | undefined, Directive>();
  const problems: RustLogProblem[] = [];
  for (const raw of (spec ?? "").split(",")) {
    const part = raw.trim();
    if (part === "") continue;
    if (part.includes("/")) {
      problems.push({ directive: part, message: "regular-expression filters (/...) are not supported" });
      continue;
    }
    const pieces = part.split("=");
    if (pieces.length > 2) {
      problems.push({ directive: part, message: "expected target=level" });
      continue;
    }
    const [first = "", second] = pieces.map((p) => p.trim());
    if (second === undefined) {
      const level = parseLevel(first);
      if (level !== undefined) byTarget.set(undefined, { target: undefined, level });
      else if (TARGET.test(first)) byTarget.set(first, { target: first, level: "trace" });
      else problems.push({ directive: part, message: "neither a level (error, warn, info, debug, trace, off) nor a target such as tensor_chain::raft" });
      continue;
    }
    if (!TARGET.test(first)) {
      problems.push({ directive: part, message: `${JSON.stringify(first)} is not a target such as tensor_chain::raft` });
      continue;
    }
    const level = parseLevel(second);
    if (level === undefined) {
      problems.push({ directive: part, message: `${JSON.stringify(second)} is not a level (error, warn, info, debug, trace, off)` });
      continue;
    }
    byTarget.set(first, { target: first, level });
  }
  return { directives: [...byTarget.values()], problems };
}

/** The most verbose level written for `target`: the longest matching directive, else the default. */
export function levelFor(target: string, directives: readonly Directive[]): LevelFilter {
  let level: LevelFilter = DEFAULT_LEVEL;
  /** Length of the longest target that matched so far; null while only defaults applied. */
  let matchedTargetChars: number | null = null;
  for (const directive of directives) {
    if (directive.target === undefined) {
      if (matchedTargetChars === null) level = directive.level;
      continue;
    }
    const name = directive.target;
    const matches = target === name || target.startsWith(`${name}::`);
    if (matches && (matchedTargetChars === null || name.length > matchedTargetChars)) {
      level = directive.level;
      matchedTargetChars = name.length;
    }
  }
  return level;
}
