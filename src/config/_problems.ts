// Collects every problem found in one file, each placed at its key's line when it can be found.

import type { Locator } from "./_locate.ts";
import { formatKeyPath, type PathSegment } from "./_path.ts";
import type { ConfigProblem } from "./types.ts";

export class Problems {
  readonly list: ConfigProblem[] = [];

  constructor(private readonly locate: Locator) {}

  /** `secretsFile`: a problem with the file a key of [tls], [auth] or [gossip] names, as it is now (see ConfigProblem.secretsFile). */
  add(segments: readonly PathSegment[], message: string, options: { secretsFile?: boolean } = {}): void {
    const at = this.locate(segments);
    const keyPath = formatKeyPath(segments);
    this.list.push({ ...(at === undefined ? {} : { line: at.line, column: at.column }), keyPath, message, ...(options.secretsFile === true ? { secretsFile: true } : {}) });
  }

  /** add() with secretsFile. */
  addFile(segments: readonly PathSegment[], message: string): void {
    this.add(segments, message, { secretsFile: true });
  }

  get count(): number {
    return this.list.length;
  }
}
