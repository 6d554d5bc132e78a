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

const HOST_SCRIPT = `
set -eu
scratch=$1; shift
mkdir -p "$scratch/etc-upper" "$scratch/etc-work" "$scratch/usr-local-bin" "$scratch/var-lib" "$scratch/var-backups"
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$scratch/etc-upper,workdir=$scratch/etc-work" /etc
mount --bind "$scratch/usr-local-bin" /usr/local/bin
mount --bind "$scratch/var-lib" /var/lib
mkdir -p /var/backups
mount --bind "$scratch/var-backups" /var/backups
if [ "$FAKE_SYSTEMD" = 1 ]; then
  mount -t tmpfs tmpfs /run
  mkdir -p /run/systemd/system
fi
exec "$@"
`;

/**
 * Runs a command that changes this host's own places (/etc, /usr/local/bin, /var/lib,
 * /var/backups), with every change caught in `scratch` instead: /etc becomes an overlay whose
 * upper layer is scratch/etc-upper (useradd's changes land there), the others are bound to
 * empty directories under scratch. With fakeSystemd, /run/systemd/system exists, so install.sh
 * believes systemd runs; put a stand-in systemctl first in PATH.
 */
export function hostOverlayArgv(scratch: string, argv: readonly string[], options: { fakeSystemd?: boolean } = {}): string[] {
  return [
    "unshare", "--mount", "--propagation", "private",
    "env", `FAKE_SYSTEMD=${options.fakeSystemd === true ? 1 : 0}`, "sh", "-c", HOST_SCRIPT, "sh", scratch, ...argv,
  ];
}
