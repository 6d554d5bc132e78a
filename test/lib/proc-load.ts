// Concurrent write load against /v1/execute with a ledger of what each write's answer
// promised, and the durability check of a table against that ledger:
//   acknowledged (200)            → must be present, with its value, forever after
//   answered with a definite 4xx  → must never be present
//   no answer / any other answer  → may or may not be present (in flight when the node died)
// and once a write has been seen by a read it must stay (it was committed).

import { withinDeadline, type SqlValue } from "./proc-http.ts";

export type WriteOutcome = "pending" | "acked" | "unknown" | "failed";

export const kvTable = "kv";
export const kvSchema = `CREATE TABLE IF NOT EXISTS ${kvTable} (k TEXT PRIMARY KEY, v TEXT NOT NULL)`;

/** The value written for `key`: derived from it, so a read can tell a right value from a wrong one. */
export function valueFor(key: string, bytes: number): string {
  const head = `${key}:`;
  if (head.length >= bytes) return head;
  let pad = "";
  let n = 0;
  while (head.length + pad.length < bytes) pad += (n++ * 2654435761 >>> 0).toString(36);
  return head + pad.slice(0, bytes - head.length);
}

export class Ledger {
  readonly outcomes = new Map<string, WriteOutcome>();
  /** Keys a read has returned: committed, so they must survive anything after. */
  readonly seen = new Set<string>();

  constructor(readonly valueBytes: number) {}

  count(outcome: WriteOutcome): number {
    let n = 0;
    for (const o of this.outcomes.values()) if (o === outcome) n++;
    return n;
  }

  /**
   * Compare a full dump of the kv table (k, v rows) against the ledger. Returns every
   * violation found (empty when the table is consistent with what clients were told).
   */
  check(rows: readonly (readonly SqlValue[])[]): string[] {
    const problems: string[] = [];
    const present = new Map<string, SqlValue>();
    for (const [k, v] of rows) present.set(String(k), v ?? null);
    for (const [key, outcome] of this.outcomes) {
      if (outcome === "acked" && !present.has(key)) problems.push(`acknowledged write ${key} is missing`);
    }
    for (const key of this.seen) {
      if (!present.has(key)) problems.push(`write ${key} was read back earlier and is now missing`);
    }
    for (const [key, value] of present) {
      const outcome = this.outcomes.get(key);
      if (outcome === undefined) problems.push(`row ${key} is present but no client ever wrote it`);
      else if (outcome === "failed") problems.push(`row ${key} is present although its write was refused`);
      if (value !== valueFor(key, this.valueBytes)) problems.push(`row ${key} has the wrong value ${JSON.stringify(value).slice(0, 80)}`);
    }
    if (problems.length === 0) for (const key of present.keys()) this.seen.add(key);
    return problems;
  }
}

export interface WriteLoadOptions {
  /** Client URL for the next request (a cluster test may pick a node each time). */
  target: () => string;
  clients: number;
  /** Distinguishes this load's keys from every other load's on the same ledger. */
  keyPrefix: string;
  ledger: Ledger;
  requestTimeoutMs?: number;
}

/** `clients` concurrent loops, each inserting its own unique keys one request at a time. */
export class WriteLoad {
  private stopped = false;
  private acked = 0;
  private readonly loops: Promise<void>[] = [];
  private readonly ackWaiters: { count: number; resolve: () => void }[] = [];

  constructor(private readonly options: WriteLoadOptions) {
    for (let c = 0; c < options.clients; c++) this.loops.push(this.client(c));
  }

  get ackedCount(): number {
    return this.acked;
  }

  /** Resolves once this load has had `count` writes acknowledged (or it was stopped). */
  async untilAcked(count: number, deadlineMs = 30_000): Promise<void> {
    if (this.acked >= count || this.stopped) return;
    const reached = new Promise<void>((resolve) => this.ackWaiters.push({ count, resolve }));
    if ((await withinDeadline(reached, deadlineMs)) === "expired") {
      const { ledger } = this.options;
      throw new Error(`the load had ${this.acked} of ${count} writes acknowledged after ${deadlineMs} ms ` +
        `(ledger: ${ledger.count("acked")} acked, ${ledger.count("unknown")} unknown, ${ledger.count("failed")} refused)`);
    }
  }

  /** Stop issuing writes and wait for every client's last request to end. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const w of this.ackWaiters.splice(0)) w.resolve();
    await Promise.all(this.loops);
  }

  private async client(clientId: number): Promise<void> {
    const { ledger, keyPrefix } = this.options;
    for (let seq = 0; !this.stopped; seq++) {
      const key = `${keyPrefix}-c${String(clientId).padStart(2, "0")}-${String(seq).padStart(6, "0")}`;
      ledger.outcomes.set(key, "pending");
      const outcome = await this.write(key);
      ledger.outcomes.set(key, outcome);
      if (outcome === "acked") this.onAck();
      // A refused or unanswered write: pace the retries instead of spinning on a dead node.
      else await Bun.sleep(20);
    }
  }

  private async write(key: string): Promise<WriteOutcome> {
    try {
      const response = await fetch(`${this.options.target()}/v1/execute`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ statements: [{ sql: `INSERT INTO ${kvTable} (k, v) VALUES (?, ?)`, params: [key, valueFor(key, this.options.ledger.valueBytes)] }] }),
        signal: AbortSignal.timeout(this.options.requestTimeoutMs ?? 30_000),
      });
      await response.arrayBuffer();
      if (response.status === 200) return "acked";
      // 400 and 413 are decided before the write enters the log; anything else (503 while
      // shutting down, 504) may come after it was proposed, so its fate is unknown.
      return response.status === 400 || response.status === 413 ? "failed" : "unknown";
    } catch {
      return "unknown";
    }
  }

  private onAck(): void {
    this.acked++;
    for (let i = this.ackWaiters.length - 1; i >= 0; i--) {
      const w = this.ackWaiters[i];
      if (w !== undefined && this.acked >= w.count) {
        this.ackWaiters.splice(i, 1);
        w.resolve();
      }
    }
  }
}
