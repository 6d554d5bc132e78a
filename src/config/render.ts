// Writes a config file: what the installer puts in /etc/svc/config.toml and what dev-cluster
// gives each node. The text parses back to the same Config; keys absent from a draft take
// the documented defaults and are still written out, with a comment, so the file documents itself.

import { assert } from "../util/index.ts";
import { MIB, ROOT_FIELDS, type FieldSpec, type TableSpec } from "./schema.ts";
import type { AddressInput, ConfigDraft } from "./types.ts";

const COMMENT_COLUMN = 35;

/** A line with a trailing comment, the comments aligned as in the documented example. */
function note(line: string, comment: string): string {
  return `${line.padEnd(COMMENT_COLUMN - 1)} # ${comment}`;
}

export function renderConfigToml(draft: ConfigDraft): string {
  const listen = draft.listen ?? {};
  const cluster = draft.cluster ?? {};
  const wal = draft.wal ?? {};
  const raft = draft.raft ?? {};
  const limits = draft.limits ?? {};
  const members = cluster.members ?? [];
  const lines = [
    `node_id = ${tomlString(draft.nodeId)}`,
    `data_dir = ${tomlString(draft.dataDir ?? stringDefault(ROOT_FIELDS, "data_dir"))}`,
    `max_memory_mb = ${megabytes(draft.maxMemoryBytes, ROOT_FIELDS, "max_memory_mb")}`,
    note(`snapshot_interval = ${draft.snapshotIntervalEntries ?? intDefault(ROOT_FIELDS, "snapshot_interval")}`, "log entries between checkpoints (the store made durable up to an applied index)"),
    "",
    note("[listen]", "where this node binds"),
    `client = ${address(listen.client, "listen", "client")}`,
    `admin = ${address(listen.admin, "listen", "admin")}`,
    note(`peer = ${address(listen.peer, "listen", "peer")}`, "Raft over TCP and gossip over UDP"),
    "",
    "[cluster]",
    note(`bootstrap = ${cluster.bootstrap ?? false}`, "true on one node only, the first time a new cluster starts"),
    note(members.length === 0 ? "members = []" : "members = [", "how the nodes reach each other"),
    ...members.map((m) => `  { id = ${tomlString(m.id)}, peer = ${address(m.peer)}, client = ${address(m.client)}, admin = ${address(m.admin)} },`),
    ...(members.length === 0 ? [] : ["]"]),
    "",
    "[wal]",
    note(`archive_command = ${tomlString(wal.archiveCommand ?? "")}`, 'e.g. "cp %p /var/backups/svc/wal/%f"; empty: no archiving'),
    note(`archive_timeout = ${seconds(wal.archiveTimeoutMs)}`, "seconds"),
    `segment_size_mb = ${megabytes(wal.segmentSizeBytes, sub("wal"), "segment_size_mb")}`,
    "",
    "[raft]",
    `heartbeat_interval_ms = ${raft.heartbeatIntervalMs ?? intDefault(sub("raft"), "heartbeat_interval_ms")}`,
    note(`election_timeout_ms = ${raft.electionTimeoutMs ?? intDefault(sub("raft"), "election_timeout_ms")}`, "at least 5 × heartbeat_interval_ms"),
    "",
    note("[limits]", "what one statement may cost"),
    note(`query_timeout_ms = ${limits.queryTimeoutMs ?? intDefault(sub("limits"), "query_timeout_ms")}`, "a client's read is stopped after this"),
    note(`admin_query_timeout_ms = ${limits.adminQueryTimeoutMs ?? intDefault(sub("limits"), "admin_query_timeout_ms")}`, "svc admin query and stats"),
    note(`write_check_timeout_ms = ${limits.writeCheckTimeoutMs ?? intDefault(sub("limits"), "write_check_timeout_ms")}`, "a write tried before the log is refused after this"),
    note(`client_requests_per_second = ${limits.clientRequestsPerSecond ?? intDefault(sub("limits"), "client_requests_per_second")}`, "per client address and port, 429 beyond; 0: no limit"),
    note(`client_connections_max = ${limits.clientConnectionsMax ?? intDefault(sub("limits"), "client_connections_max")}`, "open connections per client address and port; 0: no limit"),
    ...securityLines(draft),
  ];
  return lines.join("\n") + "\n";
}

/** [tls], [auth] and [gossip] when the draft has them; nothing (TLS, tokens and gossip encryption off) otherwise. */
function securityLines(draft: ConfigDraft): string[] {
  const out: string[] = [];
  const { tls, auth, gossip } = draft;
  if (tls != null) {
    out.push("", note("[tls]", "HTTPS on the client and admin ports (TLS 1.2+); reloaded on change and SIGHUP"));
    out.push(`cert_file = ${tomlString(tls.certFile)}`, `key_file = ${tomlString(tls.keyFile)}`);
    if (tls.clientCaFile !== "") out.push(note(`client_ca_file = ${tomlString(tls.clientCaFile)}`, "clients must present a certificate it signed"));
    if (tls.caFile !== "") out.push(note(`ca_file = ${tomlString(tls.caFile)}`, "the CA of the nodes' certificates"));
    if (tls.peerCaFile !== "") out.push(note(`peer_ca_file = ${tomlString(tls.peerCaFile)}`, "mutual TLS on the peer port"));
  }
  if (auth != null) {
    out.push("", note("[auth]", "tokens with roles (read, write, admin)"));
    out.push(note(`tokens_file = ${tomlString(auth.tokensFile)}`, "hashes and roles, mode 0600"));
    if (auth.tokenFile !== "") out.push(note(`token_file = ${tomlString(auth.tokenFile)}`, "the token svc admin sends"));
    out.push(`metrics_open = ${auth.metricsOpen}`);
  }
  if (gossip != null) {
    out.push("", note("[gossip]", "gossip encrypted with a shared key (AES-256-GCM)"));
    out.push(note(`key_file = ${tomlString(gossip.keyFile)}`, "1 or 2 base64 keys, mode 0600; reloaded on SIGHUP"));
  }
  return out;
}

/** A TOML basic string. JSON escapes are TOML escapes too, except that TOML also forbids a raw DEL. */
export function tomlString(value: string): string {
  return JSON.stringify(value).replaceAll("\u007f", "\\u007F");
}

function address(value: AddressInput | undefined, table?: string, key?: string): string {
  if (value !== undefined) return tomlString(typeof value === "string" ? value : value.raw);
  assert(table !== undefined && key !== undefined, "member addresses have no default");
  return tomlString(stringDefault(sub(table), key));
}

function megabytes(bytes: number | undefined, spec: TableSpec, key: string): number {
  if (bytes === undefined) return intDefault(spec, key);
  assert(Number.isInteger(bytes / MIB), `${key} is a whole number of megabytes`);
  return bytes / MIB;
}

function seconds(ms: number | undefined): number {
  if (ms === undefined) return intDefault(sub("wal"), "archive_timeout");
  assert(Number.isInteger(ms / 1000), "archive_timeout is a whole number of seconds");
  return ms / 1000;
}

function sub(table: string): TableSpec {
  const spec = ROOT_FIELDS[table];
  assert(spec?.kind === "table", `${table} is a table`);
  return spec.fields;
}

function intDefault(spec: TableSpec, key: string): number {
  const field: FieldSpec | undefined = spec[key];
  assert(field?.kind === "int" && field.default !== undefined, `${key} has an integer default`);
  return field.default;
}

function stringDefault(spec: TableSpec, key: string): string {
  const field: FieldSpec | undefined = spec[key];
  assert((field?.kind === "string" || field?.kind === "address") && field.default !== undefined, `${key} has a string default`);
  return field.default;
}
