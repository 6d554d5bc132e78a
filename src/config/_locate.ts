// Maps key paths to their place in the source text. smol-toml gives no positions for values,
// so this walks the text with a small tokenizer that knows table headers, arrays of tables,
// dotted keys, inline tables and arrays (by index). It runs only on text smol-toml accepted,
// and it never throws: on anything it does not understand it stops and keeps what it found.

import { formatKeyPath, type PathSegment } from "./_path.ts";

export interface Position {
  readonly line: number;
  readonly column: number;
}

export type Locator = (segments: readonly PathSegment[]) => Position | undefined;

export function createLocator(text: string): Locator {
  const positions = new Map<string, Position>();
  try {
    new Walker(text, positions).document();
  } catch {
    // Best effort: keep the positions found before the walker lost its way.
  }
  return (segments) => {
    // A missing key is reported at its nearest ancestor that exists in the text.
    for (let n = segments.length; n > 0; n--) {
      const found = positions.get(formatKeyPath(segments.slice(0, n)));
      if (found !== undefined) return found;
    }
    return undefined;
  };
}

class Walker {
  private pos = 0;
  private line = 1;
  private lineStart = 0;
  private readonly arrayTableCounts = new Map<string, number>();

  constructor(private readonly text: string, private readonly positions: Map<string, Position>) {}

  document(): void {
    let table: PathSegment[] = [];
    while (this.pos < this.text.length) {
      this.skipBlank(true);
      if (this.pos >= this.text.length) return;
      const at = this.here();
      if (this.peek() === "[") {
        const isArray = this.text.startsWith("[[", this.pos);
        this.pos += isArray ? 2 : 1;
        const keys = this.key();
        this.pos += isArray ? 2 : 1;
        table = keys;
        if (isArray) {
          const name = formatKeyPath(keys);
          const index = this.arrayTableCounts.get(name) ?? 0;
          this.arrayTableCounts.set(name, index + 1);
          this.record(keys, at);
          table = [...keys, index];
        }
        this.record(table, at);
      } else {
        this.keyValue(table);
      }
      this.skipToLineEnd();
    }
  }

  private keyValue(table: readonly PathSegment[]): void {
    const at = this.here();
    const keys = this.key();
    for (let n = 1; n <= keys.length; n++) this.record([...table, ...keys.slice(0, n)], at);
    this.skipBlank(false);
    if (this.peek() !== "=") throw new Error("expected =");
    this.pos++;
    this.value([...table, ...keys]);
  }

  private key(): PathSegment[] {
    const keys: PathSegment[] = [];
    for (;;) {
      this.skipBlank(false);
      const c = this.peek();
      if (c === '"' || c === "'") keys.push(this.quotedKey(c));
      else {
        const start = this.pos;
        while (this.pos < this.text.length && /[A-Za-z0-9_-]/.test(this.text[this.pos] ?? "")) this.pos++;
        if (this.pos === start) throw new Error("expected a key");
        keys.push(this.text.slice(start, this.pos));
      }
      this.skipBlank(false);
      if (this.peek() !== ".") return keys;
      this.pos++;
    }
  }

  private quotedKey(quote: string): string {
    const start = this.pos;
    this.skipString();
    const raw = this.text.slice(start, this.pos);
    if (quote === "'") return raw.slice(1, -1);
    try {
      return JSON.parse(raw) as string;
    } catch {
      return raw.slice(1, -1);
    }
  }

  private value(path: readonly PathSegment[]): void {
    this.skipBlank(false);
    const c = this.peek();
    if (c === "{") {
      this.pos++;
      for (;;) {
        this.skipBlank(true);
        if (this.peek() === "}") { this.pos++; return; }
        if (this.peek() === ",") { this.pos++; continue; }
        if (this.pos >= this.text.length) throw new Error("unterminated inline table");
        this.keyValue(path);
      }
    }
    if (c === "[") {
      this.pos++;
      let index = 0;
      for (;;) {
        this.skipBlank(true);
        if (this.peek() === "]") { this.pos++; return; }
        if (this.peek() === ",") { this.pos++; continue; }
        if (this.pos >= this.text.length) throw new Error("unterminated array");
        this.record([...path, index], this.here());
        this.value([...path, index]);
        index++;
      }
    }
    if (c === '"' || c === "'") { this.skipString(); return; }
    while (this.pos < this.text.length && !/[,\]}#\r\n]/.test(this.text[this.pos] ?? "")) this.pos++;
  }

  private skipString(): void {
    const quote = this.peek();
    const triple = this.text.startsWith(quote.repeat(3), this.pos);
    const close = triple ? quote.repeat(3) : quote;
    this.pos += close.length;
    while (this.pos < this.text.length) {
      const c = this.text[this.pos];
      if (c === "\\" && quote === '"') {
        // Step over the escaped character, unless it is a line end that must be counted.
        this.pos += this.text[this.pos + 1] === "\n" ? 1 : 2;
        continue;
      }
      if (c === "\n") this.newline();
      else if (this.text.startsWith(close, this.pos)) {
        this.pos += close.length;
        // A multi-line string may end with up to two extra quotes ("""a"""" is a"").
        while (triple && this.peek() === quote) this.pos++;
        return;
      }
      this.pos++;
    }
  }

  /** Skips spaces, tabs and comments; newlines too when `newlines` is set. */
  private skipBlank(newlines: boolean): void {
    while (this.pos < this.text.length) {
      const c = this.text[this.pos];
      if (c === " " || c === "\t" || c === "\r") this.pos++;
      else if (c === "#") while (this.pos < this.text.length && this.text[this.pos] !== "\n") this.pos++;
      else if (c === "\n" && newlines) { this.newline(); this.pos++; }
      else return;
    }
  }

  private skipToLineEnd(): void {
    this.skipBlank(false);
    while (this.pos < this.text.length && this.text[this.pos] !== "\n") this.pos++;
  }

  private newline(): void {
    this.line++;
    this.lineStart = this.pos + 1;
  }

  private peek(): string {
    return this.text[this.pos] ?? "";
  }

  private here(): Position {
    return { line: this.line, column: this.pos - this.lineStart + 1 };
  }

  private record(segments: readonly PathSegment[], at: Position): void {
    const name = formatKeyPath(segments);
    if (!this.positions.has(name)) this.positions.set(name, at);
  }
}
