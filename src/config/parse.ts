// parseConfig: TOML text → a frozen Config, or every problem in the file with its line.
// Syntax errors stop at the first (the TOML parser cannot go on); everything else is
// collected in one pass so that an operator fixes a file in one round.

import { closeSync, openSync, readSync, statSync, type Stats } from "node:fs";
import { isAbsolute } from "node:path";
import { parse, TomlError } from "smol-toml";
import { assert, errorMessage, pseudoFileSystemOf, pseudoFileSystemProblem } from "../util/index.ts";
import { checkListenPorts, checkMembers, checkRaftTimes, checkSelfInMembers } from "./_checks.ts";
import { createLocator } from "./_locate.ts";
import { readMembers } from "./_members.ts";
import { checkSelfEntry } from "./_self-entry.ts";
import { backupLocationProblem } from "./location.ts";
import { Problems } from "./_problems.ts";
import { SERVICE_GROUP, SERVICE_USER, groupNameOf, processHasGroup, processOwnerSpec, processUserName, processUserText, serviceGroupId, userNameOf } from "../util/user.ts";
import { statConfigPath } from "./_stat.ts";
import { checkUnknownKeys, readAddress, readBool, readInt, readString, readTable, type TomlTable } from "./_read.ts";
import { readSecurity } from "./_security.ts";
import { MIB, NODE_ID_PATTERN, PROTECTED_LISTEN_HOST, ROOT_FIELDS, type FieldSpec, type TableSpec } from "./schema.ts";
import type { Config, ConfigProblem, ConfigResult } from "./types.ts";

/**
 * No configuration comes near this (one with a hundred members is about 20 KiB); a file past it
 * was given by mistake (a log, a WAL segment, /dev/zero), and reading it whole could take the
 * host's memory.
 */
const configFileBytesMax = 1024 * 1024;

export function loadConfigFile(path: string): ConfigResult {
  let bytes: Uint8Array | null;
  try {
    bytes = readBounded(path, configFileBytesMax);
  } catch (e) {
    return { ok: false, problems: [{ keyPath: "", message: `cannot read the config file: ${unreadableText(path, e)}` }] };
  }
  if (bytes === null) {
    return { ok: false, problems: [{ keyPath: "", message: `the file is larger than ${configFileBytesMax / MIB} MiB, which no configuration is: is it the configuration file (/etc/svc/config.toml)?` }] };
  }
  const text = decodeUtf8(bytes);
  if (typeof text !== "string") return { ok: false, problems: [text] };
  return parseConfig(text, path);
}

/**
 * Why the file could not be read; for a permission refused, who svc runs as, the file's owner,
 * group and mode, and what lets it be read. The file is the service's (install.sh: 0640
 * root:svc), and the caller may be an operator rather than the service: a file the service's
 * group reads is not regrouped (to the caller's group, the service could no longer read it),
 * the caller runs the command as the service's user or joins that group. A host with no group
 * svc did not run install.sh: svc runs there as a user of its own (a unit's User=), and the
 * file is given to this process's group.
 */
function unreadableText(path: string, e: unknown): string {
  if ((e as { code?: unknown }).code !== "EACCES") return errorMessage(e);
  const user = processUserText();
  let st: Stats;
  try {
    st = statSync(path);
  } catch {
    return `svc runs as ${user}, and a directory on the way to ${path} does not let it through: see each one's owner and mode with \`namei -l ${path}\``;
  }
  const mode = (st.mode & 0o7777).toString(8).padStart(4, "0");
  const says = `svc runs as ${user}, and the file has owner ${userNameOf(st.uid)}, group ${groupNameOf(st.gid)}, mode ${mode}`;
  const serviceGid = serviceGroupId();
  if (serviceGid === null) {
    const group = processOwnerSpec().split(":")[1];
    return `${says}: let its group read it, \`chgrp ${group} ${path} && chmod 640 ${path}\`, or run svc as the user the file is for`;
  }
  const caller = processUserName();
  const asService = `run the command as the service's user (\`sudo -u ${SERVICE_USER} …\`), or add ${caller} to group ${SERVICE_GROUP} ` +
    `(\`usermod -aG ${SERVICE_GROUP} ${caller}\`, then log in again)`;
  if (st.gid === serviceGid && (st.mode & 0o040) !== 0 && !processHasGroup(st.gid)) {
    return `${says}: the service's group ${SERVICE_GROUP} reads it, and ${caller} is not in that group: ${asService}`;
  }
  const regroup = `let the service's group read it, \`chgrp ${SERVICE_GROUP} ${path} && chmod 640 ${path}\` (install.sh makes /etc/svc/config.toml 0640 root:${SERVICE_GROUP})`;
  return processHasGroup(serviceGid) ? `${says}: ${regroup}` : `${says}: ${regroup}; ${caller} is not in that group: then ${asService}`;
}

/** The file's bytes, read up to bytesMax (null past it); a pipe is read to its end like a file. */
function readBounded(path: string, bytesMax: number): Uint8Array | null {
  const fd = openSync(path, "r");
  try {
    const buffer = new Uint8Array(bytesMax + 1);
    let filled = 0;
    while (filled < buffer.byteLength) {
      const n = readSync(fd, buffer, filled, buffer.byteLength - filled, null);
      if (n === 0) break;
      filled += n;
    }
    return filled > bytesMax ? null : buffer.slice(0, filled);
  } finally {
    closeSync(fd);
  }
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * The file's text, or where its first byte that is not UTF-8 is: decoded lossily, such a byte
 * would become U+FFFD in a value (a path, a command) without a word.
 */
function decodeUtf8(bytes: Uint8Array): string | ConfigProblem {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    // The longest prefix that decodes (a sequence cut at the end is not an error while
    // streaming): the bad byte is the first one after it, or the sequence it ends.
    let good = 0;
    let bad = bytes.byteLength;
    while (bad - good > 1) {
      const mid = (good + bad) >>> 1;
      try {
        new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(0, mid), { stream: true });
        good = mid;
      } catch {
        bad = mid;
      }
    }
    const before = bytes.subarray(0, good);
    const lineStart = before.lastIndexOf(0x0a) + 1;
    let line = 1;
    for (const b of before) if (b === 0x0a) line++;
    return {
      line, column: good - lineStart + 1, keyPath: "",
      message: `the file is not valid UTF-8 (byte 0x${(bytes[good] ?? 0).toString(16).padStart(2, "0")} at offset ${good}); save it as UTF-8`,
    };
  }
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
  const locate = createLocator(text);
  const problems = new Problems(locate);
  // Problems and warnings --validate reports but serve does not refuse (see _self-entry.ts).
  const selfEntry = { problems: new Problems(locate), warnings: new Problems(locate) };
  // What --validate warns about in keys the node itself never reads ([backup]).
  const warnings = new Problems(locate);
  const config = readConfig(document, problems, selfEntry, warnings);
  if (config === undefined || problems.count > 0) return { ok: false, problems: [...problems.list, ...selfEntry.problems.list] };
  return { ok: true, config: deepFreeze(config), selfEntryProblems: selfEntry.problems.list, selfEntryWarnings: selfEntry.warnings.list, warnings: warnings.list };
}

function readConfig(root: TomlTable, problems: Problems, selfEntry: { problems: Problems; warnings: Problems }, warnings: Problems): Config | undefined {
  checkUnknownKeys(root, ROOT_FIELDS, [], problems);
  const nodeId = readString(root, "node_id", field(ROOT_FIELDS, "node_id", "string"), [], problems);
  if (nodeId !== undefined && !NODE_ID_PATTERN.test(nodeId)) {
    problems.add(["node_id"], `must be 1 to 64 characters of A-Z a-z 0-9 _ . -, got ${JSON.stringify(nodeId)}`);
  }
  const dataDir = readString(root, "data_dir", field(ROOT_FIELDS, "data_dir", "string"), [], problems);
  if (dataDir !== undefined) checkDataDir(dataDir, problems);
  const maxMemoryMb = readInt(root, "max_memory_mb", field(ROOT_FIELDS, "max_memory_mb", "int"), [], problems);
  const snapshotInterval = readInt(root, "snapshot_interval", field(ROOT_FIELDS, "snapshot_interval", "int"), [], problems);

  const security = readSecurity(root, problems);
  const listenSpec = tableFields(ROOT_FIELDS, "listen");
  const listenTable = readTable(root, "listen", listenSpec, problems) ?? {};
  const protectedListen = security?.tls != null && security.auth != null;
  const listenField = (key: string) => listenDefault(field(listenSpec, key, "address"), protectedListen);
  const listen = {
    client: readAddress(listenTable, "client", listenField("client"), ["listen"], problems),
    admin: readAddress(listenTable, "admin", listenField("admin"), ["listen"], problems),
    peer: readAddress(listenTable, "peer", listenField("peer"), ["listen"], problems),
  };
  checkListenPorts(listen, problems);

  const clusterSpec = tableFields(ROOT_FIELDS, "cluster");
  const clusterTable = readTable(root, "cluster", clusterSpec, problems) ?? {};
  const bootstrap = readBool(clusterTable, "bootstrap", field(clusterSpec, "bootstrap", "bool"), ["cluster"], problems);
  const members = readMembers(clusterTable, problems);
  if (members !== undefined) checkMembers(members.members, problems);
  checkSelfInMembers(nodeId, bootstrap, members?.ids, problems);
  if (members !== undefined) checkSelfEntry(nodeId, listen, members.members, selfEntry.problems, selfEntry.warnings);

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

  const limitsSpec = tableFields(ROOT_FIELDS, "limits");
  const limitsTable = readTable(root, "limits", limitsSpec, problems) ?? {};
  const queryTimeoutMs = readInt(limitsTable, "query_timeout_ms", field(limitsSpec, "query_timeout_ms", "int"), ["limits"], problems);
  const adminQueryTimeoutMs = readInt(limitsTable, "admin_query_timeout_ms", field(limitsSpec, "admin_query_timeout_ms", "int"), ["limits"], problems);
  const writeCheckTimeoutMs = readInt(limitsTable, "write_check_timeout_ms", field(limitsSpec, "write_check_timeout_ms", "int"), ["limits"], problems);
  const clientRequestsPerSecond = readInt(limitsTable, "client_requests_per_second", field(limitsSpec, "client_requests_per_second", "int"), ["limits"], problems) ?? 0;
  const clientConnectionsMax = readInt(limitsTable, "client_connections_max", field(limitsSpec, "client_connections_max", "int"), ["limits"], problems) ?? 0;

  const backupSpec = tableFields(ROOT_FIELDS, "backup");
  const backupTable = readTable(root, "backup", backupSpec, problems) ?? {};
  const backupDir = readString(backupTable, "dir", field(backupSpec, "dir", "string"), ["backup"], problems);
  const backupOffsite = readString(backupTable, "offsite", field(backupSpec, "offsite", "string"), ["backup"], problems);
  // Only the backup commands read these, and they refuse a location that is none (cli/_location.ts):
  // a warning here, so that a node whose file loaded before does not stop loading it.
  for (const [key, value] of [["dir", backupDir], ["offsite", backupOffsite]] as const) {
    const problem = value === undefined ? null : backupLocationProblem(value);
    if (problem !== null) warnings.add(["backup", key], `${problem}; the node starts, and the backups refuse it until it is fixed`);
  }
  const retainDays = readInt(backupTable, "retain_days", field(backupSpec, "retain_days", "int"), ["backup"], problems);
  const offsiteRetainDays = readInt(backupTable, "offsite_retain_days", field(backupSpec, "offsite_retain_days", "int"), ["backup"], problems);

  if (
    backupDir === undefined || backupOffsite === undefined || retainDays === undefined || offsiteRetainDays === undefined ||
    nodeId === undefined || dataDir === undefined || maxMemoryMb === undefined || snapshotInterval === undefined ||
    listen.client === undefined || listen.admin === undefined || listen.peer === undefined ||
    bootstrap === undefined || members === undefined ||
    archiveCommand === undefined || archiveTimeoutS === undefined || segmentSizeMb === undefined ||
    heartbeatIntervalMs === undefined || electionTimeoutMs === undefined ||
    queryTimeoutMs === undefined || adminQueryTimeoutMs === undefined || writeCheckTimeoutMs === undefined
  ) {
    return undefined;
  }
  return {
    nodeId,
    // Undefined only after a problem was recorded, when this Config is not returned.
    tls: security?.tls ?? null,
    auth: security?.auth ?? null,
    gossip: security?.gossip ?? null,
    dataDir,
    maxMemoryBytes: maxMemoryMb * MIB,
    snapshotIntervalEntries: snapshotInterval,
    listen: { client: listen.client, admin: listen.admin, peer: listen.peer },
    cluster: { bootstrap, members: members.members.map(({ member }) => member) },
    wal: { archiveCommand, archiveTimeoutMs: archiveTimeoutS * 1000, segmentSizeBytes: segmentSizeMb * MIB },
    raft: { heartbeatIntervalMs, electionTimeoutMs },
    limits: { queryTimeoutMs, adminQueryTimeoutMs, writeCheckTimeoutMs, clientRequestsPerSecond, clientConnectionsMax },
    backup: { dir: backupDir, offsite: backupOffsite, retainMs: retainDays * 86_400_000, offsiteRetainMs: offsiteRetainDays * 86_400_000 },
  };
}

/**
 * data_dir must be an absolute path: a relative one would depend on the directory the service
 * happens to start in. A path that exists must be a directory.
 */
function checkDataDir(dataDir: string, problems: Problems): void {
  if (dataDir === "") {
    problems.add(["data_dir"], "must not be empty; the node keeps its WAL, snapshots and store there");
    return;
  }
  if (!isAbsolute(dataDir)) {
    problems.add(["data_dir"], `must be an absolute path, got ${JSON.stringify(dataDir)}; a relative path would depend on the directory svc is started from (write e.g. "/var/lib/svc")`);
    return;
  }
  const looked = statConfigPath(dataDir);
  if ("problem" in looked) {
    problems.add(["data_dir"], `${looked.problem}; point data_dir at a directory (it is created if missing)`);
    return;
  }
  const stat = looked.stat;
  if (stat !== undefined && !stat.isDirectory()) {
    problems.add(["data_dir"], `${JSON.stringify(dataDir)} is a file, not a directory; point data_dir at a directory (it is created if missing)`);
    return;
  }
  const pseudo = pseudoFileSystemOf(dataDir);
  if (pseudo !== null) problems.add(["data_dir"], `${pseudoFileSystemProblem(dataDir, pseudo)}; point data_dir at a directory on a disk (write e.g. "/var/lib/svc")`);
}

/** A listener left out binds loopback, or every interface once TLS and tokens protect it. */
function listenDefault(spec: FieldSpec & { kind: "address" }, protectedListen: boolean): FieldSpec & { kind: "address" } {
  if (!protectedListen || spec.default === undefined) return spec;
  return { ...spec, default: `${PROTECTED_LISTEN_HOST}:${spec.default.slice(spec.default.lastIndexOf(":") + 1)}` };
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
