// Where backups and archived WAL segments go: a directory, or an object store written
// s3://BUCKET/PREFIX. Text that starts like a URL but is no location svc reads (s3:/bucket,
// S3://…, gs://…) is a mistake to refuse: taken as a directory, it becomes a local folder
// named "s3:", and a backup meant to leave the host stays on it.

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
