// `svc serve [--config F]`: run a node. The ports are bound first (answering 503 while the
// node starts), then the data directory is locked and recovered; a port in use, a data
// directory that is not writable or already locked all stop it before any data is read.

import { defineCommand } from "citty";
import { createLogger } from "../log/index.ts";
import { InFlightBytes, adminApp, clientApp, listen, startingResponse, type BoundServer } from "../http/index.ts";
import { PeerSecrets, SvcNode, memoryBudget, memoryFloorWarning } from "../node/index.ts";
import { sdNotify } from "../io/index.ts";
import { summarizeConfig } from "../config/index.ts";
import { SvcError, errorMessage } from "../util/index.ts";
import { version, versionLine } from "../version.ts";
import { loadConfigWithWarningsOrExit } from "./_config.ts";
import { CliExit, ExitCode, serveExitCode } from "./_exit.ts";
import { startSecurity } from "./_security.ts";

export const serveCommand = defineCommand({
  meta: { name: "serve", description: "Run a node (with no --config: one node on loopback, data in ./svc-data)" },
  args: {
    config: { type: "string", description: "Configuration file (TOML)", valueHint: "FILE" },
  },
  async run({ args }) {
    // A certificate, key, tokens or gossip key file another unit or a rotation may still be
    // writing is not a wrong configuration: exit 1, restarted, as when its content is bad.
    const { config, warnings: configWarnings } = loadConfigWithWarningsOrExit(args.config, undefined, { secretsFilesExit: ExitCode.failure });
    const logger = createLogger();
    const log = logger.child("node");
    log.info(`${versionLine} starting`, { config: args.config ?? "(embedded default)", summary: summarizeConfig(config) });
    // What --validate prints as warnings: the node starts with them, and a [backup] location
    // the backups refuse would otherwise first be heard of when a backup exits 2.
    for (const warning of configWarnings) log.warn(warning);
    const memoryWarning = memoryFloorWarning(config.maxMemoryBytes);
    if (memoryWarning !== null) log.warn(memoryWarning);
    const budget = memoryBudget(config.maxMemoryBytes);
    // Client requests' bodies in flight: writes held while they commit, and those relayed to the leader.
    const inFlight = new InFlightBytes({
      paths: ["/v1/execute"],
      readPaths: ["/v1/query"],
      readBytesMax: budget.readBodiesBytesMax,
      bytesMax: budget.inFlightBytesMax,
      rssBytesMax: budget.nodeBytesMax,
      maxMemoryMb: config.maxMemoryBytes / 2 ** 20,
      collectEveryBytes: budget.inFlightBytesMax,
    });

    const security = startSecurity(config, log);
    let node: SvcNode | null = null;
    let clientFetch: (r: Request) => Response | Promise<Response> = startingResponse;
    let adminFetch: (r: Request) => Response | Promise<Response> = startingResponse;
    const servers: BoundServer[] = [];
    // Until the node is up, a stop request simply ends the process: nothing is half-written
    // that recovery would not redo on the next start.
    const earlyStop = (signal: string) => () => {
      log.info(`shutting down during start-up (${signal})`);
      process.exit(ExitCode.ok);
    };
    const earlyTerm = earlyStop("SIGTERM");
    const earlyInt = earlyStop("SIGINT");
    process.on("SIGTERM", earlyTerm);
    process.on("SIGINT", earlyInt);
    try {
      const clusterId = (): string => node?.clusterId ?? "";
      servers.push(await listen(security.guard({ fetch: (r) => clientFetch(r) }, "client"), config.listen.client, "client", security.serverTls, security.limiter(clusterId), inFlight));
      servers.push(await listen(security.guard({ fetch: (r) => adminFetch(r) }, "admin"), config.listen.admin, "admin", security.serverTls, security.limiter(clusterId)));
      // The peer port's certificates and the gossip keys reload with the client and admin ports'.
      const peerSecrets = PeerSecrets.load(config, log);
      security.watch(peerSecrets);
      security.serve(servers);
      node = await SvcNode.start(config, logger, { version, peerSecrets, registerMetrics: (registry) => inFlight.registerMetrics(registry) });
    } catch (e) {
      for (const s of servers) s.stop();
      throw e instanceof SvcError ? new CliExit(serveExitCode(e), e.describe()) : e;
    }
    const running = node;
    clientFetch = clientApp(running).fetch;
    adminFetch = adminApp(running).fetch;
    log.info("serving", { client: config.listen.client.raw, admin: config.listen.admin.raw, dataDir: config.dataDir });

    let stopping = false;
    const shutdown = async (code: number, why: string): Promise<void> => {
      if (stopping) return;
      stopping = true;
      log.info(`shutting down (${why})`);
      sdNotify("STOPPING=1");
      for (const s of servers) s.stop();
      try {
        await running.stop();
      } catch (e) {
        log.error("error while stopping", { error: errorMessage(e) });
        code = ExitCode.failure;
      }
      process.exit(code);
    };
    running.onFatal = (e) => void shutdown(serveExitCode(e), "fatal error");
    process.off("SIGTERM", earlyTerm);
    process.off("SIGINT", earlyInt);
    process.on("SIGTERM", () => void shutdown(ExitCode.ok, "SIGTERM"));
    process.on("SIGINT", () => void shutdown(ExitCode.ok, "SIGINT"));
    await waitUntilServing(running);
    sdNotify("READY=1");
    await new Promise<never>(() => {});
  },
});

/** Resolves once the node has finished recovery (systemd's READY=1 waits for this). */
async function waitUntilServing(node: SvcNode): Promise<void> {
  while (node.recoveryState !== "healthy" && node.fatal === null) await Bun.sleep(20);
}
