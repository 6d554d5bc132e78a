// Which writes are plain: shapes whose cost is bounded by their own size and a scan of one
// table at worst, whatever the data, so that they may enter the log without being tried
// first (WriteChecker) — provided the store runs no code of its own on a write (a trigger,
// or a column expression calling a function: Store.runsCodeOnWrite), which the node checks:
//   INSERT [OR …] INTO t [(c, …)] VALUES (v, …)[, (v, …)]…     (also REPLACE INTO)
//   UPDATE [OR …] t SET c = v[, c = v]… WHERE c = v [AND c = v]…
//   DELETE FROM t WHERE c = v [AND c = v]…
// where v is a placeholder or a literal. Foreign-key actions may reach other tables, each a
// scan at worst. Anything else — a function call, a subquery, a comment — is not plain.
// A single pass over the text (no backtracking): it runs on every write.

type Token =
  | { kind: "word"; text: string }
  | { kind: "name" }
  | { kind: "value" }
  | { kind: "punct"; text: string };

const cache = new Map<string, boolean>();
const cacheSizeMax = 512;
const cachedSqlLengthMax = 4096;

/** Whether `sql` has one of the plain shapes above. */
export function isPlainWrite(sql: string): boolean {
  const known = cache.get(sql);
  if (known !== undefined) return known;
  const tokens = tokenize(sql);
  const plain = tokens !== null && new Shape(tokens).plain();
  if (sql.length <= cachedSqlLengthMax) {
    if (cache.size >= cacheSizeMax) cache.delete(cache.keys().next().value as string);
    cache.set(sql, plain);
  }
  return plain;
}

const isDigit = (c: string): boolean => c >= "0" && c <= "9";
const isWordStart = (c: string): boolean => (c >= "a" && c <= "z") || (c >= "A" && c <= "Z") || c === "_";
const isWordPart = (c: string): boolean => isWordStart(c) || isDigit(c) || c === "$";
const isHex = (c: string): boolean => isDigit(c) || (c >= "a" && c <= "f") || (c >= "A" && c <= "F");

/** The tokens of `sql`, or null when it holds anything a plain shape never does (comments, operators). */
function tokenize(sql: string): Token[] | null {
  const out: Token[] = [];
  let i = 0;
  const n = sql.length;
  while (i < n) {
    const c = sql[i] as string;
    if (c === " " || c === "\t" || c === "\n" || c === "\r") {
      i++;
    } else if (c === "'") {
      const end = closingQuote(sql, i, "'");
      if (end < 0) return null;
      out.push({ kind: "value" });
      i = end;
    } else if (c === '"' || c === "`") {
      const end = closingQuote(sql, i, c);
      if (end < 0) return null;
      out.push({ kind: "name" });
      i = end;
    } else if (c === "[") {
      const end = sql.indexOf("]", i);
      if (end < 0) return null;
      out.push({ kind: "name" });
      i = end + 1;
    } else if ((c === "x" || c === "X") && sql[i + 1] === "'") {
      let j = i + 2;
      while (j < n && isHex(sql[j] as string)) j++;
      if (sql[j] !== "'") return null;
      out.push({ kind: "value" });
      i = j + 1;
    } else if (isWordStart(c)) {
      let j = i + 1;
      while (j < n && isWordPart(sql[j] as string)) j++;
      out.push({ kind: "word", text: sql.slice(i, j).toLowerCase() });
      i = j;
    } else if (isDigit(c) || (c === "." && isDigit(sql[i + 1] ?? ""))) {
      let j = i;
      if (c === "0" && (sql[i + 1] === "x" || sql[i + 1] === "X")) {
        j = i + 2;
        while (j < n && isHex(sql[j] as string)) j++;
      } else {
        while (j < n && (isDigit(sql[j] as string) || sql[j] === ".")) j++;
        if (sql[j] === "e" || sql[j] === "E") {
          j++;
          if (sql[j] === "+" || sql[j] === "-") j++;
          while (j < n && isDigit(sql[j] as string)) j++;
        }
      }
      out.push({ kind: "value" });
      i = j;
    } else if (c === "?") {
      let j = i + 1;
      while (j < n && isDigit(sql[j] as string)) j++;
      out.push({ kind: "value" });
      i = j;
    } else if ((c === ":" || c === "@" || c === "$") && isWordStart(sql[i + 1] ?? "")) {
      let j = i + 1;
      while (j < n && isWordPart(sql[j] as string)) j++;
      out.push({ kind: "value" });
      i = j;
    } else if ("(),.=;+-".includes(c)) {
      // "--" starts a comment: not plain.
      if (c === "-" && sql[i + 1] === "-") return null;
      out.push({ kind: "punct", text: c });
      i++;
    } else {
      return null;
    }
  }
  return out;
}

function closingQuote(sql: string, start: number, quote: string): number {
  let i = start + 1;
  for (;;) {
    const end = sql.indexOf(quote, i);
    if (end < 0) return -1;
    if (sql[end + 1] !== quote) return end + 1;
    i = end + 2;
  }
}

const conflictActions = new Set(["abort", "fail", "ignore", "replace"]);
const literalWords = new Set(["null", "true", "false"]);

/** A recursive-descent match of the token list against the plain shapes. */
class Shape {
  private at = 0;

  constructor(private readonly tokens: readonly Token[]) {}

  plain(): boolean {
    const first = this.peekWord();
    let ok = false;
    if (first === "insert" || first === "replace") ok = this.insert();
    else if (first === "update") ok = this.update();
    else if (first === "delete") ok = this.delete();
    if (!ok) return false;
    this.punct(";");
    return this.at === this.tokens.length;
  }

  private insert(): boolean {
    if (this.word("insert")) this.orAction();
    else if (!this.word("replace")) return false;
    if (!this.word("into") || !this.qualifiedName()) return false;
    if (this.punct("(")) {
      if (!this.list(() => this.name()) || !this.punct(")")) return false;
    }
    if (!this.word("values")) return false;
    return this.list(() => this.punct("(") && this.list(() => this.value()) && this.punct(")"));
  }

  private update(): boolean {
    if (!this.word("update")) return false;
    this.orAction();
    if (!this.qualifiedName() || !this.word("set")) return false;
    if (!this.list(() => this.equality())) return false;
    return this.where();
  }

  private delete(): boolean {
    return this.word("delete") && this.word("from") && this.qualifiedName() && this.where();
  }

  private where(): boolean {
    if (!this.word("where") || !this.equality()) return false;
    while (this.word("and")) if (!this.equality()) return false;
    return true;
  }

  private orAction(): void {
    const save = this.at;
    if (this.word("or") && conflictActions.has(this.peekWord() ?? "")) this.at++;
    else this.at = save;
  }

  private equality(): boolean {
    return this.name() && this.punct("=") && this.value();
  }

  private list(item: () => boolean): boolean {
    if (!item()) return false;
    while (this.punct(",")) if (!item()) return false;
    return true;
  }

  private qualifiedName(): boolean {
    if (!this.name()) return false;
    if (this.punct(".")) return this.name();
    return true;
  }

  private name(): boolean {
    const t = this.tokens[this.at];
    if (t?.kind === "name" || t?.kind === "word") {
      this.at++;
      return true;
    }
    return false;
  }

  private value(): boolean {
    if (this.punct("-") || this.punct("+")) return this.tokens[this.at]?.kind === "value" && ++this.at > 0;
    const t = this.tokens[this.at];
    if (t?.kind === "value" || (t?.kind === "word" && literalWords.has(t.text))) {
      this.at++;
      return true;
    }
    return false;
  }

  private peekWord(): string | null {
    const t = this.tokens[this.at];
    return t?.kind === "word" ? t.text : null;
  }

  private word(text: string): boolean {
    if (this.peekWord() !== text) return false;
    this.at++;
    return true;
  }

  private punct(text: string): boolean {
    const t = this.tokens[this.at];
    if (t?.kind !== "punct" || t.text !== text) return false;
    this.at++;
    return true;
  }
}
