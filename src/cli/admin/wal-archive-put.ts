// `svc admin wal-archive-put FILE DEST`: an archive_command for object stores and safe local
// copies, e.g. archive_command = "svc admin wal-archive-put %p s3://bucket/wal/%f". Exit 0 when
// the segment is stored (or already there, identical); 1 otherwise.

import { defineCommand } from "citty";
import { putArchivedSegment } from "../../backup/index.ts";
import { checkedLocation } from "../_location.ts";

export const walArchivePutCommand = defineCommand({
  meta: { name: "wal-archive-put", description: "Store one archived WAL segment in a directory or s3://bucket/prefix (for archive_command)" },
  args: {
    file: { type: "positional", description: "The segment (%p)", required: true },
    destination: { type: "positional", description: "A directory, a file path, or s3://bucket/prefix[/name] (credentials from AWS_* in the environment)", required: true },
  },
  async run({ args }) {
    const outcome = await putArchivedSegment(args.file, checkedLocation(args.destination, "the destination"));
    process.stdout.write(`${outcome.stored === "written" ? "archived" : "already archived (identical)"}: ${outcome.destination}\n`);
  },
});
