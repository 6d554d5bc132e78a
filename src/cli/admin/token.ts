// `svc admin token create --role R`: makes a token, adds its SHA-256 hash and role to the
// tokens file ([auth] tokens_file in --config, or --tokens-file), and prints the token once.
// The node picks it up within seconds (it watches the file) or on SIGHUP.

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
    const path = tokensFilePath(args["tokens-file"], args.config);
    const name = args.name ?? `${args.role}-${new Date().toISOString()}`;
    let token: string;
    try {
      token = createToken(path, args.role, name);
    } catch (e) {
      throw e instanceof SvcError ? new CliExit(ExitCode.failure, e.describe()) : e;
    }
    process.stderr.write(`svc: a ${args.role} token was added to ${path}; it is shown only now, keep it safe\n`);
    process.stdout.write(`${token}\n`);
  },
});

function tokensFilePath(given: string | undefined, configPath: string | undefined): string {
  if (given !== undefined && given !== "") return given;
  if (configPath === undefined || configPath === "") throw usageError("give --tokens-file FILE, or --config FILE with [auth] tokens_file");
  const auth = loadConfigOrExit(configPath).auth;
  if (auth == null) throw usageError(`${configPath} has no [auth] table: add [auth] tokens_file = "/etc/svc/tokens" or give --tokens-file FILE`);
  return auth.tokensFile;
}

export const tokenCommand = defineCommand({
  meta: { name: "token", description: "Manage the tokens the client and admin ports accept" },
  subCommands: { create: createCommand },
});
