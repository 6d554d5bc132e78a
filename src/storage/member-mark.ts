// <data_dir>/MEMBER: written once the data directory belongs to a cluster (its id inside), and
// left alone when raft/ and store/ are removed (SPEC §4.6 full state rebuild). A node that
// starts with neither but this file was a member, and may have acknowledged writes that another
// member lacks: it does not vote until a leader has caught it up (node/start.ts). A new host's
// empty data directory has no such file, and votes (a cluster restored there needs its votes).

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { writeFileAtomic } from "../io/durable-file.ts";

export const memberMarkFile = "MEMBER";

/** The cluster id the mark names; null without one. */
export function readMemberMark(dataDir: string): string | null {
  try {
    return readFileSync(join(dataDir, memberMarkFile), "utf8").trim();
  } catch {
    return null;
  }
}

/** Write the mark, unless it names this cluster already (a node that joined another cluster: rewritten). */
export function ensureMemberMark(dataDir: string, clusterId: string): void {
  if (clusterId === "" || readMemberMark(dataDir) === clusterId) return;
  writeFileAtomic(join(dataDir, memberMarkFile), `${clusterId}\n`);
}
