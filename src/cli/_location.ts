// A backup or WAL archive location given on the command line: a directory or s3://BUCKET/PREFIX
// (config/location.ts says which text is neither), refused as the command line's mistake. One
// taken from [backup] in the configuration is refused the same way, a relative directory too:
// the node starts with it (--validate only warns), and the backups refuse it.

import { backupLocationProblem, locationProblem } from "../config/index.ts";
import { usageError } from "./_exit.ts";

export function checkedLocation(text: string, what: string): string {
  const problem = locationProblem(text);
  if (problem !== null) throw usageError(`${what}: ${problem}`);
  return text;
}

/** `key` of [backup] in the file at `configPath`, which the command took its location from. */
export function checkedBackupLocation(text: string, key: "dir" | "offsite", configPath: string): string {
  const problem = backupLocationProblem(text);
  if (problem !== null) {
    throw usageError(`[backup] ${key} in ${configPath}: ${problem}\n  → fix it there (check with \`svc --config ${configPath} --validate\`), or give the location on the command line`);
  }
  return text;
}
