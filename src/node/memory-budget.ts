// How a node splits max_memory_mb (README, "Memory"): every part that grows with load gets a
// share, and the parts that do not (the runtime and code of the node and of each SQL process)
// are counted at what they measure here. The sum is what the node and the processes it starts
// may hold together; it stays under max_memory_mb + the allowance at any setting from the floor
// up, and under max_memory_mb itself from about 256 MB up.

const MIB = 2 ** 20;

/** The node at rest (runtime, code, heap after start), measured: about 60 MB. */
export const nodeBaseBytes = 64 * MIB;
/** A SQL process at rest, measured: about 38 MB. */
export const sqlProcessBaseBytes = 40 * MIB;
/** What the node and its processes may hold beyond max_memory_mb, at the floor. */
export const ceilingAllowanceBytes = 64 * MIB;
/**
 * From this setting up: two reader processes and a write-check process kept started; below it,
 * one SQL process for both, started when asked and stopped when idle.
 */
const twoReadersFromBytes = 512 * MIB;
/** A SQL process is stopped past this, at least: its base and room for a result being built. */
const sqlProcessBytesMin = 56 * MIB;

export interface MemoryBudget {
  readonly maxMemoryBytes: number;
  /** The in-memory Raft log: compacted past this (snapshot-policy.ts). */
  readonly logBytesMax: number;
  /** Write request bodies admitted and not yet answered (HTTP), beyond one lone request. */
  readonly inFlightBytesMax: number;
  /** Read request bodies (POST /v1/query) admitted and not yet answered, beyond one lone read. */
  readonly readBodiesBytesMax: number;
  /** SQLite page cache of the store's applying connection. */
  readonly storeCacheBytes: number;
  /** SQLite page cache of every other connection (the store's reader, each SQL process). */
  readonly readerCacheBytes: number;
  /** One read's answer, counted as JSON (RESULT_TOO_LARGE past it). */
  readonly resultBytesMax: number;
  /** Processes that answer reads. */
  readonly readerProcessesCount: number;
  /**
   * Write checks have a process of their own, kept started; else the one reader process runs
   * them too (before waiting reads).
   */
  readonly writeCheckOwnProcess: boolean;
  /** SQL processes at most. */
  readonly sqlProcessesCount: number;
  /** The runtime's garbage between collections under load (a burst of large writes). */
  readonly garbageBytes: number;
  /** A SQL process whose RSS passes this is killed with its statement. */
  readonly sqlProcessBytesMax: number;
  /** What the node process itself may hold: its base and the shares above that live in it. */
  readonly nodeBytesMax: number;
  /** The node and every SQL process at their caps. */
  readonly totalBytesMax: number;
}

export function memoryBudget(maxMemoryBytes: number): MemoryBudget {
  const logBytesMax = Math.min(16 * MIB, Math.floor(maxMemoryBytes / 64));
  const inFlightBytesMax = Math.floor(maxMemoryBytes / 32);
  const readBodiesBytesMax = Math.floor(maxMemoryBytes / 32);
  const storeCacheBytes = Math.floor(maxMemoryBytes / 32);
  const readerCacheBytes = Math.max(512 * 1024, Math.floor(maxMemoryBytes / 128));
  const resultBytesMax = Math.max(MIB, Math.floor(maxMemoryBytes / 32));
  const roomy = maxMemoryBytes >= twoReadersFromBytes;
  const readerProcessesCount = roomy ? 2 : 1;
  const sqlProcessesCount = roomy ? readerProcessesCount + 1 : 1;
  // A process at rest holds ~38 MB, and a read grows it by about 1 KB per row it answers (the
  // rows, their copy for the node): a share of an eighth left 18 MB at 256 MB, and a 30,000-row
  // read was stopped there. One process below 512 MB gets a third; each of three, a sixth.
  const sqlProcessBytesMax = Math.max(sqlProcessBytesMin, Math.floor(maxMemoryBytes / (roomy ? 6 : 3)));
  const garbageBytes = Math.floor(maxMemoryBytes / 8);
  // The node holds, besides its base: the log, the bodies in flight (writes' and reads'), the
  // store's two caches, one answer per reader on its way out, and the garbage all of that leaves.
  const nodeBytesMax = nodeBaseBytes + logBytesMax + inFlightBytesMax + readBodiesBytesMax + storeCacheBytes + readerCacheBytes +
    readerProcessesCount * resultBytesMax + garbageBytes;
  const totalBytesMax = nodeBytesMax + sqlProcessesCount * sqlProcessBytesMax;
  return {
    maxMemoryBytes, logBytesMax, inFlightBytesMax, readBodiesBytesMax, storeCacheBytes, readerCacheBytes, resultBytesMax,
    readerProcessesCount, writeCheckOwnProcess: roomy, sqlProcessesCount, garbageBytes, sqlProcessBytesMax, nodeBytesMax, totalBytesMax,
  };
}

/** Whether the budget fits max_memory_mb and the allowance. */
export function budgetFits(b: MemoryBudget): boolean {
  return b.totalBytesMax <= b.maxMemoryBytes + ceilingAllowanceBytes;
}

/** The smallest max_memory_mb whose budget fits (in MiB). */
export function memoryFloorMb(): number {
  let mb = 64;
  while (!budgetFits(memoryBudget(mb * MIB))) mb++;
  return mb;
}

/** What a node started below its floor logs and `--validate` prints; null when it fits. */
export function memoryFloorWarning(maxMemoryBytes: number): string | null {
  const b = memoryBudget(maxMemoryBytes);
  if (budgetFits(b)) return null;
  const mb = (n: number): number => Math.ceil(n / MIB);
  return `max_memory_mb = ${mb(maxMemoryBytes)} is below the ${memoryFloorMb()} MB this node needs: the node and its SQL processes ` +
    `can reach ${mb(b.totalBytesMax)} MB (the node ${mb(b.nodeBytesMax)} MB, ${b.sqlProcessesCount} SQL process${b.sqlProcessesCount === 1 ? "" : "es"} of up to ` +
    `${mb(b.sqlProcessBytesMax)} MB), more than max_memory_mb + ${mb(ceilingAllowanceBytes)} MB; raise max_memory_mb to at least ${memoryFloorMb()}`;
}
