// The gossip key file ([gossip] key_file): one or two shared keys, each 32 bytes in base64 on
// a line of its own (blank lines and lines starting with # are skipped). The first key
// encrypts what this node sends; every key listed decrypts, so that an operator can rotate:
// add the new key as the second line on every node, reload, move it first, reload, drop the
// old one. Problems name the file and the line, never a key.

import { randomBytes } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { secretFileModeProblem } from "./secrets.ts";

export const GOSSIP_KEY_BYTES = 32;
export const GOSSIP_KEYS_MAX = 2;

/** The keys of a key file's text, or what is wrong with it. */
export function parseGossipKeys(text: string, path: string): { keys: Uint8Array[] } | { problem: string } {
  const keys: Uint8Array[] = [];
  const lines = text.split("\n");
  for (const [i, raw] of lines.entries()) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const where = `${path} line ${i + 1}`;
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(line) || line.length % 4 !== 0) {
      return { problem: `${where} is not a base64 key; write one key per line, as \`svc admin gossip keygen\` prints` };
    }
    const key = new Uint8Array(Buffer.from(line, "base64"));
    if (key.length !== GOSSIP_KEY_BYTES) {
      return { problem: `${where} holds a key of ${key.length} bytes, but a gossip key is ${GOSSIP_KEY_BYTES} bytes; make one with \`svc admin gossip keygen\`` };
    }
    keys.push(key);
  }
  if (keys.length === 0) return { problem: `${path} holds no key; put one in it with \`svc admin gossip keygen > ${path}\`` };
  if (keys.length > GOSSIP_KEYS_MAX) {
    return { problem: `${path} holds ${keys.length} keys, but at most ${GOSSIP_KEYS_MAX} are accepted at once (the one in use and the one being rotated); drop the old ones` };
  }
  return { keys };
}

/**
 * Reads and parses a key file; a file that cannot be read, or that others may read (as at start,
 * so that a reload does not take what a restart would refuse), is a problem too.
 */
export function readGossipKeyFile(path: string): { keys: Uint8Array[] } | { problem: string } {
  let text: string;
  try {
    const modeProblem = secretFileModeProblem(path, statSync(path).mode);
    if (modeProblem !== null) return { problem: modeProblem };
    text = readFileSync(path, "utf8");
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? (e instanceof Error ? e.message : String(e));
    return { problem: `cannot read ${path} (${code}); check the path and that the svc user may read it` };
  }
  return parseGossipKeys(text, path);
}

/** A new random key, as a line of a key file. */
export function newGossipKey(): string {
  return randomBytes(GOSSIP_KEY_BYTES).toString("base64");
}
