// The admin API on port 9090: health, Prometheus metrics, the snapshot trigger, and one
// route under /admin/ for each admin command that needs a running node. Actions that belong to
// the cluster (pause and resume writes, a snapshot, leadership and membership changes) work
// from any node: a follower forwards them to the leader's admin port and relays the answer.

import { Elysia } from "elysia";
import { METRICS_CONTENT_TYPE } from "../metrics/index.ts";
import type { SvcNode } from "../node/index.ts";
import { version, commit } from "../version.ts";
import { checkReadStatement, pauseLeaseMsMax, pauseLeaseMsMin } from "../store/index.ts";
import { SvcError } from "../util/errors.ts";
import { checkParamCount, parseIdBody, parseJsonText, parseMemberBody, parseQueryBody, parseSetMemberBody, readBodyText, readJsonBody } from "./body.ts";
import { answer, badRequest, errorResponse, json, queryResponse } from "./errors.ts";
import { fallbackRoutes, ownPortAddress, type RouteEntry } from "./fallback.ts";
import { queryParameters, routeQuery, type RouteQuery } from "./query-params.ts";
import { forwardAdminToLeader, leaderAdminToForwardTo } from "./forward.ts";
import { gossipStatusJson } from "./gossip-status.ts";
import { healthResponse } from "./health.ts";

/** How long a forwarded action may take at the leader before the relay gives up on its answer. */
const relayTimeoutMs = {
  writesFlag: 35_000,
  snapshotStarted: 35_000,
  snapshotWaited: 3_600_000,
  // add-node waits up to 120 s for the new member to catch up.
  addNode: 180_000,
  membership: 120_000,
} as const;

export function adminApp(node: SvcNode) {
  const nodeId = node.config.nodeId;

  /**
   * Run a cluster action here, or, when this node is not the leader and knows the leader's
   * admin address, at the leader. `work` gets the request's body text.
   */
  async function atLeader(request: Request, timeoutMs: number, work: (body: string) => Promise<unknown>): Promise<Response> {
    let text = "";
    try {
      text = await readBodyText(request);
      const result = await work(text);
      return result instanceof Response ? result : json(result);
    } catch (e) {
      const leader = leaderAdminToForwardTo(e, request);
      if (leader === null) return errorResponse(e);
      const url = new URL(request.url);
      try {
        return await forwardAdminToLeader(leader, `${url.pathname}${url.search}`, text, { nodeId, clusterId: node.clusterId }, timeoutMs, request);
      } catch (forwardError) {
        return errorResponse(forwardError);
      }
    }
  }

  let routes: () => readonly RouteEntry[] = () => [];
  const app = new Elysia({ name: "svc-admin" })
    .use(fallbackRoutes(() => routes(), { port: "admin", otherAddress: () => ownPortAddress(node, "client") }))
    .use(queryParameters("admin"))
    .get("/health", () => healthResponse(node))
    .get("/metrics", () => new Response(node.metrics.registry.render(), { headers: { "content-type": METRICS_CONTENT_TYPE } }))
    // SPEC §4.2: the snapshot is the leader's; ?local=true takes one on this node instead (a
    // follower's own WAL is compacted by its own snapshots).
    .post("/admin/snapshot", ({ request }) => {
      const query = routeQuery(request, "admin", "POST /admin/snapshot");
      const wait = flagParam(query, "wait");
      const local = flagParam(query, "local");
      return atLeader(request, wait ? relayTimeoutMs.snapshotWaited : relayTimeoutMs.snapshotStarted, async () => {
        if (!local) node.requireLeader("add ?local=true to take the snapshot on this node");
        const pending = node.takeSnapshot();
        if (!wait) {
          pending.catch(() => undefined);
          return json({ status: "started", node_id: nodeId, hint: "watch tensor_chain_snapshot_* on /metrics, or POST /admin/snapshot?wait=true" }, 202);
        }
        const s = await pending;
        return { status: "done", node_id: nodeId, index: s.index, term: s.term, dir: s.dir, size_bytes: s.sizeBytes, duration_ms: Math.round(s.durationMs) };
      });
    }, { parse: "none" })
    .get("/admin/stats", () => answer(async () => {
      const s = await node.statsBounded();
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
        ...(s.raft.writesPaused && s.raft.writesPausedUntilMs > 0 ? { writes_paused_until: new Date(s.raft.writesPausedUntilMs).toISOString() } : {}),
        wal_archive: walArchiveJson(s.raft.walArchive),
      });
    }))
    .post("/admin/query", ({ request }) => answer(async () => {
      const { sql, params, consistency } = parseQueryBody(await readJsonBody(request));
      checkParamCount(checkReadStatement(sql), params, "sql", "params");
      return queryResponse(await node.query(sql, params, consistency, { signal: request.signal, admin: true }));
    }), { parse: "none" })
    .get("/admin/verify-checksums", () => answer(async () => {
      const findings = await node.verify();
      return json({ ok: findings.every((f) => f.ok), findings });
    }))
    .post("/admin/pause-writes", ({ request }) => atLeader(request, relayTimeoutMs.writesFlag, async (text) => {
      // The lease is a query parameter: one sent in a body was ignored, and the pause had no end.
      // (An empty body, or {}, as some clients send with every POST, says nothing and passes.)
      const body = text.trim() === "" ? {} : parseJsonText(text);
      if (typeof body !== "object" || body === null || Array.isArray(body) || Object.keys(body).length > 0) {
        throw new SvcError("BAD_REQUEST", `pause-writes reads nothing from its body, and this one says ${JSON.stringify(text.slice(0, 80))}`, {
          hint: "give the lease as a query parameter, ?lease_ms=60000, or leave it out for a pause until resume-writes",
        });
      }
      const leaseMs = pauseLeaseMs(routeQuery(request, "admin", "POST /admin/pause-writes").get("lease_ms"));
      const { index, untilMs } = await node.setWritesPaused(true, leaseMs);
      return { writes_paused: true, index, ...(untilMs > 0 ? { until: new Date(untilMs).toISOString() } : {}) };
    }), { parse: "none" })
    .post("/admin/resume-writes", ({ request }) => atLeader(request, relayTimeoutMs.writesFlag, async () => {
      return { writes_paused: false, index: (await node.setWritesPaused(false)).index };
    }), { parse: "none" })
    .post("/admin/add-node", ({ request }) => atLeader(request, relayTimeoutMs.addNode, async (text) => {
      const body = parseMemberBody(parseJsonText(text));
      return node.addMember(body.member, { learner: body.learner, catchUpTimeoutMs: 120_000, signal: request.signal });
    }), { parse: "none" })
    .post("/admin/set-member", ({ request }) => atLeader(request, relayTimeoutMs.membership, async (text) => {
      const { id, change } = parseSetMemberBody(parseJsonText(text));
      return node.updateMember(id, change);
    }), { parse: "none" })
    .post("/admin/remove-node", ({ request }) => atLeader(request, relayTimeoutMs.membership, async (text) => {
      return node.removeMember(parseIdBody(parseJsonText(text)));
    }), { parse: "none" })
    .post("/admin/promote", ({ request }) => atLeader(request, relayTimeoutMs.membership, async (text) => {
      return node.promoteMember(parseIdBody(parseJsonText(text)));
    }), { parse: "none" })
    .post("/admin/transfer-leader", ({ request }) => atLeader(request, 5 * node.config.raft.electionTimeoutMs + relayTimeoutMs.writesFlag, async (text) => {
      const to = parseIdBody(parseJsonText(text));
      return node.transferLeader(to, 5 * node.config.raft.electionTimeoutMs);
    }), { parse: "none" })
    .get("/admin/gossip", () => json(gossipStatusJson(node)))
    .get("/admin/cluster-info", () => {
      const s = node.status();
      const book = node.memberAddresses();
      const peers = node.peerStatus();
      const removed = node.removedProblem;
      return json({
        cluster_id: s.clusterId,
        node_id: s.nodeId,
        // A removed node still answers, from a membership that no longer names it.
        removed: removed !== null,
        ...(removed === null ? {} : { problem: removed }),
        leader: s.leaderId,
        term: s.term,
        commit_index: s.commitIndex,
        applied_index: s.appliedIndex,
        snapshot_index: s.snapshotIndex,
        role: s.role,
        recovery: s.recovery,
        writes_paused: s.writesPaused,
        ...(s.writesPaused && s.writesPausedUntilMs > 0 ? { writes_paused_until: new Date(s.writesPausedUntilMs).toISOString() } : {}),
        wal_archive: walArchiveJson(s.walArchive),
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
  routes = () => app.routes;
  return app;
}

/** A pause lease from the query string: whole milliseconds, pauseLeaseMsMin to pauseLeaseMsMax. */
function pauseLeaseMs(text: string | null): number | undefined {
  if (text === null) return undefined;
  // Digits only: Number() would take "1e3" and "0x3e8" as well.
  const ms = /^[0-9]{1,9}$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(ms) || ms < pauseLeaseMsMin || ms > pauseLeaseMsMax) {
    throw new SvcError("BAD_REQUEST", `lease_ms must be a whole number of milliseconds from ${pauseLeaseMsMin} to ${pauseLeaseMsMax}, not ${JSON.stringify(text)}`, {
      hint: "give ?lease_ms=60000 for a one-minute pause, or leave it out for a pause until resume-writes",
    });
  }
  return ms;
}

/** WAL archiving as stats and cluster-info show it (null: archiving is off on that node). */
function walArchiveJson(a: ReturnType<SvcNode["status"]>["walArchive"]): Record<string, unknown> | null {
  if (a === null) return null;
  const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());
  return {
    archived_through: a.archivedThrough,
    last_archived_segment: a.lastArchivedSegment,
    last_archived_at: iso(a.lastArchivedAtMs),
    last_failure_at: iso(a.lastFailureAtMs),
    last_error: a.lastError,
    failing_since: iso(a.failingSinceMs),
    failures: a.failures,
    segments_waiting: a.segmentsWaiting,
  };
}

/** A yes/no query parameter: absent is no; anything but true/1/false/0 is refused, not read as no. */
function flagParam<N extends string>(query: RouteQuery<N>, name: N): boolean {
  const v = query.get(name);
  if (v === null || v === "false" || v === "0") return false;
  if (v === "true" || v === "1" || v === "") return true;
  throw badRequest(`?${name}=${v} is neither true nor false`, `use ?${name}=true or leave it out`);
}
