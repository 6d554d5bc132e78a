// Pieces of the Prometheus text exposition format (version 0.0.4).

export function formatNumber(value: number): string {
  if (value === Infinity) return "+Inf";
  if (value === -Infinity) return "-Inf";
  if (Number.isNaN(value)) return "NaN";
  return String(value);
}

export function escapeHelp(help: string): string {
  return help.replaceAll("\\", "\\\\").replaceAll("\n", "\\n");
}

export function escapeLabelValue(value: string): string {
  return value.replaceAll("\\", "\\\\").replaceAll('"', '\\"').replaceAll("\n", "\\n");
}

/** `{a="x",b="y"}`, or "" without labels; computed once per series, not per scrape line. */
export function labelText(names: readonly string[], values: readonly string[]): string {
  if (names.length === 0) return "";
  return `{${names.map((name, i) => `${name}="${escapeLabelValue(values[i] ?? "")}"`).join(",")}}`;
}

/** Adds one more label to a label text, e.g. le for histogram buckets. */
export function withLabel(labels: string, name: string, value: string): string {
  const pair = `${name}="${escapeLabelValue(value)}"`;
  return labels === "" ? `{${pair}}` : `${labels.slice(0, -1)},${pair}}`;
}

export function header(name: string, help: string, type: "counter" | "gauge" | "histogram"): string {
  return `# HELP ${name} ${escapeHelp(help)}\n# TYPE ${name} ${type}\n`;
}
