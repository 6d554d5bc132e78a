// GET /health on both ports: 200 while the node serves, 503 with the recovery state
// otherwise, so a load balancer and an operator read the same answer.

import type { SvcNode } from "../node/index.ts";
import { json } from "./errors.ts";

export function healthResponse(node: SvcNode): Response {
  const s = node.status();
  const healthy = s.recovery === "healthy" && node.fatal === null;
  return json(
    {
      status: healthy ? "ok" : "unavailable",
      recovery: s.recovery,
      node_id: s.nodeId,
      role: s.role,
      leader: s.leaderId,
      term: s.term,
      commit_index: s.commitIndex,
      applied_index: s.appliedIndex,
      writes_paused: s.writesPaused,
      ...(node.fatal === null ? {} : { error: node.fatal.message }),
    },
    healthy ? 200 : 503,
  );
}
