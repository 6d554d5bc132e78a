// File systems the kernel makes up (proc, sysfs, devtmpfs, cgroup…) hold no files of their own:
// what is written there is refused, changes a kernel setting, or is gone at the next boot. A
// data directory there can never keep svc's data. Which file system holds a path is asked of the
// path's nearest existing directory, links resolved (the path itself may not exist yet): by its
// statfs magic, and by its mount in /proc/self/mountinfo, which alone tells devtmpfs from tmpfs.

import { readFileSync, statfsSync } from "node:fs";
import { resolve } from "node:path";
import { nearestExisting, resolvedPath } from "./resolved-path.ts";

/** statfs(2) f_type of each such file system (linux/magic.h). */
const pseudoMagics: ReadonlyMap<number, string> = new Map([
  [0x9fa0, "proc"],
  [0x62656572, "sysfs"],
  [0x1cd1, "devpts"],
  [0x27e0eb, "cgroup"],
  [0x63677270, "cgroup2"],
  [0x64626720, "debugfs"],
  [0x74726163, "tracefs"],
  [0x73636673, "securityfs"],
  [0x6165676c, "pstore"],
  [0xcafe4a11, "bpf"],
  [0x62656570, "configfs"],
  [0xde5e81e4, "efivarfs"],
  [0x65735543, "fusectl"],
  [0x42494e4d, "binfmt_misc"],
  [0xf97cff8c, "selinuxfs"],
  [0x6e736673, "nsfs"],
  [0x19800202, "mqueue"],
]);

/** The same file systems by the name mountinfo gives, and devtmpfs (whose magic is tmpfs's). */
const pseudoTypes: ReadonlySet<string> = new Set([...pseudoMagics.values(), "devtmpfs", "rpc_pipefs"]);

export interface PseudoFileSystem {
  /** Its type, as mount(8) names it: "proc", "sysfs", "devtmpfs"… */
  readonly fsType: string;
  /** Where it is mounted ("/proc"), when /proc/self/mountinfo says. */
  readonly mountPoint: string | null;
}

/**
 * The made-up file system `path` lies on, or null when it lies on another one, or when that
 * cannot be told (nothing along the path can be looked at: the caller's own checks say why).
 */
export function pseudoFileSystemOf(path: string, mountinfo = readMountinfo()): PseudoFileSystem | null {
  // The part that does not exist yet is on the file system of the part that does.
  const existing = nearestExisting(resolve(path));
  if (existing === null) return null;
  const real = resolvedPath(existing);
  const mount = mountinfo === null ? null : mountOf(real, mountinfo);
  if (mount !== null && pseudoTypes.has(mount.fsType)) return mount;
  let magic: number | null = null;
  try {
    magic = Number(statfsSync(real).type) >>> 0;
  } catch {
    return null;
  }
  const fsType = pseudoMagics.get(magic);
  return fsType === undefined ? null : { fsType, mountPoint: mount?.mountPoint ?? null };
}

/** What a path on such a file system is, for the messages that refuse one as a data directory. */
export function pseudoFileSystemProblem(path: string, pseudo: PseudoFileSystem): string {
  const where = pseudo.mountPoint === null ? pseudo.fsType : `${pseudo.fsType} (mounted at ${pseudo.mountPoint})`;
  return `${JSON.stringify(path)} is on ${where}, a file system the kernel makes up: it holds no files, and what svc wrote there would be refused, or gone at the next boot`;
}

function readMountinfo(): string | null {
  try {
    return readFileSync("/proc/self/mountinfo", "utf8");
  } catch {
    return null;
  }
}

/**
 * The mount holding `path` (resolved, no links): the one with the longest mount point that
 * contains it, the later line of two at one point (mounted over the earlier one).
 */
function mountOf(path: string, mountinfo: string): PseudoFileSystem | null {
  let best: PseudoFileSystem | null = null;
  let bestPoint = "";
  for (const line of mountinfo.split("\n")) {
    // "36 35 98:0 /root /mnt rw,noatime master:1 - ext3 /dev/root rw": fields, " - ", type.
    const fields = line.split(" ");
    const dash = fields.indexOf("-", 6);
    const rawPoint = fields[4];
    const fsType = fields[dash + 1];
    if (dash === -1 || rawPoint === undefined || fsType === undefined) continue;
    // Spaces and the like in a mount point are written as octal escapes: \040.
    const point = rawPoint.replace(/\\([0-7]{3})/g, (_m, o: string) => String.fromCharCode(parseInt(o, 8)));
    const inside = point === "/" || path === point || path.startsWith(`${point}/`);
    if (inside && point.length >= bestPoint.length) {
      best = { fsType, mountPoint: point };
      bestPoint = point;
    }
  }
  return best;
}
