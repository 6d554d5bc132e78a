// The import arrows of docs/architecture.md, checked on every file under src/: which module
// may import which, through which door, what is private to its folder, and no cycles (type-only
// and lazy imports included). A failure names the importing file and the import.

import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { basename, dirname, join, relative, resolve } from "node:path";

const repoRoot = resolve(import.meta.dir, "../..");
const srcRoot = join(repoRoot, "src");

/**
 * Who may import whom: a module is a folder under src/, or one of the files at src/'s root
 * (main.ts, version.ts). A module may always import its own files. The same table is in
 * docs/architecture.md; a test below keeps the two equal.
 */
const allowedImports: Readonly<Record<string, readonly string[]>> = {
  util: [],
  version: [],
  config: ["util"],
  log: ["util"],
  metrics: ["util"],
  raft: ["util"],
  io: ["util"],
  storage: ["io", "util"],
  store: ["io", "util"],
  transport: ["io", "util"],
  gossip: ["io", "util"],
  backup: ["storage", "store", "io", "util"],
  node: ["raft", "storage", "store", "transport", "gossip", "io", "config", "metrics", "util"],
  http: ["node", "store", "config", "metrics", "util", "version"],
  cli: ["node", "backup", "http", "storage", "store", "io", "config", "log", "util", "version"],
  main: ["cli"],
};

/**
 * Arrows allowed for `import type` / `export type` only: no code runs across them. http maps
 * every module's error codes to statuses (http/errors.ts), so it names their code unions.
 */
const typeOnlyImports: Readonly<Record<string, readonly string[]>> = {
  http: ["raft", "storage", "transport", "backup"],
};

/** Importers that reach the listed modules only through the target's index.ts. */
const indexOnly: Readonly<Record<string, readonly string[] | "all">> = {
  cli: "all",
  main: "all",
  http: ["node"],
};

/** Modules that import no package and no node:/bun: builtin: pure code only. */
const noPackages: readonly string[] = ["raft"];

/**
 * Imports of node's internal files that wait for node/index.ts to export what they use (node/
 * is being split; its index.ts is edited with it). Each entry is "importer -> target", both
 * under src/. The test fails on an entry that no longer occurs, so the list only shrinks.
 */
const pendingNodeExports: readonly string[] = [];

/**
 * Import cycles inside node/ that wait for the node's split to break them (node/ is not edited
 * from here). Each entry is one cycle's files, sorted. Stale entries fail the test too.
 */
const pendingNodeCycles: readonly (readonly string[])[] = [];

interface Import {
  /** Importing file, relative to src/. */
  readonly from: string;
  /** The specifier as written. */
  readonly spec: string;
  /** Imported file relative to src/, or null for a package or a file outside src/. */
  readonly to: string | null;
  /** `import type` or `export type`: erased, no code runs across it. */
  readonly typeOnly: boolean;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).sort().flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return name.endsWith(".ts") ? [path] : [];
  });
}

// Static imports and re-exports (type-only ones too), side-effect imports, and import("…").
const importPatterns = [
  /^\s*(?:import|export)\s+(type\s+)?(?:\{[^}]*\}|\*(?:\s+as\s+\w+)?|\w+(?:\s*,\s*(?:\{[^}]*\}|\*\s+as\s+\w+))?)\s+from\s*["'](?<spec>[^"']+)["']/gm,
  /^\s*import\s*["'](?<spec>[^"']+)["']/gm,
  /\bimport\(\s*["'](?<spec>[^"']+)["']\s*\)/g,
];

function importsOf(path: string): Import[] {
  const text = readFileSync(path, "utf8");
  const from = relative(srcRoot, path);
  const found: Import[] = [];
  for (const pattern of importPatterns) {
    for (const m of text.matchAll(pattern)) {
      const spec = m.groups?.["spec"] as string;
      let to: string | null = null;
      if (spec.startsWith(".")) {
        const target = relative(srcRoot, resolve(dirname(path), spec));
        to = target.startsWith("..") ? null : target;
      }
      found.push({ from, spec, to, typeOnly: m[1] !== undefined && pattern === importPatterns[0] });
    }
  }
  return found;
}

function moduleOf(file: string): string {
  const slash = file.indexOf("/");
  return slash === -1 ? basename(file, ".ts") : file.slice(0, slash);
}

const files = sourceFiles(srcRoot).map((p) => relative(srcRoot, p));
const imports = sourceFiles(srcRoot).flatMap(importsOf);
const internal = imports.filter((i): i is Import & { to: string } => i.to !== null);
const pending = new Set(pendingNodeExports);
const isPending = (i: Import) => pending.has(`${i.from} -> ${i.to}`);
const describeImport = (i: Import) => `${i.from}: import "${i.spec}"`;

/** Strongly connected components with more than one member (Tarjan). */
function cycles(edges: ReadonlyMap<string, ReadonlySet<string>>): string[][] {
  let counter = 0;
  const order = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    order.set(v, counter);
    low.set(v, counter);
    counter++;
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!order.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v) as number, order.get(w) as number));
      }
    }
    if (low.get(v) !== order.get(v)) return;
    const component: string[] = [];
    for (;;) {
      const w = stack.pop() as string;
      onStack.delete(w);
      component.push(w);
      if (w === v) break;
    }
    if (component.length > 1) found.push(component.sort());
  };
  for (const v of [...edges.keys()].sort()) if (!order.has(v)) visit(v);
  return found;
}

function graph(pairs: Iterable<readonly [string, string]>): Map<string, Set<string>> {
  const edges = new Map<string, Set<string>>();
  for (const [a, b] of pairs) {
    const out = edges.get(a) ?? new Set<string>();
    out.add(b);
    edges.set(a, out);
  }
  return edges;
}

describe("import arrows", () => {
  test("the parser sees the imports of a known file", () => {
    // Guards the patterns above: a parser that finds nothing would pass every rule.
    const seen = internal.filter((i) => i.from === "cli/root.ts").map((i) => i.to);
    expect(seen).toContain("version.ts");
    expect(seen).toContain("cli/serve.ts");
    expect(internal.length).toBeGreaterThan(200);
  });

  test("every module under src/ has a row in the rule table", () => {
    const unknown = [...new Set(files.map(moduleOf))].filter((m) => !(m in allowedImports));
    expect(unknown).toEqual([]);
  });

  test("each module imports only the modules its row allows", () => {
    const bad = internal
      .filter((i) => {
        const a = moduleOf(i.from);
        const b = moduleOf(i.to);
        if (a === b || (allowedImports[a] ?? []).includes(b)) return false;
        return !(i.typeOnly && (typeOnlyImports[a] ?? []).includes(b));
      })
      .map((i) => `${describeImport(i)} (${moduleOf(i.from)} may import only ${(allowedImports[moduleOf(i.from)] ?? []).join(", ") || "nothing of ours"})`);
    expect(bad).toEqual([]);
  });

  test("cli and main reach other modules, and http reaches node, only through index.ts", () => {
    const bad = internal
      .filter((i) => {
        const a = moduleOf(i.from);
        const b = moduleOf(i.to);
        const rule = indexOnly[a];
        if (a === b || rule === undefined || (rule !== "all" && !rule.includes(b))) return false;
        if (!i.to.includes("/")) return false; // a module that is one file at src/'s root
        return i.to !== `${b}/index.ts` && !isPending(i);
      })
      .map((i) => `${describeImport(i)} (use ${moduleOf(i.to)}/index.ts)`);
    expect(bad).toEqual([]);
  });

  test("a file whose name starts with _ is imported only from within its folder", () => {
    const bad = internal
      .filter((i) => basename(i.to).startsWith("_") && !i.from.startsWith(`${dirname(i.to)}/`))
      .map((i) => `${describeImport(i)} (private to ${dirname(i.to)}/)`);
    expect(bad).toEqual([]);
  });

  test("the raft core imports no package and no node: or bun: module", () => {
    const bad = imports.filter((i) => noPackages.includes(moduleOf(i.from)) && !i.spec.startsWith(".")).map(describeImport);
    expect(bad).toEqual([]);
  });

  test("no import cycle between files", () => {
    const found = cycles(graph(internal.map((i) => [i.from, i.to] as const)));
    const key = (c: readonly string[]) => c.join(" <-> ");
    const pendingKeys = new Set(pendingNodeCycles.map(key));
    expect(found.filter((c) => !pendingKeys.has(key(c)))).toEqual([]);
    // A pending cycle that is gone leaves the list.
    const foundKeys = new Set(found.map(key));
    expect(pendingNodeCycles.map(key).filter((k) => !foundKeys.has(k))).toEqual([]);
  });

  test("no import cycle between modules", () => {
    const pairs = internal.map((i) => [moduleOf(i.from), moduleOf(i.to)] as const).filter(([a, b]) => a !== b);
    expect(cycles(graph(pairs))).toEqual([]);
  });

  test("every pending node export is still an import that needs it", () => {
    const present = new Set(internal.map((i) => `${i.from} -> ${i.to}`));
    expect(pendingNodeExports.filter((p) => !present.has(p))).toEqual([]);
  });

  test("docs/architecture.md shows the same rule table", () => {
    const doc = readFileSync(join(repoRoot, "docs/architecture.md"), "utf8");
    const names = (cell: string) => [...cell.matchAll(/`(\w+)`/g)].map((x) => x[1] as string);
    const rows: Record<string, string[]> = {};
    const typeRows: Record<string, string[]> = {};
    for (const m of doc.matchAll(/^\| `(\w+)` \|([^|]*)\|([^|]*)\|/gm)) {
      rows[m[1] as string] = names(m[2] as string);
      const types = names(m[3] as string);
      if (types.length > 0) typeRows[m[1] as string] = types;
    }
    expect(rows).toEqual(Object.fromEntries(Object.entries(allowedImports).map(([k, v]) => [k, [...v]])));
    expect(typeRows).toEqual(Object.fromEntries(Object.entries(typeOnlyImports).map(([k, v]) => [k, [...v]])));
  });
});
