// The root command: `svc serve`, `svc admin …`, `svc dev-cluster`, and the root flags
// `svc --version` and `svc --config F --validate`.

import { defineCommand } from "citty";
import { versionLine } from "../version.ts";
import { adminCommand } from "./admin/index.ts";
import { usageError } from "./_exit.ts";

export const rootCommand = defineCommand({
  meta: { name: "svc", description: "A node of a replicated SQL data store" },
  args: {
    config: { type: "string", description: "Path to the configuration file (TOML)", valueHint: "FILE" },
    validate: { type: "boolean", description: "Check the configuration file and exit" },
    version: { type: "boolean", description: "Print the version and exit" },
  },
  subCommands: {
    serve: () => import("./serve.ts").then((m) => m.serveCommand),
    admin: adminCommand,
    "dev-cluster": () => import("./dev-cluster.ts").then((m) => m.devClusterCommand),
  },
  async run({ args, rawArgs }) {
    // citty runs the root's run() after a sub-command too: act only on root flags.
    if (rawArgs.some((a) => !a.startsWith("-") && a !== args.config)) return;
    if (args.version) {
      process.stdout.write(`${versionLine}\n`);
      return;
    }
    if (args.validate) {
      const { validateCommandRun } = await import("./validate.ts");
      await validateCommandRun(args.config);
      return;
    }
    throw usageError("no command given; try `svc serve`, `svc admin --help`, `svc --config FILE --validate` or `svc --help`");
  },
});
