// Offline tools (wal-replay, wal-repair, init-cluster, verify-checksums) are often run as root
// (`sudo svc-admin …`) on a data directory the service user owns. What they write would be
// root's, and the node, running as that user, would refuse to start on files it cannot use:
// once done, they give everything below the data directory to its owner.

import * as fs from "node:fs";
import { join } from "node:path";

/** Run as root on a data directory another user owns: give every path below it to that owner. */
export function giveToDataDirOwner(dataDir: string): void {
  if (process.getuid?.() !== 0) return;
  // Called as a tool ends, done or refused: a path it cannot give (a read-only or vanished
  // file) must not take the place of what the tool has to say. The node names such a file at start.
  try {
    giveAll(dataDir);
  } catch {
    // left as it is
  }
}

function giveAll(dataDir: string): void {
  const top = fs.statSync(dataDir, { throwIfNoEntry: false });
  if (top === undefined || top.uid === 0) return;
  const walk = (dir: string): void => {
    let names: string[];
    try {
      names = fs.readdirSync(dir);
    } catch {
      return;
    }
    for (const name of names) {
      const path = join(dir, name);
      const st = fs.lstatSync(path, { throwIfNoEntry: false });
      if (st === undefined) continue;
      if (st.uid !== top.uid || st.gid !== top.gid) {
        try {
          fs.lchownSync(path, top.uid, top.gid);
        } catch {
          // the others are given all the same
        }
      }
      // A link is not followed: what it points to is not the data directory's.
      if (st.isDirectory()) walk(path);
    }
  };
  walk(dataDir);
}
