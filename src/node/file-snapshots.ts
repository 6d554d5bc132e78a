// The production SnapshotStore: snapshot directories under raft/snapshots/ (storage's
// SnapshotStore), images made by the snapshot worker from the store file, and installs
// that rename a staged copy into place when the receiver left one (else copy the image).

import { basename, join } from "node:path";
import type { InstallMethod, SnapshotRecord, SnapshotStore } from "../io/index.ts";
import { SvcError } from "../util/errors.ts";
import { fsyncPathAsync } from "../io/durable-file.ts";
import type { Membership } from "../raft/index.ts";
import { snapshotStateFile, verifySnapshot, type SnapshotEntry, type SnapshotStore as SnapshotDirs } from "../storage/index.ts";
import { Store, createSnapshotImage } from "../store/index.ts";

export class FileSnapshots implements SnapshotStore<Membership, Store> {
  constructor(
    readonly dirs: SnapshotDirs,
    private readonly storePath: string,
    private readonly storeCacheKib?: number,
    /** A damaged image was found where a new one of the same index went, and replaced. */
    private readonly onDamaged: (dir: string, reason: string) => void = () => {},
  ) {}

  latest(): SnapshotRecord<Membership> | null {
    const entry = this.dirs.latest();
    return entry === null ? null : toRecord(entry);
  }

  find(term: number, index: number): SnapshotRecord<Membership> | null {
    const entry = this.dirs.list().find((e) => e.index === index && e.term === term && e.meta !== null);
    return entry === undefined ? null : toRecord(entry);
  }

  count(): number {
    return this.dirs.list().filter((e) => e.meta !== null).length;
  }

  async take(state: Store, clusterId: string, afterIndex: number): Promise<SnapshotRecord<Membership> | null> {
    const tempDir = this.dirs.beginTemp();
    try {
      // The worker copies the store file from its own connection: `state` goes on applying.
      // It copies what is committed, so everything applied is committed first.
      if (!state.commitForReaders()) {
        throw new SvcError("SNAPSHOT_FAILED", "the disk is full: the store could not commit what it applied, and an image would miss it", {
          hint: "free space on the data directory's disk, then take the snapshot again",
        });
      }
      const image = await createSnapshotImage(state.path, join(tempDir, snapshotStateFile));
      if (image.appliedIndex < afterIndex || (image.appliedIndex === afterIndex && await this.holdsSound(image.appliedTerm, image.appliedIndex))) {
        // Nothing applied since the newest image, and that image is whole.
        this.dirs.discard(tempDir);
        return null;
      }
      // A new image; or the newest one again, because the one held is damaged or gone.
      const entry = await this.dirs.commit(tempDir, {
        clusterId, index: image.appliedIndex, term: image.appliedTerm, membership: image.membership, stateSha256: image.stateSha256,
      });
      if (entry.replacedDamaged !== undefined) this.onDamaged(entry.dir, entry.replacedDamaged);
      return toRecord(entry);
    } catch (e) {
      this.dirs.discard(tempDir);
      throw e;
    }
  }

  private async holdsSound(term: number, index: number): Promise<boolean> {
    const entry = this.dirs.list().find((e) => e.index === index && e.term === term);
    return entry !== undefined && (await verifySnapshot(entry)).ok;
  }

  install(state: Store, record: SnapshotRecord<Membership>): { state: Store; method: InstallMethod } {
    const name = basename(record.location);
    // The copy first, with the store still open: should it fail (a full disk), the node keeps
    // the store it had, serving and retrying, instead of a closed one.
    const staged = Store.prepareImage(join(record.location, snapshotStateFile), this.storePath, Store.stagedImagePath(this.storePath, name));
    state.close({ discard: true });
    Store.swapInImage(this.storePath);
    return { state: Store.open(this.storePath, this.storeCacheKib === undefined ? {} : { cacheKib: this.storeCacheKib }), method: staged ? "staged" : "copied" };
  }

  async prune(keepCount: number): Promise<number> {
    const removed = this.dirs.prune(keepCount, { syncDir: false });
    if (removed.length > 0) await fsyncPathAsync(this.dirs.dir);
    return removed.length;
  }
}

function toRecord(entry: SnapshotEntry): SnapshotRecord<Membership> {
  const meta = entry.meta;
  return {
    term: entry.term,
    index: entry.index,
    membership: meta?.membership ?? { voters: [], learners: [] },
    clusterId: meta?.clusterId ?? "",
    sizeBytes: meta?.stateSizeBytes ?? 0,
    location: entry.dir,
  };
}
