// Binding the client and admin ports. A port that is taken is reported with the address
// and what to do, before the node has touched any data.

import type { Address } from "../config/index.ts";
import { SvcError, errorMessage } from "../util/errors.ts";
import { requestBodyBytesMax } from "./body.ts";

interface FetchApp {
  fetch: (request: Request) => Response | Promise<Response>;
}

export type BoundServer = ReturnType<typeof Bun.serve>;

export function listen(app: FetchApp, address: Address, role: "client" | "admin"): BoundServer {
  try {
    return Bun.serve({
      hostname: address.host,
      port: address.port,
      reusePort: false,
      // Bun would answer bodies past this itself, without JSON; svc's own bounded read
      // (body.ts) refuses anything over requestBodyBytesMax first, so this is only a backstop.
      maxRequestBodySize: 1024 * requestBodyBytesMax,
      idleTimeout: 120,
      fetch: app.fetch,
    });
  } catch (e) {
    const inUse = e instanceof Error && "code" in e && e.code === "EADDRINUSE";
    throw new SvcError(inUse ? "PORT_IN_USE" : "LISTEN_FAILED", `cannot listen on ${address.raw} (${role} port): ${inUse ? "the address is already in use" : errorMessage(e)}`, {
      hint: inUse
        ? `stop the process using it (\`ss -ltnp 'sport = :${address.port}'\` shows which) or set listen.${role} to another port`
        : `check listen.${role} in the configuration`,
    });
  }
}
