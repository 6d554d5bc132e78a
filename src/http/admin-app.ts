// The admin API on port 9090: health, Prometheus metrics, the snapshot trigger, and one
// route under /admin/ for each admin command that needs a running node.

import { Elysia } from "elysia";
import { METRICS_CONTENT_TYPE } from "../metrics/index.ts";
import type { SvcNode } from "../node/index.ts";
import { version, commit } from "../version.ts";
import { checkReadStatement } from "../store/index.ts";
import { checkParamCount, parseIdBody, parseMemberBody, parseQueryBody, readJsonBody } from "./body.ts";
import { answer, json } from "./errors.ts";
import { fallbackRoutes } from "./fallback.ts";
import { healthResponse } from "./health.ts";

export function adminApp(node: SvcNode) {
  return new Elysia({ name: "svc-admin" })
    .use(fallbackRoutes)
    .get("/health", () => healthResponse(node))
    .get("/metrics", () => new Response(node.metrics.registry.render(), { headers: { "content-type": METRICS_CONTENT_TYPE } }))
    .post("/admin/snapshot", ({ request }) => answer(async () => {
      const wait = new URL(request.url).searchParams.get("wait");
      const pending = node.takeSnapshot();
      if (wait !== "true" && wait !== "1") {
        pending.catch(() => undefined);
        return json({ status: "started", hint: "watch tensor_chain_snapshot_* on /metrics, or POST /admin/snapshot?wait=true" }, 202);
      }
      const s = await pending;
      return json({ status: "done", index: s.index, term: s.term, dir: s.dir, size_bytes: s.sizeBytes, duration_ms: Math.round(s.durationMs) });
    }), { parse: "none" })
    .get("/admin/stats", () => answer(async () => {
      const s = node.stats();
      return json({
        total_entries: s.totalEntries,
        tables: s.tables,
        store_size_bytes: s.sizeBytes,
        commit_index: s.raft.commitIndex,
        applied_index: s.raft.appliedIndex,
        last_log_index: s.raft.lastLogIndex,
        term: s.raft.term,
        role: s.raft.role,
        snapshot_index: s.snapshots.latestIndex,
        snapshot_count: s.snapshots.count,
        snapshot_size_bytes: s.snapshots.latestSizeBytes,
        wal_segments: s.wal.segments,
        wal_size_bytes: s.wal.sizeBytes,
        wal_first_index: s.wal.firstIndex,
        wal_last_index: s.wal.lastIndex,
        writes_paused: s.raft.writesPaused,
      });
    }))
    .post("/admin/query", ({ request }) => answer(async () => {
      const { sql, params, consistency } = parseQueryBody(await readJsonBody(request));
      checkParamCount(checkReadStatement(sql), params, "sql", "params");
      return json(await node.query(sql, params, consistency));
    }), { parse: "none" })
    .get("/admin/verify-checksums", () => answer(async () => {
      const findings = await node.verify();
      return json({ ok: findings.every((f) => f.ok), findings });
    }))
    .post("/admin/pause-writes", () => answer(async () => {
      return json({ writes_paused: true, ...(await node.setWritesPaused(true)) });
    }), { parse: "none" })
    .post("/admin/resume-writes", () => answer(async () => {
      return json({ writes_paused: false, ...(await node.setWritesPaused(false)) });
    }), { parse: "none" })
    .post("/admin/add-node", ({ request }) => answer(async () => {
      const body = parseMemberBody(await readJsonBody(request));
      return json(await node.addMember(body.member, { learner: body.learner, catchUpTimeoutMs: 120_000 }));
    }), { parse: "none" })
    .post("/admin/remove-node", ({ request }) => answer(async () => {
      return json(await node.removeMember(parseIdBody(await readJsonBody(request))));
    }), { parse: "none" })
    .post("/admin/promote", ({ request }) => answer(async () => {
      return json(await node.promoteMember(parseIdBody(await readJsonBody(request))));
    }), { parse: "none" })
    .post("/admin/transfer-leader", ({ request }) => answer(async () => {
      const to = parseIdBody(await readJsonBody(request));
      return json(await node.transferLeader(to, 5 * node.config.raft.electionTimeoutMs));
    }), { parse: "none" })
    .get("/admin/cluster-info", () => {
      const s = node.status();
      const book = node.memberAddresses();
      const peers = node.peerStatus();
      return json({
        cluster_id: s.clusterId,
        node_id: s.nodeId,
        leader: s.leaderId,
        term: s.term,
        commit_index: s.commitIndex,
        applied_index: s.appliedIndex,
        snapshot_index: s.snapshotIndex,
        role: s.role,
        recovery: s.recovery,
        members: [...s.membership.voters.map((id) => ({ id, role: "voter" })), ...s.membership.learners.map((id) => ({ id, role: "learner" }))].map((m) => {
          const addr = book.get(m.id);
          const link = peers[m.id];
          return {
            ...m,
            leader: m.id === s.leaderId,
            peer: addr?.peer ?? null,
            client: addr?.client ?? null,
            admin: addr?.admin ?? null,
            // This node's view of the link to that member: the partition picture.
            connected: m.id === s.nodeId ? null : link === undefined ? false : link.connected && link.inboundConnected,
          };
        }),
        version,
        commit,
      });
    });
}
