// verify-checksums: through a running node (its admin port), or offline on a stopped
// node's data directory: --data-dir DIR, or --offline with data_dir from --config or from the
// installed configuration. Exits 1 when anything is damaged. Offline it writes nothing: a
// directory that is not a svc data directory is refused (exit 2), and the lock is taken only
// on the LOCK file a node left there.

import { defineCommand } from "citty";
import { verifyDataDir, type VerifyFinding } from "../../node/index.ts";
import { dataPaths, giveToDataDirOwner, lockDataDirIfPresent } from "../../storage/index.ts";
import { NodeUnreachable, callNode, nodeArgs, nodeUrl, printJson } from "../_client.ts";
import { defaultConfigPath, offlineDataDir } from "../_config.ts";
import { CliExit, ExitCode } from "../_exit.ts";
import { SvcError } from "../../util/index.ts";

export const verifyChecksumsCommand = defineCommand({
  meta: { name: "verify-checksums", description: "Check WAL record CRCs, snapshot SHA-256 and store integrity" },
  args: {
    ...nodeArgs,
    "data-dir": { type: "string", description: "Check a stopped node's data directory directly instead of asking a running node", valueHint: "DIR" },
    offline: { type: "boolean", description: `Check the stopped node's data_dir (from --config, default ${defaultConfigPath()}) directly` },
  },
  async run({ args }) {
    let findings: VerifyFinding[];
    const offline = args.offline === true || (args["data-dir"] !== undefined && args["data-dir"] !== "");
    if (offline) {
      const dataDir = offlineDataDir({ dataDir: args["data-dir"], config: args.config });
      let lock;
      try {
        lock = lockDataDirIfPresent(dataDir, "verify-checksums");
      } catch (e) {
        const flag = args["data-dir"] !== undefined && args["data-dir"] !== "" ? "--data-dir" : "--offline";
        throw e instanceof SvcError ? new CliExit(ExitCode.failure, `${e.message}\n  → stop the node first, or run without ${flag} to check through the running node`) : e;
      }
      try {
        findings = await verifyDataDir(dataPaths(dataDir));
      } finally {
        lock?.release();
        // A damaged store it found is marked for the next start to rebuild: the mark is the node's.
        if (lock !== null) giveToDataDirOwner(dataDir);
      }
    } else {
      try {
        findings = ((await callNode(nodeUrl(args), "GET", "/admin/verify-checksums", undefined, 3_600_000)) as { findings: VerifyFinding[] }).findings;
      } catch (e) {
        // After a restore the node may not be started yet: that is checked on disk.
        throw e instanceof NodeUnreachable
          ? e.withHint("a stopped node is checked offline: `svc admin verify-checksums --offline` (data_dir of --config) or `--data-dir DIR`")
          : e;
      }
    }
    const ok = findings.every((f) => f.ok);
    if (args.json) printJson({ ok, findings });
    else {
      for (const f of findings) process.stdout.write(`${f.ok ? "ok  " : "BAD "} ${f.target}: ${f.detail}\n`);
      process.stdout.write(ok ? "all checks passed\n" : `${findings.filter((f) => !f.ok).length} problem(s) found\n`);
    }
    if (!ok) throw new CliExit(ExitCode.failure, "");
  },
});
