// Which writes are plain: shapes whose cost is bounded by their own size and a scan of one
// table at worst, whatever the data, so that they may enter the log without being tried
// first (WriteChecker) — provided the store has no triggers, which the node checks:
//   INSERT [OR …] INTO t [(c, …)] VALUES (v, …)[, (v, …)]…     (also REPLACE INTO)
//   UPDATE [OR …] t SET c = v[, c = v]… WHERE c = v [AND c = v]…
//   DELETE FROM t WHERE c = v [AND c = v]…
// where v is a placeholder or a literal. Foreign-key actions may reach other tables, each a
// scan at worst. Anything else — a function call, a subquery, a comment — is not plain.

const ws = String.raw`\s*`;
const name = String.raw`(?:[A-Za-z_][\w$]*|"(?:[^"]|"")*"|\[[^\]]*\]|` + "`(?:[^`]|``)*`)";
const qualified = `${name}(?:${ws}\\.${ws}${name})?`;
const value = String.raw`(?:\?\d*|[:@$][A-Za-z_][\w$]*|[-+]?${ws}(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|0[xX][0-9a-fA-F]+|'(?:[^']|'')*'|[xX]'[0-9a-fA-F]*'|null|true|false)`;
const tuple = `\\(${ws}${value}(?:${ws},${ws}${value})*${ws}\\)`;
const columns = `\\(${ws}${name}(?:${ws},${ws}${name})*${ws}\\)`;
const orAction = `(?:or\\s+(?:abort|fail|ignore|replace)\\s+)?`;
const assignment = `${name}${ws}=${ws}${value}`;
const condition = `${name}${ws}=${ws}${value}(?:\\s+and\\s+${name}${ws}=${ws}${value})*`;
const end = `${ws};?${ws}$`;

const plainShapes = [
  new RegExp(`^${ws}(?:insert\\s+${orAction}|replace\\s+)into\\s+${qualified}${ws}(?:${columns}${ws})?values${ws}${tuple}(?:${ws},${ws}${tuple})*${end}`, "i"),
  new RegExp(`^${ws}update\\s+${orAction}${qualified}\\s+set\\s+${assignment}(?:${ws},${ws}${assignment})*\\s+where\\s+${condition}${end}`, "i"),
  new RegExp(`^${ws}delete\\s+from\\s+${qualified}\\s+where\\s+${condition}${end}`, "i"),
];

const cache = new Map<string, boolean>();
const cacheSizeMax = 512;
const cachedSqlLengthMax = 4096;

/** Whether `sql` has one of the plain shapes above. */
export function isPlainWrite(sql: string): boolean {
  const known = cache.get(sql);
  if (known !== undefined) return known;
  const plain = plainShapes.some((re) => re.test(sql));
  if (sql.length <= cachedSqlLengthMax) {
    if (cache.size >= cacheSizeMax) cache.delete(cache.keys().next().value as string);
    cache.set(sql, plain);
  }
  return plain;
}
