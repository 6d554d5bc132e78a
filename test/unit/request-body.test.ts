// How a request body that is not a usable JSON document is refused: a 400 BAD_REQUEST whose
// message says what is wrong with it, so that the client can fix that and nothing else.

import { expect, test } from "bun:test";
import { parseJsonText } from "../../src/http/body.ts";
import { SvcError } from "../../src/util/errors.ts";

function refusal(text: string): SvcError {
  try {
    parseJsonText(text);
  } catch (e) {
    if (e instanceof SvcError) return e;
    throw e;
  }
  throw new Error("the body was taken");
}

test("a body nested too deeply to read is refused as too deep, not as JSON with bad quoting", () => {
  const depth = 300_000;
  for (const text of ["[".repeat(depth) + "]".repeat(depth), `{"statements":[{"sql":"SELECT ?","params":[${"[".repeat(depth)}${"]".repeat(depth)}]}]}`]) {
    const e = refusal(text);
    expect(e.code).toBe("BAD_REQUEST");
    expect(e.message).toContain("nested");
    expect(e.message).not.toContain("call stack");
    expect(`${e.message} ${e.hint ?? ""}`).not.toContain("quoting");
  }
});

test("JSON with a syntax error is still refused as not valid JSON", () => {
  const e = refusal('{"statements": ["SELECT 1",]}');
  expect(e.code).toBe("BAD_REQUEST");
  expect(e.message).toContain("not valid JSON");
});
