// What the apply asks of a statement's text every time it runs it: a handful of regular
// expressions over the SQL (does it name changes()? may it create something? is it an insert?).
// A write workload repeats a few texts many thousands of times, so each text's answers are
// worked out once and kept, a bounded number of texts, oldest dropped first. The answers are
// conservative readings of the text alone (a word in a string or a comment counts too), as the
// expressions always were: they decide only whether a slower, safe path is taken.

export interface SqlTraits {
  /** Names EXPLAIN somewhere (refusedAtApply looks closer). */
  readonly explain: boolean;
  /** Names FAIL somewhere: a conflict resolution that keeps the rows changed before it failed. */
  readonly fail: boolean;
  /** Names CREATE: may leave a TEMP object behind (ApplyGuards.afterStatement). */
  readonly creates: boolean;
  /** Names changes() or last_insert_rowid(), which read the connection's memory of earlier statements. */
  readonly connState: boolean;
  /** Names CREATE, DROP or ALTER: may change the schema. */
  readonly schemaChange: boolean;
  /** Starts (after blanks and comments) with INSERT, REPLACE or WITH: its last_insert_rowid() is its own. */
  readonly inserting: boolean;
  /** Starts with INSERT, REPLACE, UPDATE, DELETE or WITH: a statement SQLite counts changed rows for (any other answers 0). */
  readonly counted: boolean;
}

const explain = /explain/i;
const fail = /fail/i;
const creates = /\bcreate\b/i;
const connState = /changes|last_insert_rowid/i;
const schemaChange = /\b(create|drop|alter)\b/i;
const inserting = /^(?:\s|--[^\n]*(?:\n|$)|\/\*[\s\S]*?\*\/)*(?:insert|replace|with)\b/i;
const counted = /^(?:\s|--[^\n]*(?:\n|$)|\/\*[\s\S]*?\*\/)*(?:insert|replace|update|delete|with)\b/i;

/** Texts longer than this (values written inline) are read each time: few repeat, and each kept copy would hold its text. */
const keptTextLengthMax = 4096;
const keptTextsMax = 1024;
const kept = new Map<string, SqlTraits>();

export function sqlTraits(sql: string): SqlTraits {
  const known = kept.get(sql);
  if (known !== undefined) return known;
  const traits: SqlTraits = {
    explain: explain.test(sql),
    fail: fail.test(sql),
    creates: creates.test(sql),
    connState: connState.test(sql),
    schemaChange: schemaChange.test(sql),
    inserting: inserting.test(sql),
    counted: counted.test(sql),
  };
  if (sql.length <= keptTextLengthMax) {
    if (kept.size >= keptTextsMax) kept.delete(kept.keys().next().value!);
    kept.set(sql, traits);
  }
  return traits;
}
