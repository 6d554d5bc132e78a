// A forward waits for the leader it went to. When another leader has been known here for a
// while, the one forwarded to was deposed, or hangs (SIGSTOP, a host that froze): had it been
// alive it would have answered by then (its waiting writes are answered as soon as the new
// leader commits). The forward is then given up, and the client told at once what a timeout
// would have told it 35 s later.

import type { SvcNode } from "../node/index.ts";

export interface LeaderWatch {
  readonly signal: AbortSignal;
  stop(): void;
}

/** Checks this often once `graceMs` has passed (a forward that ends sooner costs no check). */
const checkEveryMs = 250;

/**
 * Aborts once a leader other than the one whose client address is `forwardedTo` has been known
 * on this node for `graceMs`.
 */
export function watchLeaderMoved(node: SvcNode, forwardedTo: string, graceMs: number): LeaderWatch {
  const controller = new AbortController();
  let otherSinceMs: number | null = null;
  let timer: ReturnType<typeof setTimeout> | null = null;
  const check = (): void => {
    const leaderId = node.status().leaderId;
    const address = leaderId === null ? undefined : node.memberAddresses().get(leaderId)?.client;
    if (address === undefined || address === forwardedTo) {
      otherSinceMs = null;
    } else {
      otherSinceMs ??= Date.now();
      if (Date.now() - otherSinceMs >= graceMs) {
        controller.abort(new Error(`leadership moved to ${leaderId} while it waited, and the leader it was sent to did not answer within ${graceMs} ms of that`));
        return;
      }
    }
    timer = setTimeout(check, checkEveryMs);
  };
  timer = setTimeout(check, graceMs);
  return {
    signal: controller.signal,
    stop: () => {
      if (timer !== null) clearTimeout(timer);
      timer = null;
    },
  };
}
