// Fuzz: the TOML configuration (parseConfig on text, loadConfigFile on bytes). For any input it
// never throws; it returns either problems, each with a message and, where it gives one, a
// line and column inside the file, or a valid Config: deeply frozen, its numbers finite and
// not negative, its strings well-formed, the same Config when the same text is parsed again.

import { afterAll, expect, test } from "bun:test";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfigFile, parseConfig, renderConfigToml, type ConfigResult } from "../../src/config/index.ts";
import { fuzzPlan, runCases, type Gen } from "./_gen.ts";

const plan = fuzzPlan("config", 600);
const dir = fs.mkdtempSync(join(tmpdir(), "svc-fuzz-config-"));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const member = (n: number) => ({ id: `node${n}`, peer: `10.0.0.${n}:7879`, client: `10.0.0.${n}:7878`, admin: `10.0.0.${n}:9090` });
const corpus: string[] = [
  renderConfigToml({ nodeId: "node1", dataDir: join(dir, "data"), listen: { client: "0.0.0.0:7878", admin: "0.0.0.0:9090", peer: "0.0.0.0:7879" }, cluster: { bootstrap: true, members: [member(1)] } }),
  renderConfigToml({
    nodeId: "node2", dataDir: join(dir, "d2"), maxMemoryBytes: 512 * 1024 * 1024, snapshotIntervalEntries: 500,
    listen: { client: "[::1]:7878", admin: "127.0.0.1:9090", peer: "[fd00::2]:7879" },
    cluster: { members: [member(1), member(2), member(3)] },
    wal: { archiveCommand: "cp %p /backup/%f", archiveTimeoutMs: 30_000, segmentSizeBytes: 8 * 1024 * 1024 },
    raft: { heartbeatIntervalMs: 50, electionTimeoutMs: 500 },
    limits: { queryTimeoutMs: 100, adminQueryTimeoutMs: 1_000, writeCheckTimeoutMs: 200 },
  }),
  `node_id = "n1"\ndata_dir = "${join(dir, "x")}"\n[listen]\nclient = "localhost:1"\nadmin = "localhost:2"\npeer = "localhost:3"\n[cluster]\nmembers = [{ id = "n1", peer = "localhost:3", client = "localhost:1", admin = "localhost:2" }]\n`,
  `# comment\nnode_id = 'n1' # trailing\ndata_dir = """${join(dir, "y")}"""\nmax_memory_mb = 0x400\n[listen]\nclient = "127.0.0.1:7878"\n[raft]\nelection_timeout_ms = 1_000\n[wal]\narchive_command = '''sh -c "x"'''\n`,
];
const words = [
  "node_id", "data_dir", "max_memory_mb", "snapshot_interval", "listen", "client", "admin", "peer", "cluster", "bootstrap", "members",
  "wal", "archive_command", "archive_timeout", "segment_size_mb", "raft", "heartbeat_interval_ms", "election_timeout_ms", "limits",
  "query_timeout_ms", "admin_query_timeout_ms", "write_check_timeout_ms", "tls", "backup", "true", "false", "inf", "nan", "__proto__",
  "constructor", "[tls]", "[auth]", "cert_file", "key_file", "tokens_file", "token_file", "/etc/passwd/x", "=", "[", "]", "[[", "]]", "{", "}", ",", ".", "\"", "'", "\"\"\"", "'''", "#", "\\u0000", "\\ud800", "\\U0010FFFF",
  "1979-05-27T07:32:00Z", "999.1.1.1:80", "[::1]:0", "host:65536", "/", "relative/dir",
];

/** Every problem is explained and placed inside the file when placed at all. */
function checkProblems(result: Extract<ConfigResult, { ok: false }>, lineCount: number): void {
  if (result.problems.length === 0) throw new Error("refused with no problem listed");
  for (const p of result.problems) {
    if (typeof p.message !== "string" || p.message.trim() === "") throw new Error(`a problem without a message: ${JSON.stringify(p)}`);
    if (typeof p.keyPath !== "string") throw new Error(`a problem without a key path: ${JSON.stringify(p)}`);
    if (p.line !== undefined && !(Number.isInteger(p.line) && p.line >= 1 && p.line <= lineCount + 1)) {
      throw new Error(`a problem at line ${p.line} of a ${lineCount}-line file: ${p.message}`);
    }
    if (p.column !== undefined && !(Number.isInteger(p.column) && p.column >= 1)) throw new Error(`a problem at column ${p.column}: ${p.message}`);
  }
}

/**
 * Deeply frozen, numbers finite and not negative, strings well-formed (a file's text always is:
 * loadConfigFile refuses bytes that are not UTF-8, and TOML refuses surrogate escapes).
 */
function checkConfig(value: unknown, path: string, wellFormedText: boolean): void {
  if (typeof value === "number" && !(Number.isFinite(value) && value >= 0)) throw new Error(`${path} is ${value}`);
  if (typeof value === "bigint") throw new Error(`${path} is a BigInt (${value})`);
  if (typeof value === "string" && wellFormedText && !value.isWellFormed()) throw new Error(`${path} holds a lone surrogate`);
  if (typeof value === "object" && value !== null) {
    if (!Object.isFrozen(value)) throw new Error(`${path} is not frozen`);
    for (const [k, v] of Object.entries(value)) checkConfig(v, `${path}.${k}`, wellFormedText);
  }
}

function checkResult(result: ConfigResult, text: string): boolean {
  const lineCount = text.split("\n").length;
  if (!result.ok) {
    checkProblems(result, lineCount);
    return false;
  }
  checkConfig(result.config, "config", text.isWellFormed());
  return true;
}

function parseNeverThrows(text: string): ConfigResult {
  try {
    return parseConfig(text, "fuzz.toml");
  } catch (e) {
    throw new Error(`parseConfig threw ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`);
  }
}

test("parseConfig never throws: problems with their lines, or a valid frozen Config", async () => {
  let accepted = 0;
  let files = 0;
  const cases = await runCases(plan, (gen: Gen) => {
    if (gen.chance(0.2)) {
      // Bytes through the file loader: invalid UTF-8 is a problem with its place, not U+FFFD.
      const bytes = gen.chance(0.1) ? gen.randomBytes(400) : gen.mutateBytes(new TextEncoder().encode(gen.pick(corpus)), corpus.map((c) => new TextEncoder().encode(c)));
      gen.note(bytes);
      const path = join(dir, `case-${gen.seed}.toml`);
      fs.writeFileSync(path, bytes);
      let result: ConfigResult;
      try {
        result = loadConfigFile(path);
      } catch (e) {
        throw new Error(`loadConfigFile threw ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`);
      } finally {
        fs.rmSync(path, { force: true });
      }
      files++;
      if (checkResult(result, new TextDecoder().decode(bytes))) accepted++;
      return;
    }
    const text = gen.chance(0.05) ? new TextDecoder().decode(gen.randomBytes(400)) : gen.mutateText(gen.pick(corpus), corpus, words);
    gen.note(text);
    const result = parseNeverThrows(text);
    if (!checkResult(result, text)) return;
    accepted++;
    const again = parseNeverThrows(text);
    if (!again.ok || !result.ok || JSON.stringify(again.config) !== JSON.stringify(result.config)) throw new Error("the same text parsed to a different result");
  });
  console.log(`fuzz config: ${cases} cases (${files} through files), ${accepted} valid`);
  expect(cases).toBe(plan.seeds.length);
}, 600_000);

test("a path the configuration names that cannot be looked at is a problem on its line, not an exception", () => {
  // Found by seed 37: a data_dir of 100,000 characters threw ENAMETOOLONG out of parseConfig.
  const paths = [`/${"a".repeat(5000)}`, "/etc/hostname/below-a-file", "/tmp/a\\u0000b"];
  const texts = paths.flatMap((p) => [
    `node_id = "n1"\ndata_dir = "${p}"\n`,
    `node_id = "n1"\ndata_dir = "${join(dir, "d")}"\n[auth]\ntokens_file = "${p}"\n`,
    `node_id = "n1"\ndata_dir = "${join(dir, "d")}"\n[tls]\ncert_file = "${p}"\nkey_file = "${p}"\n`,
  ]);
  for (const text of texts) {
    const result = parseNeverThrows(text);
    expect(result.ok).toBe(false);
    if (!result.ok) checkProblems(result, text.split("\n").length);
  }
});

test("the configurations the fuzz starts from are valid", () => {
  for (const text of corpus) {
    const result = parseConfig(text, "corpus.toml");
    expect(result.ok ? "ok" : JSON.stringify(result.problems)).toBe("ok");
  }
});
