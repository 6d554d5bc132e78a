import { expect, test } from "bun:test";
import { jsonInt, parseJson64, parseJson64Strict, stringifyJson64, WideIntegerLiteral } from "../../src/util/json64.ts";

test("integer literals a double cannot hold are read as exact BigInts; every other value as JSON.parse reads it", () => {
  const text = '{"p":[9007199254740993,-9223372036854775808,9223372036854775807,9223372036854775808,9007199254740991,1.5,1e18,-0,"12345678901234567890"]}';
  const v = parseJson64(text) as { p: unknown[] };
  expect(v.p[0]).toBe(9007199254740993n);
  expect(v.p[1]).toBe(-(2n ** 63n));
  expect(v.p[2]).toBe(2n ** 63n - 1n);
  // Past 64 bits SQLite reads the literal as a real: the double stays.
  expect(v.p[3]).toBe(9223372036854775808);
  expect(v.p.slice(4)).toEqual([9007199254740991, 1.5, 1e18, -0, "12345678901234567890"]);
  expect(parseJson64('{"a":[1,2.5,"x"]}')).toEqual({ a: [1, 2.5, "x"] });
});

test("what stringifyJson64 writes parseJson64 reads back as it was", () => {
  const value = { big: [2n ** 63n - 1n, -(2n ** 53n) - 1n, 5n], doubles: [2 ** 60, -(2 ** 70), 1e300, 0.1, 42], s: "9007199254740993" };
  const text = stringifyJson64(value);
  expect(text).toContain("9223372036854775807");
  expect(parseJson64(text)).toEqual({ ...value, big: [2n ** 63n - 1n, -(2n ** 53n) - 1n, 5] });
  expect(stringifyJson64({ a: [1n] }, 2)).toBe('{\n  "a": [\n    1\n  ]\n}');
});

test("answers carry integers as numbers when exact, else as their digits", () => {
  expect(JSON.stringify([jsonInt(7n), jsonInt(7), jsonInt(2n ** 53n + 1n), jsonInt(-(2n ** 63n))])).toBe("[7,7,9007199254740993,-9223372036854775808]");
});

test("the strict reading gives integer literals beyond 64 bits as written, for the caller to refuse, never as a rounded double", () => {
  const v = parseJson64Strict('{"p":[9223372036854775808,-9223372036854775809,9223372036854775807,1e19,9223372036854775808.0,1]}') as { p: unknown[] };
  expect(v.p[0]).toEqual(new WideIntegerLiteral("9223372036854775808"));
  expect(v.p[1]).toEqual(new WideIntegerLiteral("-9223372036854775809"));
  expect(v.p.slice(2)).toEqual([2n ** 63n - 1n, 1e19, 9223372036854775808, 1]);
});
