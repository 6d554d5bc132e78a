// The transport module's error codes: bad options and addresses (found at start), a port it
// cannot listen on, and frames a peer sent that cannot be read (the connection is dropped).

import type { FrameError } from "./_frame.ts";

export type TransportErrorCode =
  | "TRANSPORT_BAD_OPTION"
  | "TRANSPORT_BAD_ADDRESS"
  | "TRANSPORT_LISTEN_FAILED"
  | FrameError["code"];
