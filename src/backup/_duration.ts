// Durations as operators write them on a command line: a whole number and one unit,
// `3600s`, `90m`, `12h`, `7d`. One unit only, so that a typo cannot mean something else.

const UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** Bound: ten years, far beyond any retention, and well inside a safe integer of milliseconds. */
const DURATION_MS_MAX = 3650 * UNIT_MS.d;

export type DurationParse = { ok: true; ms: number } | { ok: false; message: string };

export function parseDuration(text: string): DurationParse {
  const m = /^(\d{1,12})([smhd])$/.exec(text.trim());
  if (m === null) {
    return { ok: false, message: `cannot read duration ${JSON.stringify(text)}: write a whole number and one unit, e.g. 7d, 12h, 90m, 3600s` };
  }
  const ms = Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
  if (ms > DURATION_MS_MAX) return { ok: false, message: `duration ${text} is longer than 3650d` };
  return { ok: true, ms };
}

/** A short age for output: at most the two largest non-zero units, e.g. "8d 3h", "30d", "45m 10s". */
export function formatDuration(ms: number): string {
  if (ms < 0) return `-${formatDuration(-ms)}`;
  const parts: string[] = [];
  let rest = Math.floor(ms / 1000);
  for (const [unit, seconds] of [["d", 86_400], ["h", 3600], ["m", 60], ["s", 1]] as const) {
    const count = Math.floor(rest / seconds);
    rest -= count * seconds;
    if (count > 0) parts.push(`${count}${unit}`);
    else if (parts.length > 0) break; // "8d 0h 5m" reads better as "8d"
    if (parts.length === 2) break;
  }
  return parts.length === 0 ? "0s" : parts.join(" ");
}
