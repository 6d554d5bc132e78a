// The admin commands' HTTP client for a node's admin port. Errors come back as the node's
// {"error": {code, message, hint}} and are shown as such; an unreachable node says so. A
// NOT_LEADER answer that names the leader's admin address is followed there, once.

import { localDialAddress, type Config } from "../config/index.ts";
import { givenConfigPath, loadConfigOrExit } from "./_config.ts";
import { credentialHeaders, credentialTls, nodeCredentials, useCredentials } from "./_credentials.ts";
import { CliExit, ExitCode, usageError } from "./_exit.ts";
import { parseJson64, stringifyJson64 } from "../util/index.ts";

export const nodeArgs = {
  node: { type: "string", description: "Admin URL of the node (default: the admin address in --config or SVC_CONFIG's file, else http://127.0.0.1:9090)", valueHint: "URL" },
  config: { type: "string", description: "Configuration file to take the node's admin address, token ([auth] token_file) and CA ([tls] ca_file) from (default: the file SVC_CONFIG names, if set)", valueHint: "FILE" },
  json: { type: "boolean", description: "Print machine-readable JSON" },
  "token-file": { type: "string", description: "File holding the token to send (default: SVC_TOKEN, else [auth] token_file in --config or SVC_CONFIG's file)", valueHint: "FILE" },
  cacert: { type: "string", description: "CA certificate (PEM) to trust for an https:// node (default: [tls] ca_file in --config or SVC_CONFIG's file)", valueHint: "FILE" },
} as const;

export interface NodeArgs {
  node?: string | undefined;
  config?: string | undefined;
  "token-file"?: string | undefined;
  cacert?: string | undefined;
}

/** The node a command talks to, from --node, else --config, else the file SVC_CONFIG names. */
export function nodeUrl(args: NodeArgs): string {
  const given = givenConfigPath(args.config);
  return nodeUrlWith(args, given === null ? null : loadConfigOrExit(given.path, given.from));
}

/** As nodeUrl, with the configuration already loaded (null: none). */
export function nodeUrlWith(args: Omit<NodeArgs, "config">, config: Config | null): string {
  useCredentials(nodeCredentials(args, config));
  if (args.node !== undefined && args.node !== "") return adminBaseUrl(args.node);
  if (config !== null) return `${config.tls == null ? "http" : "https"}://${localDialAddress(config.listen.admin)}`;
  return "http://127.0.0.1:9090";
}

const nodeUrlExample = "e.g. --node http://10.0.0.1:9090 (https:// when the node has [tls])";

/**
 * --node as the base of the admin routes: an http or https URL (a path in it stays, as the
 * prefix of a proxy). What fetch would refuse, or send somewhere else than meant (a query or
 * fragment swallowing the route's path), is the command line's mistake, said as such rather
 * than as a node that cannot be reached.
 */
export function adminBaseUrl(text: string): string {
  const given = text.trim();
  if (/^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):\d+$/.test(given)) {
    throw usageError(`--node ${given} has no scheme: write --node http://${given} (or https://${given} when the node has [tls])`);
  }
  let url: URL;
  try {
    url = new URL(given);
  } catch {
    throw usageError(`--node ${JSON.stringify(text)} is not a URL: give the node's admin address, ${nodeUrlExample}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw usageError(`--node takes an http:// or https:// URL, not ${url.protocol}//…: give the node's admin address, ${nodeUrlExample}`);
  }
  if (url.username !== "" || url.password !== "") {
    throw usageError("--node holds a user name or password, which svc admin does not send: give the token with --token-file FILE or SVC_TOKEN, and the URL without them");
  }
  if (url.search !== "" || url.hash !== "") {
    throw usageError(`--node ${url.origin}${url.pathname}${url.search}${url.hash} has a query or fragment, which would swallow the path of the admin route: give --node ${url.origin}${url.pathname.replace(/\/+$/, "")}`);
  }
  return `${url.origin}${url.pathname.replace(/\/+$/, "")}`;
}

export async function callNode(base: string, method: "GET" | "POST", path: string, body?: unknown, timeoutMs = 60_000): Promise<unknown> {
  try {
    return await callOnce(base, method, path, body, timeoutMs);
  } catch (e) {
    if (!(e instanceof NotLeaderAnswer)) throw e;
    // The node could not forward the request itself (the request went out once, and this is
    // its answer, so nothing was done there): ask the leader directly.
    const leader = `${base.startsWith("https:") ? "https" : "http"}://${e.leaderAdmin}`;
    process.stderr.write(`svc: ${base} is not the leader; asking the leader at ${leader}\n`);
    try {
      return await callOnce(leader, method, path, body, timeoutMs);
    } catch (again) {
      throw again instanceof NotLeaderAnswer ? again.exit : again;
    }
  }
}

/** No connection to the node's admin port: a command that also works without one can say so (withHint). */
export class NodeUnreachable extends CliExit {
  constructor(readonly base: string, readonly why: string, readonly hint = unreachableHint(why)) {
    super(ExitCode.failure, `cannot reach the node at ${base}: ${why}\n  → ${hint}`);
  }

  withHint(more: string): NodeUnreachable {
    return new NodeUnreachable(this.base, this.why, `${this.hint}; ${more}`);
  }
}

/** A NOT_LEADER answer naming the leader's admin address: callNode follows it. */
class NotLeaderAnswer extends Error {
  constructor(readonly leaderAdmin: string, readonly exit: CliExit) {
    super(exit.message);
  }
}

async function callOnce(base: string, method: "GET" | "POST", path: string, body: unknown, timeoutMs: number): Promise<unknown> {
  let response: Response;
  try {
    response = await fetch(`${base}${path}`, {
      method,
      headers: { ...credentialHeaders(), ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      ...credentialTls(),
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (e) {
    if (e instanceof Error && e.name === "TimeoutError") throw new CliExit(ExitCode.failure, noAnswerMessage(base, method, path, timeoutMs));
    const why = e instanceof Error ? e.message : String(e);
    throw new NodeUnreachable(base, why);
  }
  const text = await response.text();
  let parsed: unknown;
  try {
    // Integers beyond 2^53 in query results stay exact (see json64.ts).
    parsed = parseJson64(text);
  } catch {
    throw new CliExit(ExitCode.failure, `the node at ${base} answered ${response.status} with something that is not JSON: ${text.slice(0, 200)}`);
  }
  if (!response.ok) {
    const error = (parsed as { error?: { code?: string; message?: string; hint?: string; leader_admin?: unknown } }).error;
    const message = error?.message ?? `HTTP ${response.status}`;
    const exit = new CliExit(ExitCode.failure, `${message}${error?.code === undefined ? "" : ` [${error.code}]`}${error?.hint === undefined ? "" : `\n  → ${error.hint}`}`);
    if (error?.code === "NOT_LEADER" && typeof error.leader_admin === "string" && error.leader_admin !== "") throw new NotLeaderAnswer(error.leader_admin, exit);
    throw exit;
  }
  return parsed;
}

/** key: value lines for a flat object (nested values as JSON). */
export function printKeyValues(obj: Record<string, unknown>): void {
  const width = Math.max(...Object.keys(obj).map((k) => k.length));
  for (const [k, v] of Object.entries(obj)) {
    process.stdout.write(`${`${k}:`.padEnd(width + 2)}${typeof v === "object" && v !== null ? stringifyJson64(v) : String(v)}\n`);
  }
}

export function printJson(v: unknown): void {
  process.stdout.write(`${stringifyJson64(v, 2)}\n`);
}

/**
 * Text a client chose (a table's name, a row's value), shown on the operator's terminal: control
 * characters are written as escapes, so that none starts a line of its own or drives the
 * terminal (a table named "x\u001b[31m" recoloured the output, "a\nb" forged a line).
 */
export function terminalSafe(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, (c) => (c === "\n" ? "\\n" : c === "\t" ? "\\t" : `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`));
}

/** A plain text table: header, rule, rows; cells are JSON for non-strings, strings shown terminal-safe. */
export function printTable(columns: readonly string[], rows: readonly (readonly unknown[])[]): void {
  const cell = (v: unknown): string => (v === null ? "NULL" : typeof v === "string" ? terminalSafe(v) : stringifyJson64(v));
  const text = rows.map((r) => r.map(cell));
  const header = columns.map(terminalSafe);
  const widths = header.map((c, i) => Math.min(60, Math.max(c.length, ...text.map((r) => (r[i] ?? "").length))));
  const line = (cells: readonly string[]): string => cells.map((c, i) => c.slice(0, 60).padEnd(widths[i] ?? 0)).join(" | ").trimEnd();
  process.stdout.write(`${line(header)}\n${widths.map((w) => "-".repeat(w)).join("-+-")}\n`);
  for (const r of text) process.stdout.write(`${line(r)}\n`);
  process.stdout.write(`(${rows.length} row${rows.length === 1 ? "" : "s"})\n`);
}

/**
 * A node that took the connection but gave no answer in time (stopped, swapping, stuck) may
 * still act on what it was sent once it resumes: a pause-writes that timed out here paused
 * writes there. So an action is not reported as one that never arrived.
 */
function noAnswerMessage(base: string, method: "GET" | "POST", path: string, timeoutMs: number): string {
  const seconds = Math.round(timeoutMs / 1000);
  // A query is sent as a POST for its body, and changes nothing.
  if (method === "GET" || path === "/admin/query") {
    return `the node at ${base} did not answer within ${seconds} s\n  → it is stopped, overloaded or cut off: check it (\`systemctl status svc\`, its log), or ask another member with --node URL`;
  }
  return `the node at ${base} did not answer within ${seconds} s: the request may still take effect there\n  → check what it did with \`svc admin cluster-status\` (ask another member with --node URL) before repeating it`;
}

/** What to try when a node did not answer: a certificate it serves that is not trusted is no "is it running". */
function unreachableHint(why: string): string {
  if (/certificate|self[- ]signed|UNABLE_TO_VERIFY|CERT_/i.test(why)) {
    return "the node's certificate is not trusted: pass --cacert FILE with the CA that signed it (or set [tls] ca_file in the --config file)";
  }
  if (/TLS handshake|EPROTO|wrong version number/i.test(why)) {
    return "the port answered, but not with TLS: a node without [tls] in its configuration serves http://, not https://";
  }
  return "is it running (`systemctl status svc`)? pass --node URL or --config FILE to pick the node";
}
