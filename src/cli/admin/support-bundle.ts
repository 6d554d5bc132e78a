// `svc admin support-bundle [--out FILE]`: one tar.gz with what SPEC §7 asks for when asking for
// help: version and build, the configuration with every secret redacted, the last log lines
// (journald, or --log-file), the node's cluster-status, stats and /metrics, disk usage of the
// data directory and facts about the host. A node that does not answer is recorded as such;
// the bundle is still written. Secrets found in the configuration are scrubbed from every file.

import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { defineCommand } from "citty";
import { create as createTar } from "tar";
import { loadConfigFile, secretPaths } from "../../config/index.ts";
import { commit, version, versionLine } from "../../version.ts";
import { nodeUrlWith, printJson } from "../_client.ts";
import { defaultConfigPath } from "../_config.ts";
import { credentialHeaders, credentialSecrets, credentialTls } from "../_credentials.ts";
import { CliExit, ExitCode, usageError } from "../_exit.ts";
import { diskUsage, hostFacts } from "./_host-facts.ts";
import { redactConfig, redactText, scrub, secretFileValues } from "./_redact.ts";
import { gossipReport, gossipReportJson, type GossipStatusJson } from "./_gossip-report.ts";

const fetchTimeoutMs = 5_000;

interface Entry {
  name: string;
  what: string;
  ok: boolean;
  note?: string;
}

export const supportBundleCommand = defineCommand({
  meta: { name: "support-bundle", description: "Gather version, redacted config, logs, cluster state, metrics, disk and host facts into one tar.gz" },
  args: {
    out: { type: "string", description: "Where to write the bundle (default ./svc-support-<host>-<time>.tar.gz)", valueHint: "FILE" },
    config: { type: "string", description: `Configuration file (default ${defaultConfigPath()})`, valueHint: "FILE" },
    node: { type: "string", description: "Admin URL of the node (default: the admin address in the configuration)", valueHint: "URL" },
    "data-dir": { type: "string", description: "Data directory (default: data_dir in the configuration)", valueHint: "DIR" },
    "log-file": { type: "string", description: "Take the log from this file instead of journald", valueHint: "FILE" },
    lines: { type: "string", default: "2000", description: "How many of the last log lines to include", valueHint: "N" },
    unit: { type: "string", default: "svc", description: "The systemd unit whose journal to read", valueHint: "UNIT" },
    json: { type: "boolean", description: "Print the bundle's manifest as JSON" },
  },
  async run({ args }) {
    // Digits only: Number() would take "0x10" as 16 and "1e3" as 1000.
    const lines = /^[0-9]{1,7}$/.test(args.lines) ? Number(args.lines) : Number.NaN;
    if (!Number.isInteger(lines) || lines < 1 || lines > 1_000_000) throw usageError(`--lines must be a whole number from 1 to 1000000 in decimal digits, got ${JSON.stringify(args.lines)}`);
    const progress = (step: string): void => {
      if (process.stderr.isTTY) process.stderr.write(`  ${step}…\n`);
    };
    const createdAt = new Date();
    const stamp = createdAt.toISOString().replace(/[-:]/g, "").replace(/\.\d+Z$/, "Z");
    const name = `svc-support-${safeName(hostname())}-${stamp}`;
    const out = resolve(args.out ?? `${name}.tar.gz`);

    const configPath = args.config ?? defaultConfigPath();
    const configText = readOrNull(configPath);
    const parsed = configText === null ? null : loadConfigFile(configPath);
    const config = parsed?.ok === true ? parsed.config : null;
    const dataDir = args["data-dir"] ?? config?.dataDir ?? (configText === null ? null : /^\s*data_dir\s*=\s*"([^"]+)"/m.exec(configText)?.[1] ?? null);
    const base = nodeUrlWith({ node: args.node }, config);

    const files = new Map<string, string>();
    const entries: Entry[] = [];
    const add = (file: string, what: string, text: string, ok: boolean, note?: string): void => {
      files.set(file, text);
      entries.push({ name: file, what, ok, ...(note === undefined ? {} : { note }) });
    };

    progress("configuration");
    const redaction = configText === null ? null : redactConfig(configText);
    // What the key and token files hold, and the token this command sends, are scrubbed too.
    const secrets = [...(redaction?.secrets ?? []), ...(config === null ? [] : secretFileValues(secretPaths(config))), ...credentialSecrets()];
    if (redaction === null) add("config.toml", "the configuration, secrets redacted", `# no configuration at ${configPath}\n`, false, `no file at ${configPath}`);
    else add("config.toml", "the configuration, secrets redacted", redaction.text, true, `${configPath}${parsed?.ok === false ? " (does not validate: see svc --validate)" : ""}`);

    add("version.txt", "version and build", `${versionLine}\nversion: ${version}\ncommit: ${commit}\nexecutable: ${process.execPath}\n`, true);

    progress("log");
    const log = readLog(args["log-file"], args.unit, lines);
    add("log.txt", `the last ${lines} log lines`, log.text, log.ok, log.source);

    for (const [file, path, what] of [
      ["cluster-status.json", "/admin/cluster-info", "cluster-status: every member's own view"],
      ["stats.json", "/admin/stats", "stats"],
      ["metrics.txt", "/metrics", "/metrics"],
    ] as const) {
      progress(what.split(":")[0] ?? what);
      const r = file === "cluster-status.json" ? await clusterStatus(base) : await fetchText(base, path);
      add(file, what, r.text, r.ok, r.ok ? base : `the node at ${base} did not answer: ${r.error}`);
    }

    progress("disk usage and host facts");
    add("disk-usage.json", "disk usage of the data directory per subdirectory", `${JSON.stringify(dataDir === null ? { error: "no data directory known: give --data-dir or --config" } : { data_dir: dataDir, ...diskUsage(dataDir) }, null, 2)}\n`, dataDir !== null && existsSync(dataDir));
    add("host.json", "kernel, cores, memory, filesystem and mount options of the data directory", `${JSON.stringify(hostFacts(dataDir), null, 2)}\n`, true);

    const manifest = {
      bundle: basename(out),
      created_at: createdAt.toISOString(),
      version,
      commit,
      node: base,
      config: configPath,
      data_dir: dataDir,
      redacted_values: secrets.length,
      files: entries,
    };
    add("manifest.json", "what each file is", `${JSON.stringify(manifest, null, 2)}\n`, true);

    progress("writing the archive");
    await writeBundle(out, name, files, secrets);
    const sizeBytes = statSync(out).size;
    if (args.json) return printJson({ ...manifest, out, size_bytes: sizeBytes });
    const missing = entries.filter((e) => !e.ok).map((e) => e.name);
    process.stdout.write(`support bundle ${out} (${Math.ceil(sizeBytes / 1024)} KiB, ${entries.length} files, ${secrets.length} secret values redacted)` +
      `${missing.length === 0 ? "" : `; recorded as unavailable: ${missing.join(", ")}`}\n`);
  },
});

/** Every file redacted and scrubbed of the configuration's secrets, then one tar.gz, renamed into place. */
async function writeBundle(out: string, name: string, files: ReadonlyMap<string, string>, secrets: readonly string[]): Promise<void> {
  const staging = mkdtempSync(join(tmpdir(), "svc-support-"));
  const partial = `${out}.partial`;
  try {
    const dir = join(staging, name);
    mkdirSync(dir, { mode: 0o700 });
    for (const [file, text] of files) {
      // The configuration is already redacted; scrubbing it again is harmless.
      writeFileSync(join(dir, file), scrub(file === "config.toml" ? text : redactText(text), secrets), { mode: 0o600 });
    }
    await createTar({ gzip: true, file: partial, cwd: staging, portable: true }, [name]);
    renameSync(partial, out);
  } catch (e) {
    rmSync(partial, { force: true });
    throw new CliExit(ExitCode.failure, `could not write the bundle ${out}: ${e instanceof Error ? e.message : String(e)}\n  → give a writable place with --out FILE`);
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

function readLog(logFile: string | undefined, unit: string, lines: number): { text: string; ok: boolean; source: string } {
  if (logFile !== undefined && logFile !== "") {
    const text = readOrNull(logFile);
    if (text === null) return { text: `# cannot read ${logFile}\n`, ok: false, source: `cannot read ${logFile}` };
    const all = text.split("\n");
    if (all.at(-1) === "") all.pop();
    return { text: `${all.slice(-lines).join("\n")}\n`, ok: true, source: logFile };
  }
  const journalctl = Bun.which("journalctl");
  if (journalctl === null) return { text: "# journalctl is not installed here; pass --log-file FILE\n", ok: false, source: "no journalctl" };
  const r = Bun.spawnSync([journalctl, "-u", unit, "-n", String(lines), "--no-pager", "-o", "short-iso"], { stdout: "pipe", stderr: "pipe", timeout: 30_000 });
  const text = r.stdout.toString();
  if (r.exitCode !== 0 || text.trim() === "" || /^-- No entries --$/m.test(text)) {
    return { text: `# journalctl -u ${unit} gave no lines (${r.stderr.toString().trim() || `exit ${r.exitCode}`}); pass --log-file FILE\n${text}`, ok: false, source: `journalctl -u ${unit}` };
  }
  return { text, ok: true, source: `journalctl -u ${unit} -n ${lines}` };
}

async function fetchText(base: string, path: string): Promise<{ text: string; ok: boolean; error?: string }> {
  try {
    const r = await fetch(`${base}${path}`, { headers: credentialHeaders(), ...credentialTls(), signal: AbortSignal.timeout(fetchTimeoutMs) });
    const text = await r.text();
    return r.ok ? { text, ok: true } : { text, ok: false, error: `HTTP ${r.status}` };
  } catch (e) {
    const error = e instanceof Error ? e.message : String(e);
    return { text: `${JSON.stringify({ reachable: false, node: base, error })}\n`, ok: false, error };
  }
}

/** cluster-status as `--json` prints it, the node's cluster-info, and each member's own cluster-info. */
async function clusterStatus(base: string): Promise<{ text: string; ok: boolean; error?: string }> {
  const here = await fetchText(base, "/admin/cluster-info");
  if (!here.ok) return here;
  let info: { members?: { id: string; admin: string | null }[] };
  try {
    info = JSON.parse(here.text) as typeof info;
  } catch {
    return { text: here.text, ok: false, error: "cluster-info is not JSON" };
  }
  const views = await Promise.all((info.members ?? []).map(async (m) => {
    if (m.admin === null) return { id: m.id, reachable: false, error: "no admin address known" };
    const r = await fetchText(`${base.startsWith("https:") ? "https" : "http"}://${m.admin}`, "/admin/cluster-info");
    if (!r.ok) return { id: m.id, admin: m.admin, reachable: false, error: r.error };
    try {
      return { id: m.id, admin: m.admin, reachable: true, view: JSON.parse(r.text) as unknown };
    } catch {
      return { id: m.id, admin: m.admin, reachable: false, error: "not JSON" };
    }
  }));
  // What `svc admin cluster-status --json` prints: every member alive, suspect or dead as gossip
  // sees it, the views, groups and problems.
  const gossip = await fetchText(base, "/admin/gossip");
  let status: unknown;
  try {
    status = gossip.ok ? gossipReportJson(gossipReport(JSON.parse(gossip.text) as GossipStatusJson)) : { error: gossip.error };
  } catch (e) {
    status = { error: `GET /admin/gossip: ${e instanceof Error ? e.message : String(e)}` };
  }
  return { text: `${JSON.stringify({ asked: base, cluster_status: status, cluster_info: info, members: views }, null, 2)}\n`, ok: true };
}

function readOrNull(path: string): string | null {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return null;
  }
}

function safeName(text: string): string {
  return text.replace(/[^A-Za-z0-9_.-]/g, "-").slice(0, 64) || "host";
}
