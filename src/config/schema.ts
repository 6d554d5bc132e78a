// The keys a config file may hold, their TOML types, bounds and defaults. One table drives
// validation, "did you mean" suggestions and the renderer's comments, so they cannot disagree.

export const MIB = 1024 * 1024;

export type FieldSpec =
  | { readonly kind: "int"; readonly min: number; readonly max: number; readonly default?: number; readonly unit?: string }
  | { readonly kind: "string"; readonly default?: string }
  | { readonly kind: "bool"; readonly default: boolean }
  | { readonly kind: "address"; readonly default?: string }
  | { readonly kind: "table"; readonly fields: TableSpec }
  | { readonly kind: "members" };

export type TableSpec = Readonly<Record<string, FieldSpec>>;

export const NODE_ID_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;

export const MEMBER_FIELDS: TableSpec = {
  id: { kind: "string" },
  peer: { kind: "address" },
  client: { kind: "address" },
  admin: { kind: "address" },
};

/** [tls], [auth] and [gossip]: absent tables turn TLS, tokens and gossip encryption off (README "Security"). */
export const SECURITY_FIELDS: TableSpec = {
  tls: {
    kind: "table",
    fields: {
      cert_file: { kind: "string", default: "" },
      key_file: { kind: "string", default: "" },
      client_ca_file: { kind: "string", default: "" },
      ca_file: { kind: "string", default: "" },
      peer_ca_file: { kind: "string", default: "" },
    },
  },
  auth: {
    kind: "table",
    fields: {
      tokens_file: { kind: "string", default: "" },
      token_file: { kind: "string", default: "" },
      metrics_open: { kind: "bool", default: false },
    },
  },
  gossip: {
    kind: "table",
    fields: {
      key_file: { kind: "string", default: "" },
    },
  },
};

/**
 * Listeners default to loopback (ROOT_FIELDS); with both [tls] and [auth] configured, a
 * listener left out binds every interface instead (SPEC §5: nothing is exposed unprotected).
 */
export const PROTECTED_LISTEN_HOST = "0.0.0.0";

export const ROOT_FIELDS: TableSpec = {
  ...SECURITY_FIELDS,
  node_id: { kind: "string" },
  data_dir: { kind: "string", default: "/var/lib/svc" },
  max_memory_mb: { kind: "int", min: 64, max: 1_048_576, default: 2048, unit: "megabytes" },
  snapshot_interval: { kind: "int", min: 1, max: 100_000_000, default: 10_000, unit: "log entries" },
  listen: {
    kind: "table",
    fields: {
      client: { kind: "address", default: "127.0.0.1:7878" },
      admin: { kind: "address", default: "127.0.0.1:9090" },
      peer: { kind: "address", default: "127.0.0.1:7879" },
    },
  },
  cluster: {
    kind: "table",
    fields: {
      bootstrap: { kind: "bool", default: false },
      members: { kind: "members" },
    },
  },
  wal: {
    kind: "table",
    fields: {
      archive_command: { kind: "string", default: "" },
      archive_timeout: { kind: "int", min: 1, max: 86_400, default: 60, unit: "seconds" },
      segment_size_mb: { kind: "int", min: 1, max: 1024, default: 64, unit: "megabytes" },
    },
  },
  raft: {
    kind: "table",
    fields: {
      heartbeat_interval_ms: { kind: "int", min: 10, max: 10_000, default: 100, unit: "milliseconds" },
      election_timeout_ms: { kind: "int", min: 50, max: 600_000, default: 1000, unit: "milliseconds" },
    },
  },
  limits: {
    kind: "table",
    fields: {
      query_timeout_ms: { kind: "int", min: 10, max: 3_600_000, default: 5000, unit: "milliseconds" },
      admin_query_timeout_ms: { kind: "int", min: 10, max: 3_600_000, default: 60_000, unit: "milliseconds" },
      write_check_timeout_ms: { kind: "int", min: 10, max: 600_000, default: 1000, unit: "milliseconds" },
      // Per client address, on the client and admin ports each; 0 turns the limit off.
      client_requests_per_second: { kind: "int", min: 0, max: 1_000_000, default: 0, unit: "requests a second" },
      client_connections_max: { kind: "int", min: 0, max: 100_000, default: 0, unit: "connections" },
    },
  },
  backup: {
    kind: "table",
    fields: {
      dir: { kind: "string", default: "" },
      offsite: { kind: "string", default: "" },
      retain_days: { kind: "int", min: 1, max: 3650, default: 30, unit: "days" },
      offsite_retain_days: { kind: "int", min: 1, max: 3650, default: 365, unit: "days" },
    },
  },
};

/** The election timeout must leave room for several lost heartbeats before a follower campaigns. */
export const ELECTION_TO_HEARTBEAT_RATIO_MIN = 5;

/** Every key path in the schema (without array indexes), for suggesting a key that sits in another table. */
export function allKeyPaths(): string[] {
  const out: string[] = [];
  const walk = (spec: TableSpec, prefix: string): void => {
    for (const [key, field] of Object.entries(spec)) {
      const path = prefix === "" ? key : `${prefix}.${key}`;
      out.push(path);
      if (field.kind === "table") walk(field.fields, path);
      if (field.kind === "members") walk(MEMBER_FIELDS, `${path}[]`);
    }
  };
  walk(ROOT_FIELDS, "");
  return out;
}
