// Runs a command as if a staging root had been installed on this host, without touching the
// host: in a private mount namespace (unshare, as root), the root's /etc is laid over the host's
// (overlayfs) and its /usr/local/bin, /var/lib and /var/backups are bound over the host's. So
// the exact command lines of the units (/usr/local/bin/svc … --config /etc/svc/config.toml) run
// unchanged, and setpriv drops to the uid and gid that the root's passwd gives svc.
// With a private network, the command gets its own loopback, so fixed ports cannot collide.

const SCRIPT = `
set -eu
root=$1; shift
if [ "$PRIVATE_NET" = 1 ]; then ip link set lo up; fi
mount -t overlay overlay -o "lowerdir=$root/etc:/etc" /etc
mount --bind "$root/usr/local/bin" /usr/local/bin
mount --bind "$root/var/lib" /var/lib
if [ -d "$root/var/backups" ] && [ -d /var/backups ]; then mount --bind "$root/var/backups" /var/backups; fi
exec "$@"
`;

export function hostViewArgv(
  root: string,
  argv: readonly string[],
  options: { user?: { uid: number; gid: number }; privateNetwork?: boolean } = {},
): string[] {
  const { user, privateNetwork = false } = options;
  const drop = user === undefined ? [] : ["setpriv", `--reuid=${user.uid}`, `--regid=${user.gid}`, "--clear-groups", "--"];
  const net = privateNetwork ? ["--net"] : [];
  return [
    "unshare", "--mount", ...net, "--propagation", "private",
    "env", `PRIVATE_NET=${privateNetwork ? 1 : 0}`, "sh", "-c", SCRIPT, "sh", root, ...drop, ...argv,
  ];
}
