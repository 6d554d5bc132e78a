// The command line as an operator types it, checked before any command runs: what `checkedArgs`
// refuses (exit 2, naming the mistake) and what it hands on unchanged.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { CommandDef } from "citty";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { checkedArgs, reportError, rootCommand } from "../../src/cli/index.ts";
import { runSource } from "../lib/source-cli.ts";

const root = rootCommand as CommandDef;

/** The exit code and message a command line is refused with, or null when it is accepted. */
async function refusal(args: string[]): Promise<{ exit: number; message: string } | null> {
  try {
    await checkedArgs(root, args);
    return null;
  } catch (e) {
    const write = process.stderr.write;
    let message = "";
    process.stderr.write = ((text: string) => {
      message += text;
      return true;
    }) as typeof process.stderr.write;
    try {
      return { exit: reportError(e), message };
    } finally {
      process.stderr.write = write;
    }
  }
}

describe("words past the arguments a command takes", () => {
  test("a lease given without --lease is refused rather than pausing writes with no end", async () => {
    expect(await refusal(["admin", "pause-writes", "5s"])).toEqual({
      exit: 2,
      message: 'svc: unexpected argument "5s": `svc admin pause-writes` takes no arguments; see `svc admin pause-writes --help`\n',
    });
  });

  test("a word after a command that takes none is refused, options around it or not", async () => {
    expect((await refusal(["admin", "snapshot", "local"]))?.exit).toBe(2);
    expect((await refusal(["admin", "wal-repair", "--skip-corrupted", "/var/lib/svc", "--dry-run"]))?.message).toContain('unexpected argument "/var/lib/svc"');
    expect((await refusal(["serve", "--config", "/etc/svc/config.toml", "extra"]))?.message).toContain("`svc serve` takes no arguments");
  });

  test("an unquoted statement is refused at its second word, not run as its first", async () => {
    expect(await refusal(["admin", "query", "SELECT", "count(*)", "FROM", "kv"])).toEqual({
      exit: 2,
      message: 'svc: unexpected argument "count(*)": `svc admin query` takes SQL (quote a value with spaces); see `svc admin query --help`\n',
    });
    expect((await refusal(["admin", "query", "--", "SELECT 1", "SELECT 2"]))?.message).toContain('unexpected argument "SELECT 2"');
  });

  test("the arguments a command takes pass unchanged", async () => {
    expect(await refusal(["admin", "query", "SELECT 1", "--json"])).toBeNull();
    expect(await refusal(["admin", "query", "--", "-1"])).toBeNull();
    expect(await refusal(["admin", "wal-archive-put", "/a/seg.wal", "/backups/wal"])).toBeNull();
    expect(await refusal(["admin", "backup", "verify", "svc-backup-20260101.tar.gz"])).toBeNull();
    expect(await refusal(["admin", "pause-writes", "--lease", "5s"])).toBeNull();
    expect(await checkedArgs(root, ["--config", "/etc/svc/config.toml", "serve"])).toEqual(["serve", "--config", "/etc/svc/config.toml"]);
  });
});

describe("options that take a value", () => {
  test("a choice given as the next word takes that word, not the command's argument", async () => {
    expect(await refusal(["admin", "query", "--consistency", "stale", "SELECT 1"])).toBeNull();
    expect(await refusal(["admin", "query", "SELECT 1", "--consistency", "leader", "--json"])).toBeNull();
  });

  test("one given twice is refused, naming it, rather than the last taken", async () => {
    expect(await refusal(["admin", "wal-replay", "--wal-dir", "/w", "--until", "2026-11-22T21:30:00Z", "--until", "2026-11-23T21:30:00Z"])).toEqual({
      exit: 2,
      message: "svc: --until is given twice: `svc admin wal-replay` takes one value; see `svc admin wal-replay --help`\n",
    });
    expect((await refusal(["admin", "pause-writes", "--lease=5s", "--lease", "10m"]))?.message).toContain("--lease is given twice");
    expect((await refusal(["admin", "query", "SELECT 1", "--consistency", "stale", "--consistency=leader"]))?.exit).toBe(2);
    // A flag said twice says the same thing.
    expect(await refusal(["admin", "query", "SELECT 1", "--json", "--json"])).toBeNull();
  });
});

describe("an option given an empty value", () => {
  test("is refused, naming it, rather than taken as not given: `serve --config=$UNSET` would start a new, empty lone node on the default ports", async () => {
    expect(await refusal(["serve", "--config="])).toEqual({
      exit: 2,
      message: "svc: --config is given an empty value: give it one, or leave the option out (is a shell variable unset?); see `svc serve --help`\n",
    });
    expect((await refusal(["serve", "--config", ""]))?.exit).toBe(2);
    expect((await refusal(["--config=", "--validate"]))?.exit).toBe(2);
    expect((await refusal(["admin", "pause-writes", "--node="]))?.message).toContain("--node is given an empty value");
    expect((await refusal(["admin", "query", "SELECT 1", "--consistency", ""]))?.exit).toBe(2);
    expect((await refusal(["admin", "stats", "--token-file", " "]))?.exit).toBe(2);
  });
});

describe("a group of commands given none", () => {
  test("names the group and its --help", async () => {
    expect(await refusal(["admin"])).toEqual({ exit: 2, message: "svc: no command given for `svc admin`; see `svc admin --help`\n" });
    expect(await refusal(["admin", "backup"])).toEqual({ exit: 2, message: "svc: no command given for `svc admin backup`; see `svc admin backup --help`\n" });
    expect(await refusal(["admin", "backup", "full", "--to", "/backups"])).toBeNull();
  });
});

describe("a malformed value of an option", () => {
  let dir = "";
  beforeAll(() => {
    dir = fs.mkdtempSync(join(tmpdir(), "svc-command-line-"));
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  test("wal-replay --until that is no time exits 2, naming --until and the forms it takes", () => {
    for (const bad of ["yesterday", "2026-11-22T10:00:30", "2026-02-30T10:00:00Z", "2026-11-22T10:00:30+25:00"]) {
      const r = runSource(["admin", "wal-replay", "--wal-dir", dir, "--until", bad, "--data-dir", dir], dir);
      expect({ bad, code: r.code }).toEqual({ bad, code: 2 });
      expect(r.stderr).toContain(`--until ${JSON.stringify(bad)}`);
      expect(r.stderr).toContain("YYYY-MM-DDTHH:MM:SS");
    }
  });

  test("support-bundle --lines takes decimal digits only, not another number's form", () => {
    for (const bad of ["0x10", "1e3", "12abc"]) {
      const r = runSource(["admin", "support-bundle", "--lines", bad, "--out", join(dir, "bundle.tar.gz"), "--log-file", join(dir, "none.log")], dir);
      expect({ bad, code: r.code }).toEqual({ bad, code: 2 });
      expect(r.stderr).toContain("--lines");
    }
    expect(fs.existsSync(join(dir, "bundle.tar.gz"))).toBe(false);
  });

  test("dev-cluster --nodes other than 3 or 5 exits 2", () => {
    const r = runSource(["dev-cluster", "--nodes", "4", "--dir", join(dir, "dev")], dir);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--nodes");
    expect(fs.existsSync(join(dir, "dev"))).toBe(false);
  });
});
