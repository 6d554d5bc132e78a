// Where backups and archived WAL segments go: a directory, or an object store written
// s3://BUCKET/PREFIX. Text that starts like a URL but is no location svc reads (s3:/bucket,
// S3://…, gs://…) is a mistake to refuse: taken as a directory, it becomes a local folder
// named "s3:", and a backup meant to leave the host stays on it.

import { isAbsolute } from "node:path";
import { OBJECT_BUCKET_RULE, OBJECT_URL_PATTERN } from "../util/index.ts";

const objectUrlForm = `write s3://bucket/prefix for an object store (${OBJECT_BUCKET_RULE})`;

/** Why `text` is no directory or object-store location svc can use, or null when it is one. */
export function locationProblem(text: string): string | null {
  if (text.startsWith("s3://")) return OBJECT_URL_PATTERN.test(text) ? null : `cannot read ${JSON.stringify(text)} as an object-store location: ${objectUrlForm}`;
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(text);
  if (scheme === null) return null;
  return `${JSON.stringify(text)} starts with "${scheme[1]}:", which names no place svc reads or writes: ${objectUrlForm}, ` +
    "or a directory's path (./ before a relative one whose name holds a colon)";
}

/**
 * Why [backup] dir or offsite is no location the backup timers can use, or null: empty (no timer
 * backup), an absolute directory (the timers run in no particular directory) or
 * s3://BUCKET/PREFIX. The node never reads [backup]: --validate warns, and the backup commands
 * that take the location from the file refuse it.
 */
export function backupLocationProblem(text: string): string | null {
  if (text === "") return null;
  const problem = locationProblem(text);
  if (problem !== null) return problem;
  if (text.startsWith("s3://") || isAbsolute(text)) return null;
  return `must be an absolute directory or s3://BUCKET/PREFIX, got ${JSON.stringify(text)}; a relative path would depend on the directory the backup runs in (write e.g. "/var/backups/svc")`;
}
