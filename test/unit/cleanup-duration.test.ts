// Durations for --older-than: one whole number and one unit.

import { describe, expect, test } from "bun:test";
import { formatDuration, parseDuration } from "../../src/backup/cleanup.ts";

describe("cleanup durations", () => {
  test("reads days, hours, minutes and seconds", () => {
    expect(parseDuration("7d")).toEqual({ ok: true, ms: 7 * 86_400_000 });
    expect(parseDuration("30d")).toEqual({ ok: true, ms: 30 * 86_400_000 });
    expect(parseDuration("12h")).toEqual({ ok: true, ms: 12 * 3_600_000 });
    expect(parseDuration("90m")).toEqual({ ok: true, ms: 90 * 60_000 });
    expect(parseDuration("3600s")).toEqual({ ok: true, ms: 3_600_000 });
  });

  test("rejects anything but a whole number and one known unit", () => {
    for (const text of ["7", "d", "7 d", "1.5h", "-1d", "7D", "7w", "1h30m", "", "7days"]) {
      expect(parseDuration(text).ok).toBe(false);
    }
  });

  test("rejects durations beyond ten years", () => {
    expect(parseDuration("3651d").ok).toBe(false);
    expect(parseDuration("3650d").ok).toBe(true);
  });

  test("formats an age with its two largest non-zero units", () => {
    expect(formatDuration(7 * 86_400_000)).toBe("7d");
    expect(formatDuration(8 * 86_400_000 + 3 * 3_600_000 + 5_000)).toBe("8d 3h");
    expect(formatDuration(45 * 60_000 + 10_000)).toBe("45m 10s");
    expect(formatDuration(0)).toBe("0s");
  });
});
