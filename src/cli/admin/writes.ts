// pause-writes / resume-writes: the replicated write-pause flag (for a consistent backup).

import { defineCommand } from "citty";
import { parseDuration } from "../../backup/index.ts";
import { pauseLeaseMsMax, pauseLeaseMsMin } from "../../store/index.ts";
import { callNode, nodeArgs, nodeUrl, printJson } from "../_client.ts";
import { usageError } from "../_exit.ts";

function writesCommand(paused: boolean) {
  return defineCommand({
    meta: {
      name: paused ? "pause-writes" : "resume-writes",
      description: paused ? "Stop accepting writes cluster-wide (for a consistent backup)" : "Accept writes again",
    },
    args: {
      ...nodeArgs,
      ...(paused ? { lease: { type: "string" as const, description: "End the pause by itself after this long unless paused again (e.g. 60s, 10m)", valueHint: "DURATION" } } : {}),
    },
    async run({ args }) {
      let path = paused ? "/admin/pause-writes" : "/admin/resume-writes";
      const lease = (args as { lease?: string }).lease;
      if (lease !== undefined) {
        const d = parseDuration(lease);
        if (!d.ok) throw usageError(`--lease: ${d.message}`);
        if (d.ms < pauseLeaseMsMin || d.ms > pauseLeaseMsMax) {
          throw usageError(`--lease: ${lease} is outside 1s to 24h; leave --lease out for a pause that lasts until resume-writes`);
        }
        path += `?lease_ms=${d.ms}`;
      }
      const result = (await callNode(nodeUrl(args), "POST", path)) as { index: number; until?: string };
      if (args.json) return printJson(result);
      const until = result.until === undefined ? "`svc admin resume-writes`" : `\`svc admin resume-writes\` or ${result.until}`;
      process.stdout.write(paused
        ? `writes paused (log index ${result.index}); clients get 503 WRITES_PAUSED until ${until}\n`
        : `writes resumed (log index ${result.index})\n`);
    },
  });
}

export const pauseWritesCommand = writesCommand(true);
export const resumeWritesCommand = writesCommand(false);
