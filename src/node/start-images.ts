// The snapshot images a node's start may use, hashed only when the start needs one (see
// loadState): to rebuild or install the store, or to judge damage in the WAL.

import { snapshotMetaProblem, type SnapshotEntry, type SnapshotStore } from "../storage/index.ts";
import type { Logger } from "../util/logger.ts";

/**
 * The images a start may use. Before anything hashed them: the newest with a readable meta.json
 * (its index decides whether the store is behind). verified() hashes from the newest down and
 * keeps the first that checks; after it, current() is that one.
 */
export class StartImages {
  private checked: SnapshotEntry | null | undefined;
  /** Listed once: nothing adds an image while the node starts. */
  private readonly newest: SnapshotEntry | null;

  constructor(private readonly snapshots: SnapshotStore, private readonly logger: Logger) {
    // One listing (each reads every meta.json): the newest usable one, and the unusable said once.
    const all = snapshots.list();
    this.newest = all.filter((e) => e.meta !== null).at(-1) ?? null;
    // Never used (nothing of it can be trusted); verify-checksums reports it too.
    for (const entry of all) {
      if (entry.meta !== null) continue;
      const reason = snapshotMetaProblem(entry.dir) ?? "meta.json cannot be used";
      this.ignored.push({ dir: entry.dir, reason });
      logger.warn("recovery: ignoring a snapshot whose meta.json cannot be used", { dir: entry.dir, reason });
    }
  }

  /** Images found damaged so far, newest last: a start that then lacks entries says why. */
  readonly ignored: { dir: string; reason: string }[] = [];

  /** The newest image, verified when verified() ran, else as meta.json describes it. */
  current(): SnapshotEntry | null {
    return this.checked !== undefined ? this.checked : this.newest;
  }

  /** Whether the image current() names was hashed (a start that kept its store did not). */
  get wasVerified(): boolean {
    return this.checked !== undefined;
  }

  async verified(): Promise<SnapshotEntry | null> {
    this.checked ??= await this.snapshots.latestValid((entry, reason) => {
      this.ignored.push({ dir: entry.dir, reason });
      this.logger.warn("recovery: ignoring a damaged snapshot", { dir: entry.dir, reason });
    });
    return this.checked;
  }
}
