// Warnings about refused peer connections, at a bounded rate: a scanner or a misconfigured node
// that dials in a loop would otherwise write one line per attempt. Per remote host, the first
// refusal of a window is logged and the rest are counted; the next logged line says how many
// were left out.

import type { Logger } from "../util/index.ts";

/** Hosts remembered at once; the oldest is forgotten first (its next refusal is logged). */
const HOSTS_MAX = 1024;

interface HostWindow {
  startMs: number;
  suppressed: number;
}

export class RefusalLog {
  readonly #logger: Logger;
  readonly #windowMs: number;
  readonly #now: () => number;
  readonly #hosts = new Map<string, HostWindow>();

  constructor(logger: Logger, windowMs: number, now: () => number = Date.now) {
    this.#logger = logger;
    this.#windowMs = windowMs;
    this.#now = now;
  }

  /** Logs `message` at warn unless this host was logged within the window. */
  warn(host: string, message: string, fields: Record<string, unknown>): void {
    const nowMs = this.#now();
    const seen = this.#hosts.get(host);
    if (seen !== undefined && nowMs - seen.startMs < this.#windowMs) {
      seen.suppressed++;
      return;
    }
    const suppressed = seen?.suppressed ?? 0;
    this.#hosts.delete(host);
    if (this.#hosts.size >= HOSTS_MAX) this.#hosts.delete(this.#hosts.keys().next().value as string);
    this.#hosts.set(host, { startMs: nowMs, suppressed: 0 });
    const more = suppressed === 0 ? "" : ` (and ${suppressed} more from ${host} in the last ${Math.round(this.#windowMs / 1000)} s, not logged)`;
    this.#logger.warn(`${message}${more}`, suppressed === 0 ? fields : { ...fields, suppressed });
  }
}
