// svc admin backup full | snapshot | verify | offsite (SPEC §4.4, §8). Thin: reads the
// configuration, talks to the node beside it over its admin API, and runs backup/'s jobs.
// Progress goes to stderr on a terminal; one summary line (or --json) to stdout. Exit 0 when
// the backup was made and verified (or skipped by --if-leader on a follower), 1 when it
// failed, 2 for a wrong command line; 130 (SIGINT) or 143 (SIGTERM) when interrupted, writes
// resumed first.

import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { defineCommand } from "citty";
import {
  FullBackup, copyOffsite, newestFullBackup, openDestination, parseDuration, snapshotBackup, verifyArchive,
  isObjectUrl, type ArchiveCheck, type BackupNodeApi,
} from "../../backup/index.ts";
import { secretPaths, type Config } from "../../config/index.ts";
import { resolvedPath } from "../../util/index.ts";
import { pauseLeaseMsMax } from "../../store/index.ts";
import { callNode, nodeUrlWith, printJson } from "../_client.ts";
import { checkedBackupLocation, checkedLocation } from "../_location.ts";
import { defaultConfigPath, loadConfigOrExit } from "../_config.ts";
import { CliExit, ExitCode, usageError } from "../_exit.ts";
import { totalEntriesOf } from "./cluster-info.ts";

const commonArgs = {
  config: { type: "string", description: `Configuration file (data_dir, admin address, [backup]; default ${defaultConfigPath()})`, valueHint: "FILE" },
  node: { type: "string", description: "Admin URL of this node (default: the admin address in the configuration)", valueHint: "URL" },
  json: { type: "boolean", description: "Print one JSON object instead of the summary line" },
  "if-leader": { type: "boolean", description: "Do nothing (exit 0) unless this node is the leader now: for timers that run on every node" },
} as const;

interface Common {
  config?: string | undefined;
  node?: string | undefined;
  json?: boolean | undefined;
  "if-leader"?: boolean | undefined;
}

function progressPrinter(json: boolean): (step: string) => void {
  if (json || !process.stderr.isTTY) return () => {};
  let last = 0;
  return (step) => {
    const now = Date.now();
    if (now - last < 100 && step.startsWith("archiving")) return;
    last = now;
    process.stderr.write(`\r\x1b[K${step.slice(0, 100)}`);
  };
}

function clearProgress(json: boolean): void {
  if (!json && process.stderr.isTTY) process.stderr.write("\r\x1b[K");
}

function durationArg(text: string | undefined, name: string, fallbackMs: number | null): number | null {
  if (text === undefined) return fallbackMs;
  const d = parseDuration(text);
  if (!d.ok) throw usageError(`--${name}: ${d.message}`);
  return d.ms;
}

function setup(args: Common): { config: Config; configPath: string; base: string; api: BackupNodeApi } {
  const configPath = resolve(args.config ?? defaultConfigPath());
  const config = loadConfigOrExit(configPath);
  // As every admin command: https and the token and CA of [tls] and [auth] when the node uses them.
  const base = nodeUrlWith({ node: args.node }, config);
  // The other members' admin addresses, from cluster-info: should the node this backup runs
  // beside die while writes are paused, any member can resume them (the rest would stay paused
  // until the lease ran out).
  let others: string[] = [];
  const scheme = base.startsWith("https:") ? "https" : "http";
  const api: BackupNodeApi = {
    clusterInfo: async () => {
      const info = (await callNode(base, "GET", "/admin/cluster-info")) as Record<string, unknown> & { members?: { id: string; admin?: string | null }[] };
      others = (info.members ?? []).filter((m) => m.id !== info.node_id && typeof m.admin === "string").map((m) => `${scheme}://${m.admin}`);
      return info;
    },
    pauseWrites: async (leaseMs) => {
      const r = (await callNode(base, "POST", `/admin/pause-writes?lease_ms=${leaseMs}`)) as { index: number; until?: string };
      return { index: r.index, untilMs: r.until === undefined ? null : Date.parse(r.until) };
    },
    resumeWrites: async () => {
      let first: unknown = null;
      for (const url of [base, ...others]) {
        try {
          await callNode(url, "POST", "/admin/resume-writes", undefined, 5_000);
          return;
        } catch (e) {
          first ??= e;
        }
      }
      throw first;
    },
    appliedIndex: async () => ((await callNode(base, "GET", "/admin/stats")) as { applied_index: number }).applied_index,
    totalEntries: async () => totalEntriesOf(await callNode(base, "GET", "/admin/stats")),
    snapshotHere: async () => {
      const s = (await callNode(base, "POST", "/admin/snapshot?wait=true&local=true", undefined, 3_600_000)) as { dir: string; index: number; term: number };
      return { dir: s.dir, index: s.index, term: s.term };
    },
  };
  return { config, configPath, base, api };
}

/** --if-leader on a follower: true when the run should stop here (a summary was printed). */
async function skipUnlessLeader(args: Common, api: BackupNodeApi, what: string): Promise<boolean> {
  if (args["if-leader"] !== true) return false;
  const info = await api.clusterInfo();
  if (info.leader === info.node_id) return false;
  const summary = { status: "skipped", reason: `${String(info.node_id)} is not the leader (${String(info.leader ?? "none")} is)`, backup: what };
  if (args.json) printJson(summary);
  else process.stdout.write(`${what} backup skipped: ${summary.reason}\n`);
  return true;
}

/**
 * A backup is for the loss of the data directory: one written inside it goes with it (a disk
 * that fails, a full state rebuild, SPEC §4.5's emptied raft/, the snapshot cleanup's pruning),
 * so such a destination is a wrong command line.
 */
function refuseDestinationInDataDir(to: string, dataDir: string): void {
  if (isObjectUrl(to)) return;
  const dest = resolvedPath(to);
  const data = resolvedPath(dataDir);
  if (dest !== data && !dest.startsWith(`${data}/`)) return;
  throw usageError(`the destination ${to} is inside the data directory ${dataDir}: the backup would be lost with it ` +
    "(a disk that fails, raft/ emptied for a restore or a rebuild); give a directory on another disk, e.g. --to /var/backups/svc, or s3://bucket/prefix");
}

/** What to do about a backup that does not verify (the same words as archiveDamaged's hint). */
const damagedBackupWayOut = "use another backup (an older one, or another copy of this one); a damaged archive may still be extracted with tar for what it holds";

/** A sound full backup whose one fault is that it is not gzip-compressed: compressed so, it verifies. */
function onlyNotGzip(check: ArchiveCheck): boolean {
  return check.compression !== "gzip" && check.notBackup === null && check.missing.length === 0 && check.problems.length === 1;
}

/** The word verify prints for an archive that does not verify. */
function verdict(check: ArchiveCheck): string {
  if (check.notBackup !== null) return "NOT A SVC BACKUP";
  if (check.missing.length > 0) return "INCOMPLETE";
  return onlyNotGzip(check) ? "NOT GZIP-COMPRESSED" : "DAMAGED";
}

/** What verify says on stderr about an archive that does not verify, and what to do. */
function whyNotVerified(file: string, check: ArchiveCheck): string {
  if (check.notBackup !== null) return `${file} is not a svc backup: ${check.notBackup}\n  → give a svc-backup-<YYYYMMDD>.tar.gz that \`svc admin backup full\` wrote`;
  if (check.missing.length > 0) {
    return `${file} is not a whole full backup: it lacks ${check.missing.join(", ")}\n  → use another backup (an older one, or another copy of this one), or make one with \`svc admin backup full\``;
  }
  if (onlyNotGzip(check)) {
    const zstd = check.compression === "zstd";
    // One in an object store is compressed where it can be read: a copy here.
    const local = isObjectUrl(file) ? file.slice(file.lastIndexOf("/") + 1) : file;
    const gzipIt = zstd ? `zstd -dc ${local} | gzip > svc-backup-<YYYYMMDD>.tar.gz` : `gzip -c ${local} > svc-backup-<YYYYMMDD>.tar.gz`;
    return `${file} holds a whole full backup, but as ${zstd ? "a zstd-compressed" : "an uncompressed"} tar: a full backup is gzip-compressed, and \`tar xzf\` cannot read this one\n` +
      `  → ${isObjectUrl(file) ? "copy it here and " : ""}compress it with gzip (\`${gzipIt}\`, dated as the backup) and verify that, or use the archive \`svc admin backup full\` wrote`;
  }
  return `${file} does not verify\n  → ${damagedBackupWayOut}`;
}

/** File-system errors of a backup's destination, with what to do about each. */
const destinationFixes: Readonly<Record<string, string>> = {
  ENOSPC: "free space there, or give another destination (--to)",
  EDQUOT: "the disk quota there is used up: free some, or give another destination (--to)",
  EROFS: "that file system is mounted read-only: give a writable destination (--to)",
  EACCES: "the user running svc admin cannot write there: fix the directory's owner or mode, or give another destination",
  EPERM: "the user running svc admin cannot write there: fix the directory's owner or mode, or give another destination",
  EISDIR: "a directory is in the way of the file to write: give a file path, or remove the directory",
};

/**
 * Run `work`, which writes to `where`; a file-system error there ends the command with exit 1,
 * naming the destination, what happened and what to do (rather than a bare "ENOSPC: … write").
 */
async function writingTo<T>(where: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (e) {
    const code = (e as { code?: unknown } | null)?.code;
    const fix = typeof code === "string" ? destinationFixes[code] : undefined;
    if (fix === undefined) throw e;
    throw new CliExit(ExitCode.failure, `writing to ${where} failed: ${(e as Error).message}\n  → ${fix}`);
  }
}

function mib(bytes: number): string {
  return `${(bytes / 1048576).toFixed(1)} MiB`;
}

const fullCommand = defineCommand({
  meta: { name: "full", description: "Pause writes, snapshot, write svc-backup-<YYYYMMDD>.tar.gz, resume, verify; retention and off-site copy" },
  args: {
    ...commonArgs,
    to: { type: "string", description: "Directory or s3://bucket/prefix (default: [backup] dir)", valueHint: "DIR|URL" },
    retain: { type: "string", description: "Remove dated full backups there older than this (default: [backup] retain_days)", valueHint: "DURATION" },
    offsite: { type: "string", description: "Also copy it, dated and as latest.tar.gz, here (default: none)", valueHint: "URL|DIR" },
    "offsite-retain": { type: "string", description: "Retention of the off-site dated copies (default: [backup] offsite_retain_days)", valueHint: "DURATION" },
    lease: { type: "string", description: "The pause's lease: it ends by itself this long after the last renewal (default 60s)", valueHint: "DURATION" },
    "etc-dir": { type: "string", description: "Configuration directory to archive as etc/svc/ (default: the configuration file's directory)", valueHint: "DIR" },
    "include-secrets": { type: "boolean", description: "Also archive the key, token and gossip key files the configuration names (left out by default)" },
  },
  async run({ args }) {
    const { config, configPath, api } = setup(args);
    const to = args.to ?? config.backup?.dir ?? "";
    if (to === "") {
      if (args["if-leader"] === true) {
        // A timer on a host whose [backup] names no destination: nothing to do, and not an error.
        if (args.json) printJson({ status: "skipped", reason: "[backup] dir is not set" });
        else process.stdout.write("full backup skipped: [backup] dir is not set\n");
        return;
      }
      throw usageError("no destination: pass --to DIR|s3://bucket/prefix or set dir in the [backup] table of the configuration");
    }
    if (args.to !== undefined) checkedLocation(to, "--to");
    else checkedBackupLocation(to, "dir", configPath);
    if (args.offsite !== undefined) checkedLocation(args.offsite, "--offsite");
    refuseDestinationInDataDir(to, config.dataDir);
    const retainMs = durationArg(args.retain, "retain", config.backup?.retainMs ?? null);
    const offsiteRetainMs = durationArg(args["offsite-retain"], "offsite-retain", config.backup?.offsiteRetainMs ?? null);
    const leaseMs = durationArg(args.lease, "lease", 60_000) ?? 60_000;
    if (leaseMs < 3000) throw usageError("--lease: at least 3s, so that renewals can keep the pause");
    if (leaseMs > pauseLeaseMsMax) throw usageError("--lease: at most 24h");
    if (await skipUnlessLeader(args, api, "full")) return;
    const json = args.json === true;
    const job = new FullBackup(api, {
      to: isObjectUrl(to) ? to : resolve(to), dataDir: config.dataDir, configDir: args["etc-dir"] ?? dirname(configPath),
      excludedFiles: args["include-secrets"] === true ? [] : secretPaths(config),
      leaseMs, retainMs, offsite: args.offsite ?? null, offsiteRetainMs, nowMs: Date.now(), progress: progressPrinter(json),
    });
    let interrupted = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (interrupted) return;
      interrupted = true;
      clearProgress(json);
      process.stderr.write(`svc: ${signal}: resuming writes and removing the partial backup\n`);
      // 128 + the signal's number, as a shell reports a command a signal ended.
      const code = signal === "SIGINT" ? 130 : 143;
      job.interrupt().then(
        () => process.exit(code),
        (e: unknown) => {
          process.stderr.write(`svc: ${(e as Error).message}\n`);
          process.exit(code);
        },
      );
    };
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
    try {
      const r = await writingTo(to, () => job.run());
      clearProgress(json);
      if (json) return printJson({ status: "ok", ...r, check: { ok: r.check.ok, files: r.check.files, problems: r.check.problems } });
      process.stdout.write(`full backup ${r.archive}: ${mib(r.sizeBytes)}, ${r.files} files, snapshot ${r.snapshot.index} (term ${r.snapshot.term}), ${r.leftPaused ? "writes were paused before it and are left paused" : `writes paused ${(r.pausedMs / 1000).toFixed(1)} s`}, verified` +
        `${r.removed.length > 0 ? `, removed ${r.removed.length} older` : ""}${r.offsite.length > 0 ? `, off-site copy in ${args.offsite}` : ""}\n`);
    } catch (e) {
      clearProgress(json);
      if (interrupted) await new Promise(() => {}); // the signal handler exits
      throw e;
    } finally {
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
    }
  },
});

const snapshotCommand = defineCommand({
  meta: { name: "snapshot", description: "Take a snapshot, copy it with metadata.json to DIR|s3:// and refresh latest/" },
  args: {
    ...commonArgs,
    to: { type: "string", description: "Directory or s3://bucket/prefix (default: [backup] dir)", valueHint: "DIR|URL" },
  },
  async run({ args }) {
    const { config, configPath, api } = setup(args);
    const to = args.to ?? config.backup?.dir ?? "";
    if (to === "") throw usageError("no destination: pass --to DIR|s3://bucket/prefix or set dir in the [backup] table of the configuration");
    if (args.to !== undefined) checkedLocation(to, "--to");
    else checkedBackupLocation(to, "dir", configPath);
    refuseDestinationInDataDir(to, config.dataDir);
    if (await skipUnlessLeader(args, api, "snapshot")) return;
    const json = args.json === true;
    const r = await writingTo(to, () => snapshotBackup(api, { to: isObjectUrl(to) ? to : resolve(to), holdMs: 3_600_000, nowMs: Date.now(), progress: progressPrinter(json) }));
    clearProgress(json);
    if (json) return printJson({ status: "ok", ...r });
    process.stdout.write(`snapshot backup ${r.location}: snapshot ${r.snapshot.index} (term ${r.snapshot.term}), ${mib(r.sizeBytes)}; latest is ${r.latest}\n`);
  },
});

const verifyCommand = defineCommand({
  meta: { name: "verify", description: "List a full backup archive and check every file against its manifest" },
  args: {
    file: { type: "positional", description: "svc-backup-<YYYYMMDD>.tar.gz (a path or s3://bucket/prefix/name)", required: true },
    json: { type: "boolean", description: "Print one JSON object" },
  },
  async run({ args }) {
    const json = args.json === true;
    let path = checkedLocation(args.file, "the backup to verify");
    let temp: string | null = null;
    if (!isObjectUrl(path) && !fs.existsSync(path)) throw new CliExit(ExitCode.failure, `${path} does not exist`);
    if (!isObjectUrl(path) && fs.statSync(path).isDirectory()) {
      // The backup directory given for one of its archives: not a damaged archive.
      const newest = await newestFullBackup(openDestination(path));
      throw usageError(`${path} is a directory, not a backup archive\n  → ${newest === null
        ? `give the svc-backup-<YYYYMMDD>.tar.gz file to verify (${path} holds none)`
        : `give the archive to verify, e.g. \`svc admin backup verify ${join(path, newest)}\` (the newest there)`}`);
    }
    try {
      if (isObjectUrl(path)) {
        const slash = path.lastIndexOf("/");
        temp = `${fs.mkdtempSync(join(tmpdir(), "svc-verify-"))}/${path.slice(slash + 1)}`;
        await openDestination(path.slice(0, slash)).get(path.slice(slash + 1), temp);
        path = temp;
      }
      const progress = progressPrinter(json);
      const check = await verifyArchive(path, (f) => progress(`verifying ${f}`));
      clearProgress(json);
      const shown = { ...check, path: args.file };
      if (json) printJson(shown);
      else if (check.ok) process.stdout.write(`${args.file}: ok, ${check.files} files, ${mib(check.bytes)}, snapshot ${check.snapshot?.index} (term ${check.snapshot?.term}) of cluster ${check.snapshot?.clusterId}\n`);
      else process.stdout.write(`${args.file}: ${verdict(check)}\n${check.problems.map((p) => `  ${p}\n`).join("")}`);
      if (!check.ok) throw new CliExit(ExitCode.failure, json ? "" : whyNotVerified(args.file, check));
    } finally {
      if (temp !== null) fs.rmSync(dirname(temp), { recursive: true, force: true });
    }
  },
});

const offsiteCommand = defineCommand({
  meta: { name: "offsite", description: "Copy the newest full backup to the off-site store, dated and as latest.tar.gz (weekly)" },
  args: {
    ...commonArgs,
    from: { type: "string", description: "Where the full backups are (default: [backup] dir)", valueHint: "DIR|URL" },
    to: { type: "string", description: "Off-site store (default: [backup] offsite)", valueHint: "URL|DIR" },
    retain: { type: "string", description: "Remove off-site dated copies older than this (default: [backup] offsite_retain_days)", valueHint: "DURATION" },
  },
  async run({ args }) {
    // Both places given, no leader to ask and no configuration named: none is needed (the
    // default file may well be absent on the host that copies).
    if (args.from !== undefined) checkedLocation(args.from, "--from");
    if (args.to !== undefined) checkedLocation(args.to, "--to");
    const standalone = args.from !== undefined && args.to !== undefined && args["if-leader"] !== true && args.config === undefined &&
      !fs.existsSync(defaultConfigPath());
    const { config, configPath, api } = standalone ? { config: null, configPath: "", api: null } : setup(args);
    const from = args.from ?? config?.backup?.dir ?? "";
    const to = args.to ?? config?.backup?.offsite ?? "";
    if (from === "" || to === "") {
      if (args["if-leader"] === true) {
        if (args.json) printJson({ status: "skipped", reason: "[backup] dir or offsite is not set" });
        else process.stdout.write("off-site copy skipped: [backup] dir or offsite is not set\n");
        return;
      }
      throw usageError("pass --from and --to, or set dir and offsite in the [backup] table of the configuration");
    }
    if (args.from === undefined) checkedBackupLocation(from, "dir", configPath);
    if (args.to === undefined) checkedBackupLocation(to, "offsite", configPath);
    if (api !== null && (await skipUnlessLeader(args, api, "off-site"))) return;
    const retainMs = durationArg(args.retain, "retain", config?.backup?.offsiteRetainMs ?? null);
    const source = openDestination(from);
    const newest = await newestFullBackup(source);
    if (newest === null) throw new CliExit(ExitCode.failure, `no svc-backup-<YYYYMMDD>.tar.gz in ${from}\n  → run \`svc admin backup full\` first`);
    const tempDir = fs.mkdtempSync(config === null ? join(tmpdir(), "svc-offsite-") : `${config.dataDir}/.offsite-`);
    try {
      // A local backup is read where it is; one in an object store is fetched first.
      const local = isObjectUrl(from) ? `${tempDir}/${newest}` : resolve(from, newest);
      if (isObjectUrl(from)) await source.get(newest, local);
      const check = await verifyArchive(local);
      if (!check.ok) throw new CliExit(ExitCode.failure, `${newest} does not verify: ${check.problems.join("; ")}\n  → nothing was copied off site; ${damagedBackupWayOut}`);
      const copied = await copyOffsite(local, newest, to, retainMs, Date.now());
      if (args.json) return printJson({ status: "ok", from: newest, to, copied });
      process.stdout.write(`off-site copy of ${newest} in ${to} (${copied.join(", ")})\n`);
    } finally {
      fs.rmSync(tempDir, { recursive: true, force: true });
    }
  },
});

const fetchCommand = defineCommand({
  meta: { name: "fetch", description: "Fetch a full backup (e.g. the off-site latest.tar.gz) from s3:// or a directory and verify it" },
  args: {
    from: { type: "positional", description: "s3://bucket/prefix/latest.tar.gz, or a path", required: true },
    out: { type: "string", description: "Where to write it (default: its name in the current directory)", valueHint: "FILE" },
    json: { type: "boolean", description: "Print one JSON object" },
  },
  async run({ args }) {
    const json = args.json === true;
    checkedLocation(args.from, "the backup to fetch");
    const slash = args.from.lastIndexOf("/");
    const name = args.from.slice(slash + 1);
    if (name === "") throw usageError(`${args.from} names no file`);
    const out = resolve(args.out ?? name);
    const temp = `${out}.partial-${process.pid}`;
    try {
      if (fs.statSync(out, { throwIfNoEntry: false })?.isDirectory() === true) {
        throw usageError(`${out} is a directory\n  → give --out the file to write, e.g. --out ${join(out, name)}`);
      }
      await writingTo(out, () => openDestination(slash < 0 ? "." : args.from.slice(0, slash)).get(name, temp));
      const progress = progressPrinter(json);
      const check = await verifyArchive(temp, (f) => progress(`verifying ${f}`));
      clearProgress(json);
      if (!check.ok) throw new CliExit(ExitCode.failure, `${args.from} does not verify:\n${check.problems.map((p) => `  ${p}`).join("\n")}\n  → nothing was written to ${out}; ${damagedBackupWayOut}`);
      fs.renameSync(temp, out);
      if (json) return printJson({ status: "ok", path: out, files: check.files, bytes: check.bytes, snapshot: check.snapshot });
      process.stdout.write(`fetched ${args.from} to ${out}: verified, snapshot ${check.snapshot?.index} (term ${check.snapshot?.term}); next: tar xzf ${out} -C /var/lib/svc raft store\n`);
    } finally {
      fs.rmSync(temp, { force: true });
    }
  },
});

export const backupCommand = defineCommand({
  meta: { name: "backup", description: "Full and snapshot backups, their verification and the off-site copy (SPEC §4.4)" },
  subCommands: { full: fullCommand, snapshot: snapshotCommand, verify: verifyCommand, offsite: offsiteCommand, fetch: fetchCommand },
});


