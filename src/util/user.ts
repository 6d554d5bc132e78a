// The user and group this process runs as, by name where the system's databases name them:
// hints say `chown -R svc:svc …` for the user svc actually runs as, not the one install.sh makes.

import { readFileSync } from "node:fs";

/** The fields of each line of /etc/passwd or /etc/group (name:password:id:…); none when it cannot be read. */
function entriesOf(database: "/etc/passwd" | "/etc/group"): string[][] {
  try {
    return readFileSync(database, "utf8").split("\n").map((line) => line.split(":"));
  } catch {
    return [];
  }
}

/** The name of `id` in /etc/passwd or /etc/group (os.userInfo() says "unknown" without USER set). */
function nameOf(database: "/etc/passwd" | "/etc/group", id: number): string | null {
  const name = entriesOf(database).find((fields) => fields[2] === String(id))?.[0];
  return name === undefined || name === "" ? null : name;
}

/** The id of group `name` in /etc/group, or null when it names none (or gives it no number). */
function groupIdOf(name: string): number | null {
  const id = entriesOf("/etc/group").find((fields) => fields[0] === name)?.[2];
  return id === undefined || !/^\d+$/.test(id) ? null : Number(id);
}

/** The user and the group install.sh makes and runs the service as (SPEC §2.1: user and group svc). */
export const SERVICE_USER = "svc";
export const SERVICE_GROUP = "svc";

/** The id of the service's group on this host, or null when there is none. */
export function serviceGroupId(): number | null {
  return groupIdOf(SERVICE_GROUP);
}

/** The name of group `gid`, or "gid N" when the group database does not name it. */
export function groupNameOf(gid: number): string {
  return nameOf("/etc/group", gid) ?? `gid ${gid}`;
}

/** Whether this process has group `gid`, as its own or a supplementary one. */
export function processHasGroup(gid: number): boolean {
  return process.getegid?.() === gid || (process.getgroups?.() ?? []).includes(gid);
}

/** The name of this process's user ("uid N" when unnamed). */
export function processUserName(): string {
  return userNameOf(process.getuid?.() ?? -1);
}

/** The name of user `uid`, or "uid N" when the password database does not name it. */
export function userNameOf(uid: number): string {
  return nameOf("/etc/passwd", uid) ?? `uid ${uid}`;
}

/** "nobody, uid 65534"; the uid alone when no name is found. */
export function processUserText(): string {
  const uid = process.getuid?.() ?? -1;
  const name = nameOf("/etc/passwd", uid);
  return name === null ? `uid ${uid}` : `${name}, uid ${uid}`;
}

/** What `chown` takes for this process's user and group: "svc:svc", or numbers where unnamed. */
export function processOwnerSpec(): string {
  const uid = process.getuid?.() ?? -1;
  const gid = process.getgid?.() ?? -1;
  return `${nameOf("/etc/passwd", uid) ?? uid}:${nameOf("/etc/group", gid) ?? gid}`;
}
