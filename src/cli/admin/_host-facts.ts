// What the support bundle says about the machine: kernel, cores, memory, the filesystem and
// mount options of the data directory (from /proc/mounts), and the disk usage of the data
// directory per subdirectory. Anything that cannot be read is recorded as such.

import { existsSync, lstatSync, readdirSync, readFileSync, realpathSync, statfsSync } from "node:fs";
import { arch, cpus, freemem, hostname, loadavg, release, totalmem, uptime, version } from "node:os";
import { join, relative } from "node:path";

export interface MountFacts {
  device: string;
  mountPoint: string;
  fsType: string;
  options: string;
}

export function hostFacts(dataDir: string | null): Record<string, unknown> {
  const meminfo = readOr("/proc/meminfo", "");
  const memKb = (name: string): number | null => {
    const m = new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(meminfo);
    return m?.[1] === undefined ? null : Number(m[1]);
  };
  return {
    hostname: hostname(),
    kernel: { release: release(), version: version(), arch: arch() },
    cores: cpus().length,
    cpu_model: cpus()[0]?.model ?? null,
    memory: {
      total_bytes: totalmem(),
      free_bytes: freemem(),
      available_bytes: (memKb("MemAvailable") ?? 0) * 1024,
      swap_total_bytes: (memKb("SwapTotal") ?? 0) * 1024,
    },
    load_average: loadavg(),
    uptime_s: Math.round(uptime()),
    os_release: readOr("/etc/os-release", "").split("\n").find((l) => l.startsWith("PRETTY_NAME="))?.slice("PRETTY_NAME=".length).replace(/"/g, "") ?? null,
    data_dir: dataDir === null ? null : dataDirFacts(dataDir),
  };
}

function dataDirFacts(dataDir: string): Record<string, unknown> {
  if (!existsSync(dataDir)) return { path: dataDir, exists: false };
  let real = dataDir;
  try {
    real = realpathSync(dataDir);
  } catch {
    // Keep the path as given.
  }
  const facts: Record<string, unknown> = { path: dataDir, real_path: real, exists: true, mount: mountOf(real) };
  try {
    const st = statfsSync(real);
    facts["filesystem_size_bytes"] = st.blocks * st.bsize;
    facts["filesystem_free_bytes"] = st.bavail * st.bsize;
    facts["inodes_free"] = st.ffree;
  } catch (e) {
    facts["statfs_error"] = e instanceof Error ? e.message : String(e);
  }
  return facts;
}

/** The /proc/mounts entry with the longest mount point that contains `path`. */
export function mountOf(path: string, mounts = readOr("/proc/mounts", "")): MountFacts | null {
  let best: MountFacts | null = null;
  for (const line of mounts.split("\n")) {
    const [device, rawPoint, fsType, options] = line.split(" ");
    if (device === undefined || rawPoint === undefined || fsType === undefined || options === undefined) continue;
    // /proc/mounts escapes spaces and the like as octal: \040.
    const mountPoint = rawPoint.replace(/\\([0-7]{3})/g, (_m, o: string) => String.fromCharCode(parseInt(o, 8)));
    const inside = mountPoint === "/" || path === mountPoint || path.startsWith(`${mountPoint}/`);
    if (inside && (best === null || mountPoint.length >= best.mountPoint.length)) best = { device, mountPoint, fsType, options };
  }
  return best;
}

export interface DiskUsage {
  path: string;
  bytes: number;
  files: number;
}

/**
 * Bytes and files under the data directory and under each of its subdirectories (two levels).
 * Links are not followed nor counted: <data_dir>/wal and snapshots lead into raft/, counted there.
 */
export function diskUsage(dataDir: string): { total: DiskUsage; dirs: DiskUsage[]; error?: string } {
  const dirs: DiskUsage[] = [];
  const walk = (dir: string, depth: number): DiskUsage => {
    const usage: DiskUsage = { path: relative(dataDir, dir) || ".", bytes: 0, files: 0 };
    let names: string[] = [];
    try {
      names = readdirSync(dir);
    } catch {
      return usage;
    }
    for (const name of names) {
      const p = join(dir, name);
      const st = lstatSync(p, { throwIfNoEntry: false });
      if (st === undefined || st.isSymbolicLink()) continue;
      if (st.isDirectory()) {
        const sub = walk(p, depth + 1);
        usage.bytes += sub.bytes;
        usage.files += sub.files;
        if (depth < 2) dirs.push(sub);
      } else {
        // Allocated blocks, not the apparent size: WAL segments are preallocated.
        usage.bytes += st.blocks * 512;
        usage.files++;
      }
    }
    return usage;
  };
  if (!existsSync(dataDir)) return { total: { path: ".", bytes: 0, files: 0 }, dirs, error: `${dataDir} does not exist` };
  const total = walk(dataDir, 0);
  dirs.sort((a, b) => a.path.localeCompare(b.path));
  return { total, dirs };
}

function readOr(path: string, fallback: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return fallback;
  }
}
