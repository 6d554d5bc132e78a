// `svc admin token create --role R`: makes a token, adds its SHA-256 hash and role to the
// tokens file ([auth] tokens_file in --config, or --tokens-file), and prints the token once.
// The node picks it up within seconds (it watches the file) or on SIGHUP.

import * as fs from "node:fs";
import { defineCommand } from "citty";
import { createToken, isRole, roles } from "../../http/index.ts";
import { SvcError } from "../../util/index.ts";
import { loadConfigOrExit } from "../_config.ts";
import { CliExit, ExitCode, usageError } from "../_exit.ts";

const createCommand = defineCommand({
  meta: { name: "create", description: "Make a token with a role, store its hash, print it once" },
  args: {
    role: { type: "string", description: `The token's role: ${roles.join(", ")}`, valueHint: "ROLE", required: true },
    "tokens-file": { type: "string", description: "The tokens file (default: [auth] tokens_file in --config)", valueHint: "FILE" },
    config: { type: "string", description: "Configuration file whose [auth] tokens_file to add to", valueHint: "FILE" },
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
    process.stderr.write(`svc: a ${args.role} token was added to ${path}; it is shown only now, keep it safe\n`);
    process.stdout.write(`${token}\n`);
  },
});

/** The tokens file, and the data directory of the configuration when one is given. */
function tokensFilePath(given: string | undefined, configPath: string | undefined): { path: string; dataDir: string | null } {
  const config = configPath === undefined || configPath === "" ? null : loadConfigOrExit(configPath);
  if (given !== undefined && given !== "") return { path: given, dataDir: config?.dataDir ?? null };
  if (config === null) throw usageError("give --tokens-file FILE, or --config FILE with [auth] tokens_file");
  if (config.auth == null) throw usageError(`${configPath} has no [auth] table: add [auth] tokens_file = "/etc/svc/tokens" or give --tokens-file FILE`);
  return { path: config.auth.tokensFile, dataDir: config.dataDir };
}

export const tokenCommand = defineCommand({
  meta: { name: "token", description: "Manage the tokens the client and admin ports accept" },
  subCommands: { create: createCommand },
});
