// `svc --config F --validate`: every problem with its line (this node's own member entry against
// its [listen] ports too, which serve does not refuse; a mismatch NAT or a port mapping may
// explain is a warning, and so is a [backup] location the backups would refuse), exit 2; or a
// one-line summary, exit 0,
// after a loud warning on stderr for each listener other machines reach without TLS or tokens,
// one when max_memory_mb is below what the node needs (memory-budget.ts), and one for a
// certificate that expires soon (_cert-dates.ts).

import { configWarnings, formatProblems, loadConfigFile, securityWarnings, summarizeConfig } from "../config/index.ts";
import { TokenSet, loadTlsMaterial } from "../http/index.ts";
import { PeerSecrets, memoryFloorWarning } from "../node/index.ts";
import { SvcError, silentLogger } from "../util/index.ts";
import { certificateDateFindings } from "./_cert-dates.ts";
import { CliExit, ExitCode, usageError } from "./_exit.ts";

export async function validateCommandRun(path: string | undefined): Promise<void> {
  if (path === undefined || path === "") throw usageError("--validate needs --config FILE");
  const loaded = loadConfigFile(path);
  // The node would start with its own entry naming ports it does not listen on, but the others
  // could not reach it: a problem to fix before it is started (see config/_self-entry.ts).
  const selfEntry = loaded.ok ? (loaded.selfEntryProblems ?? []) : [];
  const result = selfEntry.length > 0 ? { ok: false as const, problems: selfEntry } : loaded;
  if (!result.ok) {
    process.stderr.write(`${formatProblems(result.problems, path)}\n`);
    throw new CliExit(ExitCode.usage, `${path}: ${result.problems.length} problem${result.problems.length === 1 ? "" : "s"}`);
  }
  // The tokens file is part of what the node needs to start: one it would refuse fails here too.
  const tokensFile = result.config.auth?.tokensFile;
  if (tokensFile !== undefined) {
    try {
      TokenSet.read(tokensFile);
    } catch (e) {
      if (!(e instanceof SvcError)) throw e;
      process.stderr.write(`${path}: [auth] tokens_file: ${e.describe()}\n`);
      throw new CliExit(ExitCode.usage, `${path}: 1 problem`);
    }
  }
  // So are the TLS files, read and checked together as the node reads them at start: a key
  // that is not the certificate's, a peer certificate its members would refuse, a gossip key
  // file that cannot be read.
  try {
    if (result.config.tls != null) loadTlsMaterial(result.config.tls);
    PeerSecrets.load(result.config, silentLogger);
  } catch (e) {
    if (!(e instanceof SvcError)) throw e;
    process.stderr.write(`${path}: ${e.describe()}\n`);
    throw new CliExit(ExitCode.usage, `${path}: 1 problem`);
  }
  // Certificates outside their validity: the node would start, and every client and peer refuse it.
  const certDates = result.config.tls == null ? { problems: [], warnings: [] } : certificateDateFindings(result.config.tls, Date.now());
  if (certDates.problems.length > 0) {
    for (const problem of certDates.problems) process.stderr.write(`${path}: ${problem}\n`);
    throw new CliExit(ExitCode.usage, `${path}: ${certDates.problems.length} problem${certDates.problems.length === 1 ? "" : "s"}`);
  }
  // What may be right behind NAT or a port mapping, and [backup] locations the node never reads
  // (the backup commands refuse them): said, not refused.
  const fileWarnings = loaded.ok ? configWarnings(loaded) : [];
  if (fileWarnings.length > 0) process.stderr.write(`${formatProblems(fileWarnings.map((w) => ({ ...w, keyPath: `WARNING: ${w.keyPath}` })), path)}\n`);
  for (const warning of securityWarnings(result.config)) process.stderr.write(`${path}: WARNING: UNPROTECTED LISTENER: ${warning}\n`);
  const memoryWarning = memoryFloorWarning(result.config.maxMemoryBytes);
  if (memoryWarning !== null) process.stderr.write(`${path}: WARNING: MEMORY: ${memoryWarning}\n`);
  for (const warning of certDates.warnings) process.stderr.write(`${path}: WARNING: CERTIFICATE: ${warning}\n`);
  process.stdout.write(`${path}: ok: ${summarizeConfig(result.config)}\n`);
}
