// The safety properties of Raft (Figure 3 of the paper) plus linearizable reads, checked
// as the simulation runs. Every check is incremental so that it can run after every step:
//   election safety      at most one leader per term
//   log matching         an (index, term) pair, wherever and whenever it is persisted,
//                        always ends the same log prefix (compared by rolling prefix hash)
//   leader completeness  a new leader's log holds every entry applied anywhere before it won
//   state machine safety no two nodes apply different entries at the same index
//   reads                a completed read sees at least the latest write to its key that
//                        any node had applied when the read began

import { safetyDropReasons } from "../../src/raft/index.ts";
import type { Entry, NodeId } from "../../src/raft/index.ts";
import type { Cell, PendingRead, SimNode } from "./node.ts";
import { entryKey } from "./node.ts";

export class SafetyViolation extends Error {
  override name = "SafetyViolation";
}

export class Checker {
  private readonly leaderOfTerm = new Map<number, NodeId>();
  /** "index:term" → prefix hash of the log ending there. */
  private readonly prefixAt = new Map<string, number>();
  /** index → the entry applied there (by whichever node applied it first). */
  private readonly appliedAt = new Map<number, { term: number; key: string }>();
  /** key → index of the latest applied write to it. */
  readonly latestWrite = new Map<string, number>();
  maxAppliedIndex = 0;
  readsChecked = 0;

  fail(what: string): never {
    throw new SafetyViolation(what);
  }

  onPersisted(node: SimNode, entries: readonly Entry[], hashes: readonly number[]): void {
    entries.forEach((e, i) => {
      const key = `${e.index}:${e.term}`;
      const h = hashes[i]!;
      const seen = this.prefixAt.get(key);
      if (seen === undefined) this.prefixAt.set(key, h);
      else if (seen !== h) this.fail(`log matching: ${node.id} persisted a log ending at index ${e.index} term ${e.term} that differs from another log with the same last entry`);
    });
  }

  onApplied(node: SimNode, e: Entry): void {
    const key = entryKey(e);
    const seen = this.appliedAt.get(e.index);
    if (seen === undefined) {
      this.appliedAt.set(e.index, { term: e.term, key });
      if (e.index > this.maxAppliedIndex) this.maxAppliedIndex = e.index;
      if (e.kind === "normal") {
        const k = key.slice("normal:".length).split("=")[0]!;
        if (e.index > (this.latestWrite.get(k) ?? 0)) this.latestWrite.set(k, e.index);
      }
    } else if (seen.term !== e.term || seen.key !== key) {
      this.fail(`state machine safety: ${node.id} applied ${key}@${e.term} at index ${e.index}, another node applied ${seen.key}@${seen.term}`);
    }
  }

  onReadDone(node: SimNode, read: PendingRead, cell: Cell | undefined): void {
    this.readsChecked++;
    const seenIndex = cell?.index ?? 0;
    if (seenIndex < read.minIndex) {
      this.fail(`stale read on ${node.id}: key ${read.key} returned the write at ${seenIndex}, but the write at ${read.minIndex} was applied before the read began (read index ${read.index})`);
    }
  }

  /** Called after every step for every node that is up. */
  checkNode(node: SimNode): void {
    const s = node.core!.status();
    for (const reason of safetyDropReasons) {
      if ((s.droppedMessages[reason] ?? 0) > 0) this.fail(`${node.id} dropped a message for ${reason}`);
    }
    if (s.role !== "leader") return;
    const holder = this.leaderOfTerm.get(s.term);
    if (holder === undefined) {
      this.leaderOfTerm.set(s.term, node.id);
      this.checkLeaderCompleteness(node, s.term, s.lastIndex);
    } else if (holder !== node.id) {
      this.fail(`election safety: ${holder} and ${node.id} are both leaders of term ${s.term}`);
    }
  }

  private checkLeaderCompleteness(node: SimNode, term: number, lastIndex: number): void {
    if (lastIndex < this.maxAppliedIndex) {
      this.fail(`leader completeness: ${node.id} became leader of term ${term} with last index ${lastIndex}, but index ${this.maxAppliedIndex} was already applied`);
    }
    for (const e of node.disk.entries) {
      const applied = this.appliedAt.get(e.index);
      if (applied !== undefined && applied.term !== e.term) {
        this.fail(`leader completeness: ${node.id} became leader of term ${term} holding term ${e.term} at ${e.index}, where term ${applied.term} was applied`);
      }
    }
  }

  leaderCount(): number {
    return this.leaderOfTerm.size;
  }
}
