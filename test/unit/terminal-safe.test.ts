// What the admin commands print of text a client chose (table names, row values) cannot forge
// a line or drive the operator's terminal.

import { expect, test } from "bun:test";
import { terminalSafe } from "../../src/cli/_client.ts";

test("control characters are shown as escapes; other text, accents and all, as it is", () => {
  expect(terminalSafe("new\nline")).toBe("new\\nline");
  expect(terminalSafe("\u001b[31mred")).toBe("\\u001b[31mred");
  expect(terminalSafe("a\tb\rc\u0000d\u007f\u009b\u2028")).toBe("a\\tb\\u000dc\\u0000d\\u007f\\u009b\\u2028");
  expect(terminalSafe("café – ok 100%")).toBe("café – ok 100%");
});
