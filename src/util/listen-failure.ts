// Why a port could not be bound, in words an operator can act on, from the errno the failed
// listen carries (node:http's servers, Bun's sockets and its UDP sockets all give `code`).

import { errorMessage } from "./errors.ts";
import { processUserText } from "./user.ts";

/** The codes of a port that cannot be bound, whichever port (client, admin, peer, gossip). */
export type ListenErrorCode =
  /** Another process holds it. */
  | "PORT_IN_USE"
  /** This user may not bind it (below 1024 without CAP_NET_BIND_SERVICE, a security policy). */
  | "PORT_NOT_PERMITTED"
  /** The listen address is not one of this host's. */
  | "ADDRESS_NOT_LOCAL";

export interface ListenFailure {
  /** The cause's code, or null: another cause (its errno in `reason`). */
  readonly code: ListenErrorCode | null;
  readonly reason: string;
  readonly hint: string;
}

/**
 * `setting` names the configuration key (`listen.peer`), `udp` whether the socket was a UDP one
 * (the `ss` command that names the holder differs).
 */
export function listenFailure(e: unknown, at: { host: string; port: number; setting: string; udp?: boolean }): ListenFailure {
  const errno = typeof e === "object" && e !== null && "code" in e ? String((e as { code: unknown }).code) : "";
  const { port, setting } = at;
  switch (errno) {
    case "EADDRINUSE":
      return {
        code: "PORT_IN_USE",
        reason: "the address is already in use",
        hint: `stop the process using it (\`ss -${at.udp === true ? "u" : "t"}lpn 'sport = :${port}'\` names it) or set ${setting} to another port`,
      };
    case "EACCES":
    case "EPERM":
      return {
        code: "PORT_NOT_PERMITTED",
        reason: `this user (${processUserText()}) may not bind port ${port}`,
        hint: port < 1024
          ? `ports below 1024 need root or CAP_NET_BIND_SERVICE (AmbientCapabilities=CAP_NET_BIND_SERVICE in the unit); or set ${setting} to a port from 1024 up`
          : `a security policy (SELinux, AppArmor, a seccomp filter) refuses it: allow it, or set ${setting} to a port it allows`,
      };
    case "EADDRNOTAVAIL":
      return {
        code: "ADDRESS_NOT_LOCAL",
        reason: `${at.host} is not an address of this host`,
        hint: `set ${setting} to one of this host's addresses (\`ip -brief address\` lists them), or 0.0.0.0 for all of them`,
      };
    default:
      return { code: null, reason: errorMessage(e), hint: `check ${setting} in the configuration` };
  }
}
