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

test("a client's number with a fraction or an exponent whose value is integral reads as that integer, exact, within 64 bits (as 1.0 binds as 1)", () => {
  // 9007199254740993.0 was bound as the REAL 9007199254740992.0: one less, and not an integer.
  const v = parseJson64Strict("[9007199254740993.0, 1e18, 4611686018427387904.0, -9007199254740993.00, 12345678901234567.8e1, 9223372036854775807.0]") as unknown[];
  expect(v).toEqual([9007199254740993n, 10n ** 18n, 2n ** 62n, -9007199254740993n, 123456789012345678n, 2n ** 63n - 1n]);
  // Not integral, or past 64 bits: the double, as SQLite reads the literal (and 1e999999 is not expanded).
  expect(parseJson64Strict("[9007199254740993.5, 123456789012345678e-1, 1.5e20, 9223372036854775808.0, 1e999999]")).toEqual([9007199254740994, 12345678901234568, 1.5e20, 9223372036854775808, Number.POSITIVE_INFINITY]);
  // svc's own texts keep a double it wrote in exponent form a double (stringifyJson64 writes them so).
  expect(parseJson64(stringifyJson64([2 ** 60]))).toEqual([2 ** 60]);
  expect(parseJson64("[1e18]")).toEqual([1e18]);
});
