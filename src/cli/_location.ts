// A backup or WAL archive location given on the command line: a directory or s3://BUCKET/PREFIX
// (config/location.ts says which text is neither), refused as the command line's mistake.

import { locationProblem } from "../config/index.ts";
import { usageError } from "./_exit.ts";

export function checkedLocation(text: string, what: string): string {
  const problem = locationProblem(text);
  if (problem !== null) throw usageError(`${what}: ${problem}`);
  return text;
}
