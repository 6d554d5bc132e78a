// Secret redaction for the support bundle. A configuration is redacted line by line, so that
// its comments and layout stay for whoever reads it, and a file that does not parse (often why
// help is wanted) is redacted as well as one that does. What counts as a secret:
//  - the value of any key whose name says key, secret, token, password, credential or auth;
//  - NAME=value assignments with such a name anywhere in a value (archive_command's
//    `AWS_SECRET_ACCESS_KEY=… aws s3 cp …`), and `--password value` style flags;
//  - user:password@ in URLs and `-u user:password`, Authorization headers and headers named like
//    a secret (X-Api-Key: …), openssl's `pass:…`, `sshpass -p …`, AWS access key ids, PEM private keys.
// Every value redacted from the configuration is also removed from every other file of the
// bundle (logs, answers of the node), wherever it appears.

import { readFileSync } from "node:fs";

export const REDACTED = "[REDACTED]";

/** Names of keys, variables and flags whose values are secrets. */
const secretName = /key|secret|token|passw|passphrase|pwd|credential|auth|cookie|session|private/i;

/** Shorter values are not scrubbed elsewhere: "1" or "on" would blank out every file. */
const scrubLengthMin = 4;

export interface Redaction {
  readonly text: string;
  /** The secret values that were removed, to scrub from the other files too. */
  readonly secrets: readonly string[];
}

/** A TOML configuration with every secret replaced by [REDACTED]. */
export function redactConfig(text: string): Redaction {
  const secrets = new Set<string>();
  const out: string[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? "";
    const m = /^(\s*)((?:"[^"]*"|'[^']*'|[A-Za-z0-9_.-]+)(?:\s*\.\s*(?:"[^"]*"|'[^']*'|[A-Za-z0-9_.-]+))*)(\s*=\s*)(.*)$/.exec(line);
    if (m === null || !secretName.test(m[2] ?? "")) {
      out.push(redactText(line, secrets));
      continue;
    }
    let value = m[4] ?? "";
    // A multi-line string or array goes on until its closing delimiter: all of it is secret.
    const closer = value.startsWith('"""') ? '"""' : value.startsWith("'''") ? "'''" : value.startsWith("[") ? "]" : null;
    if (closer !== null && !closes(value, closer)) {
      while (i + 1 < lines.length) {
        i++;
        value += `\n${lines[i] ?? ""}`;
        if ((lines[i] ?? "").includes(closer)) break;
      }
    }
    for (const s of literalValues(value)) secrets.add(s);
    out.push(`${m[1] ?? ""}${m[2] ?? ""}${m[3] ?? ""}"${REDACTED}"`);
  }
  return { text: out.join("\n"), secrets: [...secrets].filter((s) => s.length >= scrubLengthMin) };
}

function closes(value: string, closer: string): boolean {
  return value.indexOf(closer, closer === "]" ? 1 : 3) >= 0;
}

/** The string contents of a TOML value (quoted pieces), or the bare value itself. */
function literalValues(value: string): string[] {
  const withoutComment = value.replace(/\s+#[^"']*$/, "").trim();
  const quoted = [...withoutComment.matchAll(/"""([\s\S]*?)"""|'''([\s\S]*?)'''|"((?:[^"\\]|\\.)*)"|'([^']*)'/g)].map((q) => q[1] ?? q[2] ?? q[3] ?? q[4] ?? "");
  const values = quoted.length > 0 ? quoted : [withoutComment];
  // A TOML basic string's escapes as the node would read them, and as written in the file.
  return values.flatMap((v) => [v, v.replace(/\\"/g, '"').replace(/\\\\/g, "\\")]).map((v) => v.trim()).filter((v) => v !== "");
}

/**
 * Secrets inside free text (a value, a log line, a command): assignments and flags with
 * secret names, URL credentials, Authorization headers, well-known key shapes. Each value
 * removed is added to `found`.
 */
export function redactText(text: string, found: Set<string> = new Set()): string {
  const take = (v: string): string => {
    found.add(v);
    return REDACTED;
  };
  return text
    .replace(/-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)/g, (block) => take(block))
    // NAME=value, NAME="value", NAME='value' (also with escaped quotes inside a TOML string).
    .replace(/\b([A-Za-z_][A-Za-z0-9_.-]*)=(\\?"(?:[^"\\]|\\[^"])*\\?"|'[^']*'|[^\s"'\\;&|]+)/g, (all, name: string, value: string) =>
      secretName.test(name) && !value.includes(REDACTED) ? `${name}=${take(unquote(value))}` : all)
    // key = "value" inside an inline table or a line that is not a plain key line
    .replace(/\b([A-Za-z0-9_-]+)(\s*=\s*)("(?:[^"\\]|\\.)*"|'[^']*')/g, (all, name: string, eq: string, value: string) =>
      secretName.test(name) && !value.includes(REDACTED) ? `${name}${eq}"${take(unquote(value))}"` : all)
    // --password value, --secret-key=value, -password value
    .replace(/(?<![\w-])(--?[A-Za-z0-9_-]+)(=|\s+)(\\?"(?:[^"\\]|\\[^"])*\\?"|'[^']*'|(?!-)[^\s"'\\;&|]+)/g, (all, flag: string, sep: string, value: string) =>
      secretName.test(flag) && !value.startsWith("-") && !value.includes(REDACTED) ? `${flag}${sep}${take(unquote(value))}` : all)
    // curl -u user:password, --user=user:password
    .replace(/(?<![\w-])(-u|--user|--proxy-user)(=|\s+)(["']?)([^\s:"']+):([^\s"']+)/g, (_all, flag: string, sep: string, quote: string, user: string, password: string) =>
      `${flag}${sep}${quote}${user}:${password === REDACTED ? password : take(password)}`)
    // scheme://user:password@host
    .replace(/([a-z][a-z0-9+.-]*:\/\/)([^\s:@/"']+):([^\s@/"']+)@/gi, (_all, scheme: string, user: string, password: string) => `${scheme}${user}:${take(password)}@`)
    // Authorization: Bearer xxx / Basic xxx
    .replace(/(authorization\s*[:=]\s*)((?:bearer|basic|token)\s+)?([^\s"',;]+)/gi, (_all, head: string, kind: string | undefined, value: string) =>
      `${head}${kind ?? ""}${value === REDACTED ? value : take(value)}`)
    // Headers named like a secret: -H 'X-Api-Key: value', --header "X-Auth-Token: value"
    .replace(/(?<![\w/.-])([A-Za-z0-9-]*(?:key|token|secret|session|cookie)[A-Za-z0-9-]*\s*:\s*)([^\s"',;]+)/gi, (all, head: string, value: string) =>
      value === REDACTED || value.startsWith("//") ? all : `${head}${take(value)}`)
    // openssl's pass:value, sshpass -p value
    .replace(/(?<![\w-])pass:([^\s"']+)/g, (all, value: string) => (value === REDACTED ? all : `pass:${take(value)}`))
    .replace(/(\bsshpass\s+-p\s*)(["']?)([^\s"']+)/g, (all, head: string, quote: string, value: string) => (value === REDACTED ? all : `${head}${quote}${take(value)}`))
    // AWS access key ids
    .replace(/\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g, (id) => take(id));
}

function unquote(value: string): string {
  return value.replace(/^\\?["']/, "").replace(/\\?["']$/, "");
}

/**
 * What the key and token files the configuration names hold: each file's whole text and each
 * word of it long enough to be a secret (a token, a hash, a line of a PEM key). A file that
 * cannot be read gives nothing: what this process cannot read, it cannot leak either.
 */
export function secretFileValues(paths: readonly string[]): string[] {
  const out: string[] = [];
  for (const path of paths) {
    let text: string;
    try {
      text = readFileSync(path, "utf8");
    } catch {
      continue;
    }
    out.push(text.trim());
    for (const line of text.split("\n")) {
      if (line.startsWith("#") || line.startsWith("-----")) continue;
      for (const word of line.split(/\s+/)) if (word.length >= secretWordLengthMin) out.push(word);
    }
  }
  return out.filter((s) => s.length >= scrubLengthMin);
}

/** Words of a secret file shorter than this (a role, a name) are not secrets. */
const secretWordLengthMin = 16;

/** Remove every known secret value from `text`, wherever it appears. */
export function scrub(text: string, secrets: readonly string[]): string {
  let out = text;
  // Longest first: a secret that contains another is removed whole.
  for (const s of [...secrets].sort((a, b) => b.length - a.length)) if (s.length >= scrubLengthMin) out = out.split(s).join(REDACTED);
  return out;
}
