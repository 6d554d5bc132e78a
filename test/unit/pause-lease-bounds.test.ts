// The bounds of a write pause's lease are one pair of constants, in store/ beside the
// pause_writes command: the admin API refuses a lease outside them, the CLI checks --lease
// against them, and a full backup putting an operator's pause back gives no less than the least
// one. Two copies (backup/ may not import http/) would drift apart unnoticed.

import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { pauseLeaseMsMax, pauseLeaseMsMin } from "../../src/store/index.ts";

const srcRoot = resolve(import.meta.dir, "../../src");

test("the least and greatest pause leases are declared once, in store/, and every other file under src/ imports them", () => {
  expect(pauseLeaseMsMin).toBe(1000);
  expect(pauseLeaseMsMax).toBe(86_400_000);
  const declared: string[] = [];
  for (const name of readdirSync(srcRoot, { recursive: true }) as string[]) {
    if (!name.endsWith(".ts")) continue;
    const text = readFileSync(join(srcRoot, name), "utf8");
    for (const m of text.matchAll(/\b(?:const|let|var)\s+(pauseLeaseMs\w*)\s*=/g)) declared.push(`${relative(srcRoot, join(srcRoot, name))}: ${m[1]}`);
  }
  expect(declared.sort()).toEqual(["store/command.ts: pauseLeaseMsMax", "store/command.ts: pauseLeaseMsMin"]);
});
