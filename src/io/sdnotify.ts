// sd_notify(3) for a node run by systemd with Type=notify: "READY=1" once the node serves,
// "STOPPING=1" on shutdown. Bun's sockets cannot send to NOTIFY_SOCKET (a unix datagram socket),
// so this calls libsystemd through bun:ffi. Outside systemd it is a no-op returning false.

import { dlopen, FFIType } from "bun:ffi";

type SdNotifyFn = (unsetEnvironment: number, state: Buffer) => number;

// undefined: not tried yet; null: libsystemd is missing, so every call is a no-op.
let sdNotifyFn: SdNotifyFn | null | undefined;

function loadSdNotify(): SdNotifyFn | null {
  try {
    const lib = dlopen("libsystemd.so.0", {
      sd_notify: { args: [FFIType.i32, FFIType.cstring], returns: FFIType.i32 },
    });
    return (unsetEnvironment, state) => lib.symbols.sd_notify(unsetEnvironment, state);
  } catch {
    return null;
  }
}

/**
 * Send a state line to the service manager. True when it was delivered; false when not run by a
 * service manager (NOTIFY_SOCKET unset), when libsystemd.so.0 is missing, or when sending failed.
 */
export function sdNotify(state: string): boolean {
  // The library reads NOTIFY_SOCKET itself; checking it first avoids loading it for nothing.
  if (process.env.NOTIFY_SOCKET === undefined || process.env.NOTIFY_SOCKET === "") return false;
  if (sdNotifyFn === undefined) sdNotifyFn = loadSdNotify();
  if (sdNotifyFn === null) return false;
  // A NUL-terminated copy: the C side reads up to the terminator.
  return sdNotifyFn(0, Buffer.from(`${state}\0`, "utf8")) > 0;
}
