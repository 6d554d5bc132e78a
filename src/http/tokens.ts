// The tokens file: one token per line as `sha256:<hex> <role> [name]`, never the token itself.
// Tokens are 32 random bytes, so a fast hash is enough: a slow one (scrypt) protects guessable
// passwords, and would cost milliseconds on every request. A presented token is hashed and
// compared with every stored hash in constant time, whichever matches. The hash is Bun's
// one-shot SHA-256: node:crypto's createHash builds a Hash object per call, which was about
// 2% of a node's CPU per request under load; nothing is cached, so a reload is seen at once.
// The file must be readable by its owner only (0600); a file with other modes is refused.

import { randomBytes, timingSafeEqual } from "node:crypto";
import { chmodSync, chownSync, closeSync, fsyncSync, openSync, readFileSync, renameSync, statSync, writeSync } from "node:fs";
import { dirname, join } from "node:path";
import { secretFileModeProblem } from "../config/index.ts";
import { SvcError, errorMessage } from "../util/errors.ts";
import { processOwnerSpec } from "../util/user.ts";

export type Role = "read" | "write" | "admin";
export const roles: readonly Role[] = ["read", "write", "admin"];

/** A role grants every role below it: admin may write, write may read. */
export function roleGrants(held: Role, needed: Role): boolean {
  return roles.indexOf(held) >= roles.indexOf(needed);
}

export function isRole(value: string): value is Role {
  return (roles as readonly string[]).includes(value);
}

interface TokenEntry {
  readonly hash: Buffer;
  readonly role: Role;
  readonly name: string;
}

const tokenPrefix = "svc_";
const hashPrefix = "sha256:";
/** Bounds the file read at start and on every reload. */
const tokensFileBytesMax = 1024 * 1024;

/** A new token: "svc_" and 32 random bytes in base64url. */
export function newToken(): string {
  return tokenPrefix + randomBytes(32).toString("base64url");
}

function hashOf(token: string): Buffer {
  // Strings are hashed as UTF-8, as createHash(...).update(token, "utf8") did.
  return Bun.CryptoHasher.hash("sha256", token);
}

/** The tokens a node accepts, as read from its tokens file. */
export class TokenSet {
  private constructor(private readonly entries: readonly TokenEntry[]) {}

  /** Reads and checks the file; SvcError TOKENS_FILE_INVALID says what is wrong and what to do. */
  static read(path: string): TokenSet {
    let stat;
    try {
      stat = statSync(path);
    } catch (e) {
      throw invalid(path, `cannot read the tokens file ${path}: ${errorMessage(e)}`, `create it with \`svc admin token create --role admin --tokens-file ${path}\``);
    }
    if (!stat.isFile()) throw invalid(path, `the tokens file ${path} is not a file`, "name the tokens file itself ([auth] tokens_file, or --tokens-file)");
    const modeProblem = secretFileModeProblem(path, stat.mode);
    if (modeProblem !== null) throw invalid(path, `refusing the tokens file: ${modeProblem}`, `chmod 600 ${path}`);
    if (stat.size > tokensFileBytesMax) throw invalid(path, `the tokens file ${path} is ${stat.size} bytes, more than ${tokensFileBytesMax}`, "keep one line per token");
    let text: string;
    try {
      text = readFileSync(path, "utf8");
    } catch (e) {
      throw invalid(path, `cannot read the tokens file ${path}: ${errorMessage(e)}`,
        `it is owned by uid ${stat.uid}, and svc runs as uid ${process.getuid?.() ?? "?"}: give it to the service user (chown ${processOwnerSpec()} ${path})`);
    }
    return new TokenSet(parseTokens(text, path));
  }

  get size(): number {
    return this.entries.length;
  }

  /** Whether `other` holds the same tokens with the same roles and names, in the same order. */
  sameAs(other: TokenSet): boolean {
    return this.entries.length === other.entries.length &&
      this.entries.every((e, i) => {
        const o = other.entries[i];
        return o !== undefined && e.role === o.role && e.name === o.name && e.hash.equals(o.hash);
      });
  }

  /** The role of a presented token, or null. Every entry is compared, so the time taken says nothing about which. */
  roleOf(token: string): Role | null {
    const presented = hashOf(token);
    let found: Role | null = null;
    for (const e of this.entries) {
      if (timingSafeEqual(presented, e.hash) && found === null) found = e.role;
    }
    return found;
  }
}

function parseTokens(text: string, path: string): TokenEntry[] {
  return parseTokenLines(text, path).map(({ entry }) => entry);
}

/** Each token line of the file with its position (0-based line number); comments and blank lines are not listed. */
function parseTokenLines(text: string, path: string): { line: number; entry: TokenEntry }[] {
  const entries: { line: number; entry: TokenEntry }[] = [];
  for (const [i, raw] of text.split("\n").entries()) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const [hash = "", role = "", ...name] = line.split(/\s+/);
    // The line itself is never quoted in the message: it might be a token pasted by mistake.
    const where = `${path}:${i + 1}`;
    if (!hash.startsWith(hashPrefix) || !/^[0-9a-f]{64}$/.test(hash.slice(hashPrefix.length))) {
      throw invalid(path, `${where}: expected "sha256:<64 hex digits> <role> [name]"`, "add tokens with `svc admin token create`; the file holds hashes, never tokens");
    }
    if (!isRole(role)) throw invalid(path, `${where}: the role must be read, write or admin`, "fix the role on that line");
    entries.push({ line: i, entry: { hash: Buffer.from(hash.slice(hashPrefix.length), "hex"), role, name: name.join(" ") } });
  }
  return entries;
}

/** What `svc admin token list` shows of a token: never the token, and of its hash only the start. */
export interface TokenListing {
  readonly name: string;
  readonly role: Role;
  /** The first 12 hex digits of the token's SHA-256: enough to tell tokens apart and to revoke one. */
  readonly hashPrefix: string;
}

const listedHashDigits = 12;

function listingOf(e: TokenEntry): TokenListing {
  return { name: e.name, role: e.role, hashPrefix: e.hash.toString("hex").slice(0, listedHashDigits) };
}

/** The tokens in the file, in its order (the file is checked as a node checks it). */
export function listTokens(path: string): TokenListing[] {
  TokenSet.read(path);
  return parseTokens(readFileSync(path, "utf8"), path).map(listingOf);
}

/**
 * Removes from the file every token named `name` (as `token create` stores it: blanks become
 * hyphens), or the token whose hash starts with `hash` (at least 8 hex digits, `sha256:`
 * optional; lines holding that same hash all go), and returns what was removed. Every other
 * line, comments included, is kept as it was; the file is replaced atomically and keeps its
 * owner and mode. TOKEN_NOT_FOUND when nothing matches, TOKEN_AMBIGUOUS when a hash prefix
 * names different tokens; the value given is never repeated (it may be a token pasted by mistake).
 */
export function revokeTokens(path: string, match: { name: string } | { hash: string }): TokenListing[] {
  for (let attempt = 0; ; attempt++) {
    TokenSet.read(path);
    const text = readFileSync(path, "utf8");
    const lines = parseTokenLines(text, path);
    let chosen: { line: number; entry: TokenEntry }[];
    if ("name" in match) {
      const name = storedName(match.name);
      chosen = lines.filter((l) => l.entry.name === name);
    } else {
      const prefix = match.hash.toLowerCase().replace(/^sha256:/, "");
      if (!isHashPrefix(prefix)) {
        throw new SvcError("TOKEN_NOT_FOUND", "--hash takes 8 to 64 hex digits of a token's hash, as `svc admin token list` shows them (never the token itself)", {
          hint: `see the tokens with \`svc admin token list --tokens-file ${path}\``,
        });
      }
      chosen = lines.filter((l) => l.entry.hash.toString("hex").startsWith(prefix));
      const distinct = new Set(chosen.map((l) => l.entry.hash.toString("hex")));
      if (distinct.size > 1) {
        throw new SvcError("TOKEN_AMBIGUOUS", `${distinct.size} tokens in ${path} have hashes starting with ${prefix} (${chosen.map((l) => l.entry.name || "unnamed").join(", ")}); nothing was removed`, {
          hint: "give more digits of the hash",
        });
      }
    }
    if (chosen.length === 0) {
      const what = "name" in match ? `named ${JSON.stringify(storedName(match.name))}` : "with that hash";
      const names = lines.map((l) => l.entry.name || "(unnamed)");
      throw new SvcError("TOKEN_NOT_FOUND", `no token ${what} in ${path}; nothing was removed`, {
        hint: names.length === 0 ? "the file holds no tokens" : `the file holds: ${names.join(", ")} (see \`svc admin token list\`)`,
      });
    }
    const removed = new Set(chosen.map((l) => l.line));
    const kept = text.split("\n").filter((_, i) => !removed.has(i)).join("\n");
    // Another change made meanwhile (a token create) would be undone by this one: start over.
    if (replaceFileIfUnchanged(path, text, kept)) return chosen.map((l) => listingOf(l.entry));
    if (attempt >= 3) throw invalid(path, `${path} changed while it was being rewritten, each of 4 times; nothing was removed`, "retry once nothing else is editing it");
  }
}

/** Whether `value` can be (the start of) a hash as `token list` shows it. */
export function isHashPrefix(value: string): boolean {
  return /^[0-9a-f]{8,64}$/.test(value.toLowerCase().replace(/^sha256:/, ""));
}

/** A token's name as the file keeps it (one word: blanks become hyphens). */
function storedName(name: string): string {
  return name.replace(/\s+/g, "-");
}

/**
 * Replace the file's text, keeping its owner and mode, unless it no longer holds `expected`
 * (then nothing is written and false is returned). The check and the rename are a moment apart,
 * not one step: a change in that moment is lost, as with any two editors of one file.
 */
function replaceFileIfUnchanged(path: string, expected: string, text: string): boolean {
  if (readFileSync(path, "utf8") !== expected) return false;
  const stat = statSync(path);
  replaceFileAtomically(path, text, stat, stat.mode & 0o777);
  return true;
}

function invalid(path: string, message: string, hint: string): SvcError {
  return new SvcError("TOKENS_FILE_INVALID", message, { hint, details: { path } });
}

/**
 * Makes a token with `role` and adds its hash to the file (created 0600 when missing, owned by
 * `newFileOwner` when run as root; an existing file keeps its owner and must already be 0600). The file is replaced atomically.
 * Returns the token: it is shown once and stored nowhere.
 */
export function createToken(path: string, role: Role, name: string, newFileOwner: { uid: number; gid: number } | null = null): string {
  const stat = statSync(path, { throwIfNoEntry: false });
  let text = "# svc tokens: sha256:<hash of the token> <role> <name>; see `svc admin token create`\n";
  if (stat !== undefined) {
    // Refuses a file with a wrong mode or a damaged line before adding to it.
    TokenSet.read(path);
    text = readFileSync(path, "utf8");
    if (text !== "" && !text.endsWith("\n")) text += "\n";
  }
  const token = newToken();
  text += `${hashPrefix}${hashOf(token).toString("hex")} ${role} ${storedName(name)}\n`;
  // Run as root: an existing file keeps its owner; a new one goes to the service user (the node
  // reads it as that user, and refuses a file it cannot read).
  replaceFileAtomically(path, text, stat ?? newFileOwner, stat === undefined ? 0o600 : stat.mode & 0o777);
  return token;
}

/** Write `text` as the whole file, with `mode`, durable, under its name only once whole (a node reading it sees the old file or the new). */
function replaceFileAtomically(path: string, text: string, owner: { uid: number; gid: number } | null, mode: number): void {
  const temp = join(dirname(path), `.${path.slice(dirname(path).length + 1)}.${process.pid}.tmp`);
  const fd = openSync(temp, "wx", 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  chmodSync(temp, mode);
  if (owner !== null && (process.getuid?.() ?? -1) === 0) chownSync(temp, owner.uid, owner.gid);
  renameSync(temp, path);
  const dirFd = openSync(dirname(path), "r");
  try {
    fsyncSync(dirFd);
  } finally {
    closeSync(dirFd);
  }
}
