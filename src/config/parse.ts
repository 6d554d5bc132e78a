// parseConfig: TOML text → a frozen Config, or every problem in the file with its line.
// Syntax errors stop at the first (the TOML parser cannot go on); everything else is
// collected in one pass so that an operator fixes a file in one round.

import { readFileSync } from "node:fs";
import { parse, TomlError } from "smol-toml";
import { assert, errorMessage } from "../util/index.ts";
import { checkListenPorts, checkMembers, checkRaftTimes, checkSelfInMembers } from "./_checks.ts";
import { createLocator } from "./_locate.ts";
import { readMembers } from "./_members.ts";
import { Problems } from "./_problems.ts";
import { checkUnknownKeys, readAddress, readBool, readInt, readString, readTable, type TomlTable } from "./_read.ts";
import { MIB, NODE_ID_PATTERN, ROOT_FIELDS, type FieldSpec, type TableSpec } from "./schema.ts";
import type { Config, ConfigResult } from "./types.ts";

export function loadConfigFile(path: string): ConfigResult {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    return { ok: false, problems: [{ keyPath: "", message: `cannot read the config file: ${errorMessage(e)}` }] };
  }
  return parseConfig(text, path);
}

export function parseConfig(text: string, sourceName: string): ConfigResult {
  let document: TomlTable;
  try {
    document = parse(text, { integersAsBigInt: true, unsafeKeyBehaviour: "throw" });
  } catch (e) {
    if (e instanceof TomlError) {
      const first = (e.message.split("\n")[0] ?? e.message).replace(/^Invalid TOML document: /, "");
      return { ok: false, problems: [{ line: e.line, column: e.column, keyPath: "", message: `TOML syntax error: ${first}` }] };
    }
    return { ok: false, problems: [{ keyPath: "", message: `cannot parse ${sourceName} as TOML: ${errorMessage(e)}` }] };
  }
  const problems = new Problems(createLocator(text));
  const config = readConfig(document, problems);
  if (config === undefined || problems.count > 0) return { ok: false, problems: problems.list };
  return { ok: true, config: deepFreeze(config) };
}

function readConfig(root: TomlTable, problems: Problems): Config | undefined {
  checkUnknownKeys(root, ROOT_FIELDS, [], problems);
  const nodeId = readString(root, "node_id", field(ROOT_FIELDS, "node_id", "string"), [], problems);
  if (nodeId !== undefined && !NODE_ID_PATTERN.test(nodeId)) {
    problems.add(["node_id"], `must be 1 to 64 characters of A-Z a-z 0-9 _ . -, got ${JSON.stringify(nodeId)}`);
  }
  const dataDir = readString(root, "data_dir", field(ROOT_FIELDS, "data_dir", "string"), [], problems);
  if (dataDir === "") problems.add(["data_dir"], "must not be empty; the node keeps its WAL, snapshots and store there");
  const maxMemoryMb = readInt(root, "max_memory_mb", field(ROOT_FIELDS, "max_memory_mb", "int"), [], problems);
  const snapshotInterval = readInt(root, "snapshot_interval", field(ROOT_FIELDS, "snapshot_interval", "int"), [], problems);

  const listenSpec = tableFields(ROOT_FIELDS, "listen");
  const listenTable = readTable(root, "listen", listenSpec, problems) ?? {};
  const listen = {
    client: readAddress(listenTable, "client", field(listenSpec, "client", "address"), ["listen"], problems),
    admin: readAddress(listenTable, "admin", field(listenSpec, "admin", "address"), ["listen"], problems),
    peer: readAddress(listenTable, "peer", field(listenSpec, "peer", "address"), ["listen"], problems),
  };
  checkListenPorts(listen, problems);

  const clusterSpec = tableFields(ROOT_FIELDS, "cluster");
  const clusterTable = readTable(root, "cluster", clusterSpec, problems) ?? {};
  const bootstrap = readBool(clusterTable, "bootstrap", field(clusterSpec, "bootstrap", "bool"), ["cluster"], problems);
  const members = readMembers(clusterTable, problems);
  if (members !== undefined) checkMembers(members.members, problems);
  checkSelfInMembers(nodeId, bootstrap, members?.ids, problems);

  const walSpec = tableFields(ROOT_FIELDS, "wal");
  const walTable = readTable(root, "wal", walSpec, problems) ?? {};
  const archiveCommand = readString(walTable, "archive_command", field(walSpec, "archive_command", "string"), ["wal"], problems);
  const archiveTimeoutS = readInt(walTable, "archive_timeout", field(walSpec, "archive_timeout", "int"), ["wal"], problems);
  const segmentSizeMb = readInt(walTable, "segment_size_mb", field(walSpec, "segment_size_mb", "int"), ["wal"], problems);

  const raftSpec = tableFields(ROOT_FIELDS, "raft");
  const raftTable = readTable(root, "raft", raftSpec, problems) ?? {};
  const heartbeatIntervalMs = readInt(raftTable, "heartbeat_interval_ms", field(raftSpec, "heartbeat_interval_ms", "int"), ["raft"], problems);
  const electionTimeoutMs = readInt(raftTable, "election_timeout_ms", field(raftSpec, "election_timeout_ms", "int"), ["raft"], problems);
  checkRaftTimes(heartbeatIntervalMs, electionTimeoutMs, problems);

  if (
    nodeId === undefined || dataDir === undefined || maxMemoryMb === undefined || snapshotInterval === undefined ||
    listen.client === undefined || listen.admin === undefined || listen.peer === undefined ||
    bootstrap === undefined || members === undefined ||
    archiveCommand === undefined || archiveTimeoutS === undefined || segmentSizeMb === undefined ||
    heartbeatIntervalMs === undefined || electionTimeoutMs === undefined
  ) {
    return undefined;
  }
  return {
    nodeId,
    dataDir,
    maxMemoryBytes: maxMemoryMb * MIB,
    snapshotIntervalEntries: snapshotInterval,
    listen: { client: listen.client, admin: listen.admin, peer: listen.peer },
    cluster: { bootstrap, members: members.members.map(({ member }) => member) },
    wal: { archiveCommand, archiveTimeoutMs: archiveTimeoutS * 1000, segmentSizeBytes: segmentSizeMb * MIB },
    raft: { heartbeatIntervalMs, electionTimeoutMs },
  };
}

function field<K extends FieldSpec["kind"]>(spec: TableSpec, key: string, kind: K): FieldSpec & { kind: K } {
  const found = spec[key];
  assert(found !== undefined && found.kind === kind, `schema has a ${kind} field ${key}`);
  return found as FieldSpec & { kind: K };
}

function tableFields(spec: TableSpec, key: string): TableSpec {
  return field(spec, key, "table").fields;
}

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}
