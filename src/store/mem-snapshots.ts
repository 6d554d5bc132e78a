// The in-memory twin of the node's snapshot store, for the simulator: images are the store's
// serialized bytes, kept by name; installing one opens a fresh in-memory store from them.
// Filed snapshots survive a simulated crash (they were durable before they were filed);
// take() files only once the image is whole, as the real store's commit does.

import type { InstallMethod, SnapshotRecord, SnapshotStore } from "../io/index.ts";
import type { Membership } from "../util/log-data.ts";
import { Store } from "./store.ts";

export interface MemSnapshot {
  readonly record: SnapshotRecord<Membership>;
  readonly image: Uint8Array;
}

export class MemSnapshots implements SnapshotStore<Membership, Store> {
  /** Oldest first. */
  private filed: MemSnapshot[];

  constructor(filed: readonly MemSnapshot[] = []) {
    this.filed = [...filed];
  }

  /** Every filed snapshot, oldest first (what survives a crash). */
  all(): readonly MemSnapshot[] {
    return this.filed;
  }

  latest(): SnapshotRecord<Membership> | null {
    return this.filed.at(-1)?.record ?? null;
  }

  find(term: number, index: number): SnapshotRecord<Membership> | null {
    return this.filed.find((s) => s.record.term === term && s.record.index === index)?.record ?? null;
  }

  image(term: number, index: number): Uint8Array | null {
    return this.filed.find((s) => s.record.term === term && s.record.index === index)?.image ?? null;
  }

  count(): number {
    return this.filed.length;
  }

  take(state: Store, clusterId: string, afterIndex: number): Promise<SnapshotRecord<Membership> | null> {
    const meta = state.meta;
    if (meta.appliedIndex <= afterIndex) return Promise.resolve(null);
    const image = state.serialize();
    const record: SnapshotRecord<Membership> = {
      term: meta.appliedTerm,
      index: meta.appliedIndex,
      membership: { voters: [...meta.membership.voters], learners: [...meta.membership.learners] },
      clusterId,
      sizeBytes: image.length,
      location: `${meta.appliedTerm}-${meta.appliedIndex}`,
    };
    this.file(record, image);
    return Promise.resolve(record);
  }

  /** File an image (one taken here, or one received from a leader). */
  file(record: SnapshotRecord<Membership>, image: Uint8Array): void {
    if (this.find(record.term, record.index) !== null) return;
    this.filed.push({ record, image });
    this.filed.sort((a, b) => a.record.index - b.record.index || a.record.term - b.record.term);
  }

  install(state: Store, record: SnapshotRecord<Membership>): { state: Store; method: InstallMethod } {
    const image = this.image(record.term, record.index);
    if (image === null) throw new Error(`snapshot ${record.term}-${record.index} is not filed`);
    state.close({ discard: true });
    return { state: Store.openInMemory(image), method: "in_memory" };
  }

  prune(keepCount: number): Promise<number> {
    const removed = Math.max(0, this.filed.length - keepCount);
    this.filed = this.filed.slice(removed);
    return Promise.resolve(removed);
  }
}
