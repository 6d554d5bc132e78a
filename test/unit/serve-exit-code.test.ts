// What `svc serve` exits with when the node stops on an error: 3 when only the operator can
// help (the unit install.sh writes does not restart it), 1 when a restart may (it does).

import { describe, expect, test } from "bun:test";
import { ExitCode, serveExitCode } from "../../src/cli/_exit.ts";
import { SvcError } from "../../src/util/index.ts";

const exitOf = (code: string): number => serveExitCode(new SvcError(code as never, "x"));

describe("svc serve's exit code", () => {
  test("data to repair, or a directory svc may not use: exit 3, not restarted", () => {
    for (const code of ["LOG_GAP", "HISTORY_DIVERGED", "RAFT_STATE_INVALID", "HARDSTATE_CORRUPT", "WAL_CORRUPT", "RESTORE_REFUSED", "STORE_UNRECOVERABLE", "DATA_GONE", "DATA_DIR_NOT_WRITABLE", "DATA_DIR_WRONG_OWNER", "DATA_DIR_INVALID", "PORT_NOT_PERMITTED"]) {
      expect({ code, exit: exitOf(code) }).toEqual({ code, exit: ExitCode.needsOperator });
    }
  });

  test("what may pass: a failing or full disk, a port or lock still held, TLS, token and key files another unit may still be writing: exit 1, restarted", () => {
    for (const code of ["STORAGE_FAILED", "DISK_FULL", "DATA_DIR_LOCKED", "PORT_IN_USE", "ADDRESS_NOT_LOCAL", "TRANSPORT_LISTEN_FAILED", "TLS_INVALID", "PEER_TLS_INVALID", "TOKENS_FILE_INVALID", "GOSSIP_KEY_INVALID", "STORE_DAMAGED"]) {
      expect({ code, exit: exitOf(code) }).toEqual({ code, exit: ExitCode.failure });
    }
  });
});
