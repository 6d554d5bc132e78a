// A small SQL lexer: enough to split a string into statements, find each statement's
// leading keyword, and see identifiers, without being fooled by strings, quoted
// identifiers or comments. The checks decide what may enter the log before it does, and
// count the values a statement binds, so that a request with too few is refused before it.

import { SvcError } from "../util/errors.ts";
import { connectionStateFunctions } from "./determinism.ts";

export interface SqlShape {
  /** Upper-cased leading keyword of each non-empty statement. */
  keywords: string[];
  /**
   * Every bare or quoted identifier, lower-cased, and every string literal that could name one
   * of svc's own tables (see internalNameLiteral).
   */
  identifiers: Set<string>;
  /** Values the SQL binds, as SQLite numbers them (see Placeholders). */
  parameterCount: number;
  /** A numbered placeholder no request can bind (`?0`, `?99999`), as written; null when none. */
  placeholderOutOfRange: string | null;
  /**
   * The first statement's upper-cased words outside parentheses, at most the first 64: after
   * WITH and its common table expressions (each in parentheses) comes the statement that runs.
   */
  topLevelWords: string[];
  /** The words INITIALLY DEFERRED appear, in that order (a deferred constraint). */
  initiallyDeferred: boolean;
}

/**
 * SQLite's numbering of parameters: `?` takes the next index after the largest so far,
 * `?NNN` is index NNN, and a named one (`:a`, `@a`, `$a`) takes the next index the first time
 * its name appears and the same one after. The statement binds as many values as the
 * largest index.
 */
class Placeholders {
  count = 0;
  /** A `?NNN` outside 1..placeholderIndexMax, as written; null when none. */
  outOfRange: string | null = null;
  private readonly names = new Map<string, number>();

  numbered(digits: string): void {
    const index = Number(digits);
    if (index < 1 || index > placeholderIndexMax) {
      this.outOfRange ??= `?${digits.length > 20 ? `${digits.slice(0, 20)}…` : digits}`;
      return;
    }
    this.count = Math.max(this.count, index);
  }

  next(): void {
    this.count++;
  }

  named(name: string): void {
    if (this.names.has(name)) return;
    this.count++;
    this.names.set(name, this.count);
  }
}

/** The most values one statement binds (SQLite's usual limit; the HTTP edge sends no more). */
export const placeholderIndexMax = 32_766;

export function lexSql(sql: string): SqlShape {
  const keywords: string[] = [];
  const identifiers = new Set<string>();
  let expectKeyword = true;
  // Inside CREATE TRIGGER … BEGIN … END the body's semicolons do not end the statement.
  let wordsInStatement = 0;
  let isTrigger = false;
  let blockDepth = 0;
  let parenDepth = 0;
  const topLevelWords: string[] = [];
  const placeholders = new Placeholders();
  let previousWord = "";
  let initiallyDeferred = false;
  let i = 0;
  const n = sql.length;
  while (i < n) {
    const c = sql[i] ?? "";
    if (c === "-" && sql[i + 1] === "-") {
      const end = sql.indexOf("\n", i);
      i = end === -1 ? n : end + 1;
    } else if (c === "/" && sql[i + 1] === "*") {
      const end = sql.indexOf("*/", i + 2);
      i = end === -1 ? n : end + 2;
    } else if (c === "'") {
      const end = skipQuoted(sql, i, "'");
      const text = sql.slice(i + 1, end - 1).replaceAll("''", "'").toLowerCase();
      if (internalNameLiteral.test(text)) identifiers.add(text);
      i = end;
      expectKeyword = false;
      previousWord = "";
    } else if (c === '"' || c === "`") {
      const end = skipQuoted(sql, i, c);
      identifiers.add(sql.slice(i + 1, end - 1).replaceAll(c + c, c).toLowerCase());
      i = end;
      expectKeyword = false;
      previousWord = "";
    } else if (c === "[") {
      const end = sql.indexOf("]", i);
      const stop = end === -1 ? n : end + 1;
      identifiers.add(sql.slice(i + 1, stop - 1).toLowerCase());
      i = stop;
      expectKeyword = false;
      previousWord = "";
    } else if (c === ";") {
      previousWord = "";
      if (blockDepth === 0) {
        expectKeyword = true;
        wordsInStatement = 0;
        isTrigger = false;
      }
      i++;
    } else if (sql.charCodeAt(i) === byteOrderMark) {
      // SQLite's tokenizer reads U+FEFF at the start of a token as white space: "\ufeffPRAGMA"
      // runs as PRAGMA, so it must be checked as PRAGMA. (Inside a word it is part of the word.)
      i++;
    } else if (isWordStart(sql.charCodeAt(i))) {
      let j = i + 1;
      while (j < n && isWordPart(sql.charCodeAt(j))) j++;
      const word = sql.slice(i, j);
      const upper = word.toUpperCase();
      if (expectKeyword) keywords.push(upper);
      if (parenDepth === 0 && keywords.length === 1 && topLevelWords.length < 64) topLevelWords.push(upper);
      wordsInStatement++;
      if (wordsInStatement <= 4 && upper === "TRIGGER" && keywords.at(-1) === "CREATE") isTrigger = true;
      if (isTrigger && (upper === "BEGIN" || upper === "CASE")) blockDepth++;
      if (isTrigger && upper === "END" && blockDepth > 0) blockDepth--;
      identifiers.add(word.toLowerCase());
      if (upper === "DEFERRED" && previousWord === "INITIALLY") initiallyDeferred = true;
      previousWord = upper;
      expectKeyword = false;
      i = j;
    } else if (c === "?") {
      let j = i + 1;
      while (j < n && isDigit(sql.charCodeAt(j))) j++;
      if (j > i + 1) placeholders.numbered(sql.slice(i + 1, j));
      else placeholders.next();
      expectKeyword = false;
      i = j;
    } else if ((c === ":" || c === "@" || c === "$" || c === "#") && (isWordPart(sql.charCodeAt(i + 1)) || sql.startsWith("::", i + 1))) {
      const j = placeholderNameEnd(sql, i + 1);
      placeholders.named(sql.slice(i, j));
      expectKeyword = false;
      i = j;
    } else {
      if (c === "(") parenDepth++;
      else if (c === ")" && parenDepth > 0) parenDepth--;
      if (!isSpace(sql.charCodeAt(i))) {
        expectKeyword = false;
        previousWord = "";
      }
      i++;
    }
  }
  return { keywords, identifiers, parameterCount: placeholders.count, placeholderOutOfRange: placeholders.outOfRange, topLevelWords, initiallyDeferred };
}

const byteOrderMark = 0xfeff;

/**
 * SQLite takes a string literal as a name where a name is due (`INSERT INTO '_svc_meta'`,
 * `DROP TABLE '_svc_requests'`), and FTS5 reads the table its `content='…'` option names: a
 * literal shaped like a name of svc's own is checked as that name. (A pattern such as
 * `'_svc_%'` names nothing, and passes.)
 */
const internalNameLiteral = /^_svc_[a-z0-9_$]*$/;

/**
 * Where a named placeholder that starts at `start` (after its `:`, `@`, `$` or `#`) ends, as
 * SQLite's tokenizer reads it: word characters, `::` anywhere (a Tcl namespace), and after
 * them a `(…)` suffix without blanks (a Tcl array element: `$a(x)`). The suffix is part of the
 * name, whatever it holds: `$a(')` is one placeholder, not a placeholder and a string.
 */
function placeholderNameEnd(sql: string, start: number): number {
  let i = start;
  while (i < sql.length) {
    if (isWordPart(sql.charCodeAt(i))) {
      i++;
    } else if (sql.startsWith("::", i)) {
      i += 2;
    } else if (sql[i] === "(" && i > start) {
      let j = i + 1;
      while (j < sql.length && !isSpace(sql.charCodeAt(j)) && sql[j] !== ")") j++;
      // Without its ")" SQLite refuses the token: the statement fails to compile.
      return sql[j] === ")" ? j + 1 : j;
    } else {
      break;
    }
  }
  return i;
}

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

function isWordStart(c: number): boolean {
  return (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95 || c > 127;
}

function isWordPart(c: number): boolean {
  return isWordStart(c) || (c >= 48 && c <= 57) || c === 36;
}

function isSpace(c: number): boolean {
  return c === 32 || (c >= 9 && c <= 13);
}

function skipQuoted(sql: string, start: number, quote: string): number {
  let i = start + 1;
  while (i < sql.length) {
    if (sql[i] === quote) {
      if (sql[i + 1] === quote) {
        i += 2;
        continue;
      }
      return i + 1;
    }
    i++;
  }
  return sql.length;
}

/** Statements that would make nodes differ, or that fight the store's own transactions. */
const refusedInWrites: Record<string, string> = {
  ATTACH: "ATTACH would read a file that differs between nodes",
  DETACH: "DETACH is not supported (ATTACH is refused)",
  PRAGMA: "PRAGMAs change connection behaviour that must be the same on every node",
  BEGIN: "a batch of statements is already one transaction",
  COMMIT: "a batch of statements is already one transaction",
  END: "a batch of statements is already one transaction",
  ROLLBACK: "a batch of statements is already one transaction; a failing statement rolls the batch back",
  SAVEPOINT: "a batch of statements is already one transaction",
  RELEASE: "a batch of statements is already one transaction",
  VACUUM: "VACUUM cannot run inside the batch transaction; snapshots compact the store",
  // SQLite applies a PRAGMA when it compiles one, EXPLAIN or not: `EXPLAIN PRAGMA query_only=ON`
  // in the log would turn every node's applying connection read-only, on every replay.
  EXPLAIN: "EXPLAIN is a read (send it to POST /v1/query), and a PRAGMA under it would still change the connection",
};

/** Tables that show one node's file or connection, not the replicated data. */
const nodeLocalTables: Record<string, string> = {
  dbstat: "dbstat shows the file's pages, which can differ between nodes",
  // Its rootpage and the order of its rows are the file's layout: a node rebuilt from an image
  // lays its pages out anew, and a write that copied them made that node's data differ.
  ...Object.fromEntries(["sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_temp_schema"].map((t) => [
    t, `${t}'s rootpage and row order are the file's layout, which differs between nodes (one rebuilt from a snapshot lays its pages out anew); read it with POST /v1/query`,
  ])),
  sqlite_dbpage: "sqlite_dbpage shows the file's pages, which can differ between nodes",
  sqlite_stmt: "sqlite_stmt shows one node's connection",
};

/**
 * The query planner's statistics: ANALYZE writes them on every node alike, but a connection
 * reads them only when it opens the store. Edited by hand, a running node would plan with the
 * old ones and a restarted node with the new, and a plan decides which rows a LIMIT without
 * ORDER BY takes.
 */
const plannerStatTables: Record<string, string> = Object.fromEntries(["sqlite_stat1", "sqlite_stat2", "sqlite_stat3", "sqlite_stat4"].map((t) => [
  t, `${t} holds the query planner's statistics, which a node reads only when it opens the store: edited, nodes would plan (and answer a LIMIT without ORDER BY) differently; run ANALYZE instead`,
]));

/** Names a write may not use: they read what differs between nodes. */
function refusedNameInWrite(id: string): string | null {
  const why = connectionStateFunctions[id] ?? nodeLocalTables[id] ?? plannerStatTables[id];
  if (why !== undefined) return `${id} is not allowed in a write: ${why}`;
  // Table-valued PRAGMA functions (pragma_database_list names this node's files).
  if (id.startsWith("pragma_")) return `${id} is not allowed in a write: PRAGMAs read one node's connection and files`;
  return null;
}

const createTemp = /^(?:\s|--[^\n]*(?:\n|$)|\/\*[\s\S]*?\*\/)*create\s+(?:temp|temporary)\b/i;

/**
 * Comments, each ending at its terminator or at the end of the text: a comment that is never
 * closed ends there, so no position is scanned twice (a thousand unclosed `--` or `/*` cost
 * one pass, not a million).
 */
const sqlComments = /--[^\n]*(?:\n|$)|\/\*[\s\S]*?(?:\*\/|$)/g;

const readKeywords = new Set(["SELECT", "WITH", "VALUES", "EXPLAIN", "PRAGMA"]);
const readPragmas = new Set([
  "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo", "foreign_key_list",
  "integrity_check", "quick_check", "page_count", "page_size", "freelist_count", "user_version", "schema_version",
  "compile_options", "function_list", "collation_list",
]);
/**
 * PRAGMAs whose argument in parentheses names what to read. For the others an argument sets
 * the value, with `=` or in parentheses alike (`PRAGMA user_version(5)` writes).
 */
const readPragmasWithArgument = new Set([
  "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo", "foreign_key_list",
  "integrity_check", "quick_check",
]);
/** What a read may EXPLAIN: a PRAGMA (or ATTACH, VACUUM…) under EXPLAIN acts all the same. */
const explainableKeywords = new Set(["SELECT", "WITH", "VALUES", "INSERT", "REPLACE", "UPDATE", "DELETE"]);
/** What may follow WITH and its common table expressions in a read. */
const readMainKeywords = new Set(["SELECT", "VALUES"]);
/** Every word a SQLite statement can start with. */
const statementKeywords = new Set([
  "ALTER", "ANALYZE", "ATTACH", "BEGIN", "COMMIT", "CREATE", "DELETE", "DETACH", "DROP", "END", "EXPLAIN", "INSERT", "PRAGMA",
  "REINDEX", "RELEASE", "REPLACE", "ROLLBACK", "SAVEPOINT", "SELECT", "UPDATE", "VACUUM", "VALUES", "WITH",
]);
/** The statements that can follow WITH: the first of them outside parentheses is the one that runs. */
const withMainKeywords = new Set(["SELECT", "VALUES", "INSERT", "REPLACE", "UPDATE", "DELETE"]);

export const internalTablePrefix = "_svc_";

function sqlError(message: string, hint?: string): SvcError {
  return new SvcError("SQL_REFUSED", message, hint === undefined ? {} : { hint });
}

function checkCommon(sql: string, shape: SqlShape, kind: "read" | "write"): void {
  if (shape.keywords.length === 0) throw sqlError("empty SQL statement");
  if (shape.keywords.length > 1) {
    throw sqlError(`one statement per ${kind === "write" ? "entry" : "query"}, found ${shape.keywords.length} in "${abbreviate(sql)}"`,
      kind === "write" ? "send each statement as its own element of \"statements\" (they still run as one transaction)" : "send each query in a request of its own");
  }
  if (shape.placeholderOutOfRange !== null) {
    throw sqlError(`placeholder ${shape.placeholderOutOfRange} is outside ?1 to ?${placeholderIndexMax}`, "number placeholders from ?1, one per value sent in \"params\"");
  }
  for (const id of shape.identifiers) {
    if (id.startsWith(internalTablePrefix)) {
      throw sqlError(`names starting with ${internalTablePrefix} are reserved for svc's own tables`,
        `name your tables otherwise; send a value starting with ${internalTablePrefix} in "params" (SQLite takes a quoted string as a table name)`);
    }
    if (id === "load_extension") throw sqlError("load_extension is not allowed: every node must run the same code");
  }
}

/**
 * Statements already let through, by text: clients send the same parameterised statements
 * over and over, and lexing one costs more than the rest of reading its request. Short texts
 * only, and a bounded number of them (the oldest dropped first). Only acceptance is kept.
 */
class AcceptedTexts {
  private readonly shapes = new Map<string, StatementShape>();

  accept(sql: string, check: (sql: string) => StatementShape): StatementShape {
    const known = this.shapes.get(sql);
    if (known !== undefined) return known;
    const shape = check(sql);
    if (sql.length <= 4096) {
      if (this.shapes.size >= 512) this.shapes.delete(this.shapes.keys().next().value as string);
      this.shapes.set(sql, shape);
    }
    return shape;
  }
}

/** What the checks tell about an accepted statement. */
export interface StatementShape {
  /** Its leading keyword, upper-cased. */
  readonly keyword: string;
  /** How many values it binds: a request must send exactly as many params. */
  readonly parameterCount: number;
  /** A write-checked statement that only reads (SELECT, VALUES, WITH … SELECT): see refuseReadInWrite. */
  readonly readOnly?: string;
}

const acceptedWrites = new AcceptedTexts();
const acceptedReads = new AcceptedTexts();

/** Refuse a statement that must not enter the log; returns its shape. */
export function checkWriteStatement(sql: string): StatementShape {
  return acceptedWrites.accept(sql, checkWriteShape);
}

/**
 * At apply, what must not run even though it is in the log: an EXPLAIN from a version that let
 * one through (one `EXPLAIN PRAGMA query_only=ON` stopped every node, again on every replay).
 * EXPLAIN changes no data, so refusing it where it was once applied changes only its answer.
 */
export function refusedAtApply(sql: string): string | null {
  if (!/explain/i.test(sql)) return null;
  return lexSql(sql).keywords[0] === "EXPLAIN" ? `EXPLAIN is not allowed in a write: ${refusedInWrites["EXPLAIN"]}` : null;
}

/** Refuse a statement that is not a read; returns its shape. */
export function checkReadStatement(sql: string): StatementShape {
  return acceptedReads.accept(sql, checkReadShape);
}

function checkWriteShape(sql: string): StatementShape {
  const shape = lexSql(sql);
  checkCommon(sql, shape, "write");
  // OR ROLLBACK, ON CONFLICT ROLLBACK and RAISE(ROLLBACK) end the store's own transaction,
  // taking the other entries of the batch with it. (A ROLLBACK statement is refused below as one.)
  if (shape.identifiers.has("rollback") && shape.keywords[0] !== "ROLLBACK") {
    throw sqlError("ROLLBACK conflict resolution is not allowed: a failing statement already rolls back its whole batch", "use OR ABORT (the default), OR FAIL, OR IGNORE or OR REPLACE");
  }
  const keyword = shape.keywords[0] ?? "";
  const why = refusedInWrites[keyword];
  if (why !== undefined) throw sqlError(`${keyword} is not allowed in a write: ${why}`);
  // The store commits many entries in one SQLite transaction: a deferred constraint is checked
  // at that commit, where its failure belongs to no write, and fails it on every node, at every
  // replay (one INSERT of an orphan row stopped a whole cluster for good).
  if (shape.initiallyDeferred) {
    throw sqlError("INITIALLY DEFERRED constraints are not allowed: svc checks each write's constraints when its statements end, and a deferred one would be checked only when the store commits, for no write in particular",
      "leave the constraint immediate (the default; DEFERRABLE alone is immediate), and order the statements of a batch so that each leaves the data consistent");
  }
  if (keyword === "CREATE" && createTemp.test(sql)) {
    throw sqlError("CREATE TEMP is not allowed in a write: TEMP objects live in one node's connection and are never replicated", "create a regular table, view, index or trigger");
  }
  for (const id of shape.identifiers) {
    const refused = refusedNameInWrite(id);
    if (refused !== null) throw sqlError(refused);
  }
  // A read in a write batch goes through the log and applies on every node for no answer (a
  // write's result has no rows): marked here, refused by refuseReadInWrite. FTS3/FTS4's
  // `SELECT optimize(t) FROM t` writes (it merges the index's segments): not a read.
  const main = keyword === "WITH" ? shape.topLevelWords.find((w) => withMainKeywords.has(w)) : keyword;
  if (main !== undefined && readMainKeywords.has(main) && !shape.identifiers.has("optimize")) {
    return { keyword, parameterCount: shape.parameterCount, readOnly: keyword === "WITH" ? `WITH … ${main}` : main };
  }
  return { keyword, parameterCount: shape.parameterCount };
}

/**
 * A batch sent as a write holding a statement that only reads is refused, naming /v1/query (as a
 * write sent there names /v1/execute). Called after a retried request id's first answer was
 * looked for: a batch an earlier version applied with its id still gets that answer.
 */
export function refuseReadInWrite(shapes: readonly StatementShape[]): void {
  const read = shapes.find((s) => s.readOnly !== undefined);
  if (read?.readOnly !== undefined) throw sqlError(`${read.readOnly} is not a write: POST /v1/execute answers no rows`, "send reads to POST /v1/query");
}

function checkReadShape(sql: string): StatementShape {
  const shape = lexSql(sql);
  checkCommon(sql, shape, "read");
  const keyword = shape.keywords[0] ?? "";
  if (!readKeywords.has(keyword)) {
    if (!statementKeywords.has(keyword)) {
      throw sqlError(`near "${keyword}": syntax error: no SQL statement starts with it`, "a read starts with SELECT, WITH, VALUES, EXPLAIN or PRAGMA");
    }
    throw sqlError(`${keyword} is not a read; send writes to POST /v1/execute`);
  }
  if (keyword === "EXPLAIN") {
    const words = shape.topLevelWords;
    const explained = words[1] === "QUERY" && words[2] === "PLAN" ? words[3] : words[1];
    if (explained === undefined || !explainableKeywords.has(explained)) {
      throw sqlError(`EXPLAIN ${explained ?? ""} is not allowed in a query`.replace(/ +is/, " is"),
        "EXPLAIN a SELECT, WITH, VALUES, INSERT, UPDATE or DELETE; SQLite runs a PRAGMA (and ATTACH, VACUUM…) when it compiles it, even under EXPLAIN");
    }
  }
  if (keyword === "WITH") {
    // WITH … INSERT/UPDATE/DELETE is a write behind a read's first word.
    const main = shape.topLevelWords.find((w) => withMainKeywords.has(w));
    if (main !== undefined && !readMainKeywords.has(main)) {
      throw sqlError(`WITH … ${main} is not a read; send writes to POST /v1/execute`);
    }
  }
  if (keyword === "PRAGMA") {
    const m = /^\s*pragma\s+(?:[A-Za-z_][\w]*\.)?([A-Za-z_][\w]*)\s*([=(])?/i.exec(sql.replace(sqlComments, " "));
    const name = (m?.[1] ?? "").toLowerCase();
    const argument = m?.[2];
    if (!readPragmas.has(name) || argument === "=" || (argument === "(" && !readPragmasWithArgument.has(name))) {
      throw sqlError(`PRAGMA ${name} is not allowed in a query`, argument === undefined ? undefined : "a query may read a PRAGMA's value, not set it");
    }
  }
  return { keyword, parameterCount: shape.parameterCount };
}

export function abbreviate(sql: string, max = 80): string {
  const flat = sql.replace(/\s+/g, " ").trim();
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`;
}
