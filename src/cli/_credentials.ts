// The token and TLS settings `svc admin` uses toward a node. The token comes from --token-file,
// else SVC_TOKEN, else [auth] token_file in --config; the CA to trust from --cacert, else
// [tls] ca_file; with --config, the node's own certificate and key are presented when the
// node asks for a client certificate. A command talks to one cluster, so nodeUrl sets them
// once for every call the command makes (a NOT_LEADER followed to the leader included).

import { readFileSync } from "node:fs";
import type { Config } from "../config/index.ts";
import { errorMessage } from "../util/index.ts";
import { usageError } from "./_exit.ts";

export interface Credentials {
  readonly token: string | null;
  readonly ca?: string;
  readonly cert?: string;
  readonly key?: string;
}

let current: Credentials = { token: null };

export function useCredentials(credentials: Credentials): void {
  current = credentials;
}

export function nodeCredentials(args: { "token-file"?: string | undefined; cacert?: string | undefined }, config: Config | null): Credentials {
  const given = (v: string | undefined): v is string => v !== undefined && v !== "";
  let token: string | null = null;
  const fromEnv = process.env.SVC_TOKEN;
  if (given(args["token-file"])) token = checkedToken(readSecret(args["token-file"], "--token-file"), `${args["token-file"]} (--token-file)`);
  else if (given(fromEnv)) token = checkedToken(fromEnv.trim(), "SVC_TOKEN");
  else if (config?.auth != null && config.auth.tokenFile !== "") token = checkedToken(readSecret(config.auth.tokenFile, "[auth] token_file"), `${config.auth.tokenFile} ([auth] token_file)`);
  const caPath = given(args.cacert) ? args.cacert : config?.tls?.caFile ?? "";
  const out: { token: string | null; ca?: string; cert?: string; key?: string } = { token };
  if (caPath !== "") out.ca = checkedCa(readSecret(caPath, given(args.cacert) ? "--cacert" : "[tls] ca_file"), `${caPath} (${given(args.cacert) ? "--cacert" : "[tls] ca_file"})`);
  if (config?.tls != null && config.tls.clientCaFile !== "") {
    out.cert = readSecret(config.tls.certFile, "[tls] cert_file");
    out.key = readSecret(config.tls.keyFile, "[tls] key_file");
  }
  return out;
}

export function credentialHeaders(): Record<string, string> {
  return current.token === null ? {} : { authorization: `Bearer ${current.token}` };
}

export function credentialTls(): { tls?: { ca?: string; cert?: string; key?: string } } {
  const { ca, cert, key } = current;
  if (ca === undefined && cert === undefined) return {};
  return { tls: { ...(ca === undefined ? {} : { ca }), ...(cert === undefined || key === undefined ? {} : { cert, key }) } };
}

/**
 * A token as `svc admin token create` prints it: one word of printable ASCII. Anything else
 * cannot go in an Authorization header (fetch refuses it before a byte is sent), so it is
 * refused here, saying where it came from and never what it holds: the tokens file of hashes
 * given in place of the token file is the likely mistake.
 */
function checkedToken(token: string, from: string): string {
  const create = "`svc admin token create --role admin` prints a new one";
  if (token === "") throw usageError(`${from} is empty: it should hold the token itself; ${create}`);
  if (token.includes("\n") || token.startsWith("sha256:")) {
    throw usageError(`${from} looks like a tokens file (lines of sha256:<hash> <role> <name>, which a node checks tokens against), not a token: ` +
      `give the file that holds the token itself (install.sh writes /etc/svc/admin-token); ${create}`);
  }
  const bad = [...token].findIndex((c) => !/^[\x21-\x7e]$/.test(c));
  if (bad >= 0) throw usageError(`${from}: the token holds a blank or a control character at character ${bad}; a token is one word of printable characters, as \`svc admin token create\` prints it`);
  return token;
}

/** A CA file must hold a PEM certificate: fetch would otherwise fail at the connection, as if the node were down. */
function checkedCa(text: string, from: string): string {
  if (!text.includes("-----BEGIN CERTIFICATE-----")) throw usageError(`${from} holds no PEM certificate (-----BEGIN CERTIFICATE-----): give the CA certificate that signed the node's certificate (ca.crt)`);
  return text;
}

/** A file's text; the message names the file and where it came from, never its content. */
function readSecret(path: string, from: string): string {
  try {
    return readFileSync(path, "utf8").trim();
  } catch (e) {
    throw usageError(`cannot read ${path} (${from}): ${errorMessage(e)}`);
  }
}

/** The secrets this command holds (its token), for the support bundle to scrub. */
export function credentialSecrets(): string[] {
  return current.token === null ? [] : [current.token];
}
