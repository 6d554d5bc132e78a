// What `svc serve` does about [tls] and [auth] before it binds: read the certificates and
// tokens (a file that cannot be used stops it there, exit 1), warn loudly about listeners that
// other machines reach unprotected, and reload everything on SIGHUP.

import { securityWarnings, type Config } from "../config/index.ts";
import { HttpSecurity } from "../http/index.ts";
import { SvcError, type Logger } from "../util/index.ts";
import { CliExit, serveExitCode } from "./_exit.ts";

export function startSecurity(config: Config, log: Logger): HttpSecurity {
  for (const warning of securityWarnings(config)) log.warn(`UNPROTECTED LISTENER: ${warning}`);
  let security: HttpSecurity;
  try {
    security = HttpSecurity.load(config, log);
  } catch (e) {
    throw e instanceof SvcError ? new CliExit(serveExitCode(e), e.describe()) : e;
  }
  process.on("SIGHUP", () => security.reload("SIGHUP"));
  return security;
}
