// pause-writes / resume-writes: the replicated write-pause flag (for a consistent backup).

import { defineCommand } from "citty";
import { callNode, nodeArgs, nodeUrl, printJson } from "../_client.ts";

function writesCommand(paused: boolean) {
  return defineCommand({
    meta: {
      name: paused ? "pause-writes" : "resume-writes",
      description: paused ? "Stop accepting writes cluster-wide (for a consistent backup)" : "Accept writes again",
    },
    args: { ...nodeArgs },
    async run({ args }) {
      const result = (await callNode(nodeUrl(args), "POST", paused ? "/admin/pause-writes" : "/admin/resume-writes")) as { index: number };
      if (args.json) return printJson(result);
      process.stdout.write(paused
        ? `writes paused (log index ${result.index}); clients get 503 WRITES_PAUSED until \`svc admin resume-writes\`\n`
        : `writes resumed (log index ${result.index})\n`);
    },
  });
}

export const pauseWritesCommand = writesCommand(true);
export const resumeWritesCommand = writesCommand(false);
