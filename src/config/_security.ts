// Reads [tls], [auth] and [gossip]. An absent table turns the feature off (null); a present
// one must be complete. Paths must be absolute, like data_dir: a relative one would depend on
// the directory svc starts in. Certificate and key files must exist; the tokens file may not
// exist yet (the first `svc admin token create` makes it) but when it does its mode is checked
// here, so --validate says what `svc serve` would refuse. The gossip key file must exist, have
// mode 0600 and hold one or two well-formed keys. A problem with one of these files as it is
// now, rather than with the configuration's text, is marked (addFile): `serve` exits 1 for it.

import { isAbsolute } from "node:path";
import type { Problems } from "./_problems.ts";
import { statConfigPath } from "./_stat.ts";
import { readBool, readString, readTable, type TomlTable } from "./_read.ts";
import { ROOT_FIELDS, type FieldSpec, type TableSpec } from "./schema.ts";
import { secretFileModeProblem } from "./secrets.ts";
import { readGossipKeyFile } from "./gossip-key.ts";
import type { AuthSettings, GossipSettings, TlsSettings } from "./types.ts";

export interface SecuritySettings {
  readonly tls: TlsSettings | null;
  readonly auth: AuthSettings | null;
  readonly gossip: GossipSettings | null;
}

export function readSecurity(root: TomlTable, problems: Problems): SecuritySettings | undefined {
  const tls = root["tls"] === undefined ? null : readTls(root, problems);
  const auth = root["auth"] === undefined ? null : readAuth(root, problems);
  const gossip = root["gossip"] === undefined ? null : readGossip(root, problems);
  if (tls === undefined || auth === undefined || gossip === undefined) return undefined;
  return { tls, auth, gossip };
}

/** [gossip]: without key_file gossip stays authenticated by the cluster id only (null). */
function readGossip(root: TomlTable, problems: Problems): GossipSettings | null | undefined {
  const spec = tableSpec("gossip");
  const table = readTable(root, "gossip", spec, problems);
  if (table === undefined) return undefined;
  const keyFile = readString(table, "key_file", stringSpec(spec, "key_file"), ["gossip"], problems);
  if (keyFile === undefined) return undefined;
  if (keyFile === "") return null;
  if (!absolute("gossip", "key_file", keyFile, problems)) return undefined;
  const looked = statConfigPath(keyFile);
  if ("problem" in looked) {
    problems.add(["gossip", "key_file"], looked.problem, { secretsFile: !looked.inText });
    return undefined;
  }
  const stat = looked.stat;
  if (stat === undefined || !stat.isFile()) {
    // Missing, it may yet be written; a directory where a file is named is the text's mistake.
    problems.add(["gossip", "key_file"], stat === undefined
      ? `${JSON.stringify(keyFile)} does not exist; make one with \`svc admin gossip keygen > ${keyFile}\` and chmod 600 it`
      : `${JSON.stringify(keyFile)} is not a file; name the key file itself (make one with \`svc admin gossip keygen > FILE\` and chmod 600 it)`, { secretsFile: stat === undefined });
    return undefined;
  }
  const modeProblem = secretFileModeProblem(keyFile, stat.mode);
  if (modeProblem !== null) {
    problems.addFile(["gossip", "key_file"], modeProblem);
    return undefined;
  }
  const read = readGossipKeyFile(keyFile);
  if ("problem" in read) {
    problems.addFile(["gossip", "key_file"], read.problem);
    return undefined;
  }
  return { keyFile };
}

function readTls(root: TomlTable, problems: Problems): TlsSettings | undefined {
  const spec = tableSpec("tls");
  const table = readTable(root, "tls", spec, problems);
  if (table === undefined) return undefined;
  const path = (key: string, required: boolean): string | undefined => readPath(table, "tls", key, spec, required, problems);
  const certFile = path("cert_file", true);
  const keyFile = path("key_file", true);
  const clientCaFile = path("client_ca_file", false);
  const caFile = path("ca_file", false);
  const peerCaFile = path("peer_ca_file", false);
  if (certFile === undefined || keyFile === undefined || clientCaFile === undefined || caFile === undefined || peerCaFile === undefined) return undefined;
  return { certFile, keyFile, clientCaFile, caFile, peerCaFile };
}

function readAuth(root: TomlTable, problems: Problems): AuthSettings | undefined {
  const spec = tableSpec("auth");
  const table = readTable(root, "auth", spec, problems);
  if (table === undefined) return undefined;
  const tokensFile = readString(table, "tokens_file", stringSpec(spec, "tokens_file"), ["auth"], problems);
  const tokenFile = readString(table, "token_file", stringSpec(spec, "token_file"), ["auth"], problems);
  const metricsField = spec["metrics_open"];
  const metricsOpen = metricsField?.kind === "bool" ? readBool(table, "metrics_open", metricsField, ["auth"], problems) : undefined;
  if (tokensFile === undefined || tokenFile === undefined || metricsOpen === undefined) return undefined;
  if (tokensFile === "") {
    problems.add(["auth", "tokens_file"], "is required when [auth] is present: the file of token hashes and roles (create it with `svc admin token create --role admin --tokens-file FILE`)");
    return undefined;
  }
  if (!absolute("auth", "tokens_file", tokensFile, problems)) return undefined;
  if (tokenFile !== "" && !absolute("auth", "token_file", tokenFile, problems)) return undefined;
  const looked = statConfigPath(tokensFile);
  if ("problem" in looked) {
    problems.add(["auth", "tokens_file"], looked.problem, { secretsFile: !looked.inText });
    return undefined;
  }
  const stat = looked.stat;
  if (stat !== undefined && !stat.isFile()) {
    // A directory or a device where the file of hashes is named: the text's mistake, and no chmod fixes it.
    problems.add(["auth", "tokens_file"], `${JSON.stringify(tokensFile)} is not a file; name the tokens file itself (create it with \`svc admin token create --role admin --tokens-file FILE\`)`);
    return undefined;
  }
  if (stat !== undefined) {
    const modeProblem = secretFileModeProblem(tokensFile, stat.mode);
    if (modeProblem !== null) problems.addFile(["auth", "tokens_file"], modeProblem);
  }
  return { tokensFile, tokenFile, metricsOpen };
}

/** An absolute path to an existing file, "" when optional and absent, undefined after a problem. */
function readPath(table: TomlTable, tableName: string, key: string, spec: TableSpec, required: boolean, problems: Problems): string | undefined {
  const value = readString(table, key, stringSpec(spec, key), [tableName], problems);
  if (value === undefined) return undefined;
  if (value === "") {
    if (!required) return "";
    problems.add([tableName, key], `is required when [${tableName}] is present`);
    return undefined;
  }
  if (!absolute(tableName, key, value, problems)) return undefined;
  const looked = statConfigPath(value);
  if ("problem" in looked) {
    problems.add([tableName, key], `${looked.problem}; give the path of a PEM file`, { secretsFile: !looked.inText });
    return undefined;
  }
  const stat = looked.stat;
  if (stat === undefined || !stat.isFile()) {
    problems.add([tableName, key], `${JSON.stringify(value)} ${stat === undefined ? "does not exist" : "is not a file"}; give the path of a PEM file`, { secretsFile: stat === undefined });
    return undefined;
  }
  return value;
}

function absolute(tableName: string, key: string, value: string, problems: Problems): boolean {
  if (isAbsolute(value)) return true;
  problems.add([tableName, key], `must be an absolute path, got ${JSON.stringify(value)}; a relative path would depend on the directory svc is started from`);
  return false;
}

function tableSpec(name: string): TableSpec {
  const spec = ROOT_FIELDS[name];
  if (spec?.kind !== "table") throw new Error(`schema has a table ${name}`);
  return spec.fields;
}

function stringSpec(spec: TableSpec, key: string): FieldSpec & { kind: "string" } {
  const field = spec[key];
  if (field?.kind !== "string") throw new Error(`schema has a string field ${key}`);
  return field;
}
