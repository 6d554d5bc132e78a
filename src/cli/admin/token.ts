// `svc admin token create --role R`: makes a token, adds its SHA-256 hash and role to the
// tokens file ([auth] tokens_file in --config, or --tokens-file), and prints the token once.
// `token list` shows each token's name, role and the start of its hash (never the token);
// `token revoke --name N | --hash H` removes tokens from the file.
// A node picks a change up within seconds (it watches the file) or on SIGHUP. Each node reads
// its own copy of the file: a change is made on every node of a cluster.

import * as fs from "node:fs";
import { defineCommand } from "citty";
import { createToken, isHashPrefix, isRole, listTokens, revokeTokens, roles } from "../../http/index.ts";
import { SvcError } from "../../util/index.ts";
import { givenConfigPath, loadConfigOrExit } from "../_config.ts";
import { CliExit, ExitCode, usageError } from "../_exit.ts";
import { printJson } from "../_client.ts";

const createCommand = defineCommand({
  meta: { name: "create", description: "Make a token with a role, store its hash, print it once" },
  args: {
    role: { type: "string", description: `The token's role: ${roles.join(", ")}`, valueHint: "ROLE", required: true },
    "tokens-file": { type: "string", description: "The tokens file (default: [auth] tokens_file in --config)", valueHint: "FILE" },
    config: { type: "string", description: "Configuration file whose [auth] tokens_file to add to (default: the file SVC_CONFIG names, if set)", valueHint: "FILE" },
    name: { type: "string", description: "A name kept beside the hash, to tell tokens apart", valueHint: "NAME" },
  },
  run({ args }) {
    if (!isRole(args.role)) throw usageError(`--role must be one of ${roles.join(", ")}, not ${JSON.stringify(args.role)}`);
    const { path, dataDir } = tokensFilePath(args["tokens-file"], args.config);
    const name = args.name ?? `${args.role}-${new Date().toISOString()}`;
    const isNew = !fs.existsSync(path);
    // A new file belongs to the user the node runs as: the owner of its data directory.
    const dataDirStat = dataDir === null ? undefined : fs.statSync(dataDir, { throwIfNoEntry: false });
    const owner = dataDirStat === undefined ? null : { uid: dataDirStat.uid, gid: dataDirStat.gid };
    let token: string;
    try {
      token = createToken(path, args.role, name, owner);
    } catch (e) {
      throw e instanceof SvcError ? new CliExit(ExitCode.failure, e.describe()) : e;
    }
    if (isNew && owner === null && process.getuid?.() === 0) {
      process.stderr.write(`svc: WARNING: ${path} was created owned by root; the node reads it as its own user: chown svc:svc ${path}\n`);
    }
    process.stderr.write(`svc: ${args.role === "admin" ? "an" : "a"} ${args.role} token was added to ${path}; it is shown only now, keep it safe\n`);
    process.stdout.write(`${token}\n`);
  },
});

const fileArgs = {
  "tokens-file": { type: "string", description: "The tokens file (default: [auth] tokens_file in --config)", valueHint: "FILE" },
  config: { type: "string", description: "Configuration file whose [auth] tokens_file to use (default: the file SVC_CONFIG names, if set)", valueHint: "FILE" },
} as const;

const listCommand = defineCommand({
  meta: { name: "list", description: "Show each token's name, role and the start of its hash (never the token)" },
  args: { ...fileArgs, json: { type: "boolean", description: "Print JSON", default: false } },
  run({ args }) {
    const { path } = tokensFilePath(args["tokens-file"], args.config);
    // An SvcError (unreadable or damaged file, no such token) reaches reportError: exit 1, with what to do.
    const tokens = listTokens(path);
    if (args.json) {
      printJson(tokens.map((t) => ({ name: t.name, role: t.role, hash_prefix: `sha256:${t.hashPrefix}` })));
      return;
    }
    if (tokens.length === 0) {
      process.stderr.write(`svc: ${path} holds no tokens; make one with \`svc admin token create --role admin --tokens-file ${path}\`\n`);
      return;
    }
    const width = Math.max(4, ...tokens.map((t) => (t.name || "-").length));
    process.stdout.write(`${"NAME".padEnd(width)}  ROLE   HASH\n`);
    for (const t of tokens) process.stdout.write(`${(t.name || "-").padEnd(width)}  ${t.role.padEnd(5)}  sha256:${t.hashPrefix}…\n`);
  },
});

const revokeCommand = defineCommand({
  meta: { name: "revoke", description: "Remove tokens from the tokens file: every token with --name, or the one whose hash starts with --hash" },
  args: {
    ...fileArgs,
    name: { type: "string", description: "Remove every token with this name", valueHint: "NAME" },
    hash: { type: "string", description: "Remove the token whose hash starts with these hex digits (8 at least; see `token list`)", valueHint: "HEX" },
  },
  run({ args }) {
    const byName = args.name !== undefined && args.name !== "";
    const byHash = args.hash !== undefined && args.hash !== "";
    if (byName === byHash) throw usageError("give one of --name NAME or --hash HEX (see `svc admin token list`)");
    // The value is not repeated: it may be a token pasted in place of its hash.
    if (byHash && !isHashPrefix(args.hash!)) throw usageError("--hash takes 8 to 64 hex digits of a token's hash, as `svc admin token list` shows them (never the token itself)");
    const { path } = tokensFilePath(args["tokens-file"], args.config);
    const removed = revokeTokens(path, byName ? { name: args.name! } : { hash: args.hash! });
    for (const t of removed) process.stdout.write(`revoked ${t.name || "-"} (${t.role}, sha256:${t.hashPrefix}…)\n`);
    process.stderr.write(
      `svc: ${removed.length === 1 ? "the token was" : `${removed.length} tokens were`} removed from ${path}; a node reading this file refuses ${removed.length === 1 ? "it" : "them"} ` +
      "within seconds (or at SIGHUP). Every node reads its own copy: revoke on each node of the cluster, or copy this file to each\n",
    );
    if (!listTokens(path).some((t) => t.role === "admin")) {
      process.stderr.write(`svc: WARNING: no admin token is left in ${path}: /admin routes refuse every request until one is made (\`svc admin token create --role admin --tokens-file ${path}\`)\n`);
    }
  },
});

/** The tokens file, and the data directory of the configuration (--config, else SVC_CONFIG's) when there is one. */
function tokensFilePath(given: string | undefined, configFlag: string | undefined): { path: string; dataDir: string | null } {
  const configPath = givenConfigPath(configFlag);
  const config = configPath === null ? null : loadConfigOrExit(configPath.path, configPath.from);
  if (given !== undefined && given !== "") return { path: given, dataDir: config?.dataDir ?? null };
  if (config === null || configPath === null) throw usageError("give --tokens-file FILE, or --config FILE (or SVC_CONFIG) naming a configuration with [auth] tokens_file");
  if (config.auth == null) throw usageError(`${configPath.path} has no [auth] table: add [auth] tokens_file = "/etc/svc/tokens" or give --tokens-file FILE`);
  return { path: config.auth.tokensFile, dataDir: config.dataDir };
}

export const tokenCommand = defineCommand({
  meta: { name: "token", description: "Manage the tokens the client and admin ports accept" },
  subCommands: { create: createCommand, list: listCommand, revoke: revokeCommand },
});
