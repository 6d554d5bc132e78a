#!/bin/sh
# install.sh: put svc on this host, the way etcd or Consul are installed: the binary in
# /usr/local/bin (and the svc-admin link), a system user and group svc, the data directory, a
# generated /etc/svc/config.toml (never overwritten), a hardened systemd unit, and the timers of
# the cleanup jobs. Running it again changes nothing; --uninstall takes it away again.
#
# With --root DIR everything is written under DIR instead of / (for packages, images and tests).
# The user is then created in DIR/etc/passwd, DIR/etc/group (and shadow files) when DIR/etc/passwd
# exists, and files are owned by the ids that DIR's files give svc. When DIR has no etc/passwd (a
# package's staging tree), the user and the ownership are left to the package's post-install
# step, which can run this script on the host, and nothing is enabled or started. Either way a
# sysusers.d entry declares the user and a tmpfiles.d entry the directories, which
# systemd-sysusers and systemd-tmpfiles (run by a package's scripts, or at boot) apply.
#
# POSIX sh: it must run under dash, busybox sh and bash alike.

set -eu
umask 022

PROG=install.sh
BIN_PATH=/usr/local/bin/svc
ADMIN_LINK=/usr/local/bin/svc-admin
DATA_DIR=/var/lib/svc
CONFIG_DIR=/etc/svc
CONFIG_PATH=/etc/svc/config.toml
TLS_DIR=/etc/svc/tls
TOKENS_PATH=/etc/svc/tokens
ADMIN_TOKEN_PATH=/etc/svc/admin-token
UNIT_DIR=/etc/systemd/system
SERVICE=svc.service
SYSUSERS_PATH=/usr/lib/sysusers.d/svc.conf
TMPFILES_PATH=/usr/lib/tmpfiles.d/svc.conf
TIMERS="svc-cleanup-snapshots.timer svc-cleanup-wal-archive.timer svc-backup-full.timer svc-backup-offsite.timer"
UNITS="svc.service svc-cleanup-snapshots.service svc-cleanup-snapshots.timer svc-cleanup-wal-archive.service svc-cleanup-wal-archive.timer svc-backup-full.service svc-backup-full.timer svc-backup-offsite.service svc-backup-offsite.timer"
SVC_USER=svc
SVC_GROUP=svc

usage() {
	cat <<EOF
usage: $PROG [options]

Installs svc: $BIN_PATH and $ADMIN_LINK, the system user and group $SVC_USER,
$DATA_DIR (0750, $SVC_USER:$SVC_GROUP), $CONFIG_PATH (generated once, never overwritten),
the systemd unit $SERVICE and the timers $TIMERS, and the user and directories
declared for systemd-sysusers and systemd-tmpfiles in $SYSUSERS_PATH and $TMPFILES_PATH.

options:
  --binary PATH           the svc binary to install (default: ./svc or ./dist/svc beside this script)
  --root DIR              install under DIR instead of / (packaging, images, tests); implies --no-start
  --node-id ID            node_id for a generated config (default: this host's short name)
  --wal-archive-dir DIR   where archived WAL segments are kept and cleaned weekly (default: /var/backups/svc/wal);
                          an object-store location s3://bucket/prefix is cleaned there (credentials in
                          /etc/svc/backup.env) and no local directory is made
  --listen HOST           the address a generated config binds its client, admin and peer ports to
                          (default: 127.0.0.1, this machine only; other machines need [tls] and [auth]
                          before the ports are opened to them: svc --validate warns until they are)
  --generate-certs        make (once, never overwritten) a cluster CA, this node's certificate, a gossip
                          key and an admin token under $TLS_DIR and $CONFIG_DIR (files 0600
                          $SVC_USER:$SVC_GROUP), and put [tls] (every port, mutual TLS between peers),
                          [auth] and [gossip] in a generated config. For a cluster, copy ca.crt, ca.key
                          and gossip.key from the first node's $TLS_DIR to the others' before running
                          it there: an existing CA and gossip key are reused
  --no-start              enable the units but do not start them
  --uninstall             remove what install.sh installed; keep data, config and the user
  --purge                 with --uninstall: also remove $DATA_DIR, $CONFIG_DIR and the user and group
  -h, --help              show this help
EOF
}

die() {
	printf '%s: %s\n' "$PROG" "$*" >&2
	exit 1
}

usage_error() {
	printf '%s: %s\n' "$PROG" "$*" >&2
	printf 'try: %s --help\n' "$PROG" >&2
	exit 2
}

# Every change is printed and counted, so that a second run can say it changed nothing.
CHANGES=0
changed() {
	CHANGES=$((CHANGES + 1))
	printf '  %s\n' "$*"
}

info() {
	printf '  %s\n' "$*"
}

# ---------------------------------------------------------------------------------------------
# Arguments

ROOT=
BINARY=
NODE_ID=
WAL_ARCHIVE_DIR=/var/backups/svc/wal
LISTEN_HOST=127.0.0.1
GENERATE_CERTS=0
NO_START=0
UNITS_CHANGED=0
RESTART_NEEDED=0
UNINSTALL=0
PURGE=0

need_value() {
	if [ $# -lt 2 ] || [ -z "$2" ]; then usage_error "$1 needs a value"; fi
}

while [ $# -gt 0 ]; do
	case $1 in
	--root) need_value "$@"; ROOT=$2; shift 2 ;;
	--root=*) ROOT=${1#*=}; shift ;;
	--binary) need_value "$@"; BINARY=$2; shift 2 ;;
	--binary=*) BINARY=${1#*=}; shift ;;
	--node-id) need_value "$@"; NODE_ID=$2; shift 2 ;;
	--node-id=*) NODE_ID=${1#*=}; shift ;;
	--wal-archive-dir) need_value "$@"; WAL_ARCHIVE_DIR=$2; shift 2 ;;
	--wal-archive-dir=*) WAL_ARCHIVE_DIR=${1#*=}; shift ;;
	--listen) need_value "$@"; LISTEN_HOST=$2; shift 2 ;;
	--listen=*) LISTEN_HOST=${1#*=}; shift ;;
	--generate-certs) GENERATE_CERTS=1; shift ;;
	--no-start) NO_START=1; shift ;;
	--uninstall) UNINSTALL=1; shift ;;
	--purge) PURGE=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage_error "unknown option: $1" ;;
	esac
done

[ "$PURGE" = 0 ] || [ "$UNINSTALL" = 1 ] || usage_error "--purge goes with --uninstall"
case $WAL_ARCHIVE_DIR in
/*) WAL_ARCHIVE_LOCAL=1 ;;
s3://?*) WAL_ARCHIVE_LOCAL=0 ;;
*) usage_error "--wal-archive-dir must be an absolute path on the host or s3://bucket/prefix, got: $WAL_ARCHIVE_DIR" ;;
esac
case $WAL_ARCHIVE_DIR in
s3://*[!A-Za-z0-9_./-]* | /*[!A-Za-z0-9_./-]*) usage_error "--wal-archive-dir may hold only A-Z a-z 0-9 _ . - / (it goes into unit files), got: $WAL_ARCHIVE_DIR" ;;
esac
if [ -n "$ROOT" ]; then
	case $ROOT in
	/*) ;;
	*) ROOT=$(pwd)/$ROOT ;;
	esac
	ROOT=${ROOT%/}
	[ -n "$ROOT" ] || usage_error "--root / is the host itself: leave --root out"
	[ -d "$ROOT" ] || usage_error "--root $ROOT is not a directory"
fi

# Root is checked before anything else is looked at or changed.
IS_ROOT=0
[ "$(id -u)" = 0 ] && IS_ROOT=1
if [ "$IS_ROOT" = 0 ] && [ -z "$ROOT" ]; then
	die "needs root: it creates the user $SVC_USER and writes $BIN_PATH, $DATA_DIR, $CONFIG_DIR and $UNIT_DIR.
  Run it as root (sudo sh $0 ...), or give --root DIR to stage the files under DIR."
fi

# A path on the target, as seen from here.
R() {
	printf '%s%s' "$ROOT" "$1"
}

# ---------------------------------------------------------------------------------------------
# Files, modes and owners, each changed only when it differs (which keeps a rerun a no-op)

# Generated text is compared from a private temp dir, so a rerun that changes nothing does not
# even touch the mtime of the directories it writes to.
WORK=$(mktemp -d "${TMPDIR:-/tmp}/install-svc.XXXXXX")
TMP_FILES=
cleanup_tmp() {
	rm -rf "$WORK"
	# shellcheck disable=SC2086 # a list of paths without spaces, made by mktemp below
	[ -z "$TMP_FILES" ] || rm -f $TMP_FILES
}
trap cleanup_tmp EXIT
trap 'exit 130' INT TERM

# A temp file next to $1, so that mv onto $1 is an atomic rename on the same filesystem.
tmp_beside() {
	made=$(mktemp "$(dirname "$1")/.install-svc.XXXXXX")
	TMP_FILES="$TMP_FILES $made"
	printf '%s' "$made"
}

# ensure_attr TARGET_PATH MODE UID GID: of what the path names (a directory linked to a data
# disk included), not of a link.
ensure_attr() {
	p=$(R "$1")
	[ "$(stat -L -c '%a' "$p")" = "$2" ] || {
		chmod "$2" "$p"
		changed "mode $2 on $1"
	}
	[ "$OWNERSHIP" = 1 ] || return 0
	[ "$(stat -L -c '%u:%g' "$p")" = "$3:$4" ] || {
		chown "$3:$4" "$p"
		changed "owner $(owner_name "$3" "$4") on $1"
	}
}

owner_name() {
	if [ "$1" = 0 ]; then printf 'root:'; else printf '%s:' "$SVC_USER"; fi
	if [ "$2" = 0 ]; then printf 'root'; else printf '%s' "$SVC_GROUP"; fi
}

# make_dir TARGET_PATH: a directory that the host owns (/usr/local/bin, /etc/systemd/system):
# created when missing, otherwise left as the host has it.
make_dir() {
	if [ ! -d "$(R "$1")" ]; then
		mkdir -p "$(R "$1")"
		changed "created $1"
	fi
}

# ensure_dir TARGET_PATH MODE UID GID: a directory of svc's own, with exactly this mode and owner.
ensure_dir() {
	if [ -d "$(R "$1")" ]; then
		ensure_attr "$@"
		return 0
	fi
	mkdir -p "$(dirname "$(R "$1")")"
	mkdir -m "$2" "$(R "$1")"
	[ "$OWNERSHIP" = 0 ] || chown "$3:$4" "$(R "$1")"
	changed "created $1 ($2 $(owner_name "$3" "$4"))"
}

# put_file SOURCE TARGET_PATH MODE UID GID: copy when the content differs; a rename replaces
# the file, so a running binary is never rewritten in place.
put_file() {
	dest=$(R "$2")
	if [ -f "$dest" ] && cmp -s "$1" "$dest"; then
		ensure_attr "$2" "$3" "$4" "$5"
		return 0
	fi
	file_tmp=$(tmp_beside "$dest")
	cp "$1" "$file_tmp"
	chmod "$3" "$file_tmp"
	[ "$OWNERSHIP" = 0 ] || chown "$4:$5" "$file_tmp"
	mv -f "$file_tmp" "$dest"
	changed "installed $2"
}

# put_output TARGET_PATH MODE UID GID COMMAND...: install what COMMAND prints. Not a pipeline
# into a function: a pipeline runs in a subshell, whose changes to CHANGES would be lost.
put_output() {
	out_target=$1 out_mode=$2 out_uid=$3 out_gid=$4
	shift 4
	"$@" >"$WORK/text"
	put_file "$WORK/text" "$out_target" "$out_mode" "$out_uid" "$out_gid"
}

# ---------------------------------------------------------------------------------------------
# The user and group

NOLOGIN=/usr/sbin/nologin
for shell in /usr/sbin/nologin /sbin/nologin /bin/false; do
	if [ -x "$(R "$shell")" ]; then NOLOGIN=$shell; break; fi
done

# Where accounts live: the host's databases, or DIR's files for --root (useradd --prefix writes
# there without chroot, so DIR needs no binaries of its own).
ACCOUNTS=host
if [ -n "$ROOT" ]; then
	if [ "$IS_ROOT" = 1 ] && [ -f "$ROOT/etc/passwd" ] && [ -f "$ROOT/etc/group" ]; then ACCOUNTS=prefix; else ACCOUNTS=none; fi
fi
# Whether files get their owners set: not in a staging tree without accounts.
OWNERSHIP=1
[ "$ACCOUNTS" != none ] || OWNERSHIP=0

lookup_id() { # lookup_id passwd|group NAME: the numeric id, or nothing
	if [ "$ACCOUNTS" = host ]; then
		getent "$1" "$2" | cut -d: -f3
	else
		awk -F: -v n="$2" '$1 == n { print $3; exit }' "$ROOT/etc/$1"
	fi
}

ensure_accounts() {
	[ "$ACCOUNTS" != none ] || return 0
	if [ -z "$(lookup_id group "$SVC_GROUP")" ]; then
		if [ "$ACCOUNTS" = prefix ]; then groupadd --prefix "$ROOT" --system "$SVC_GROUP"; else groupadd --system "$SVC_GROUP"; fi
		changed "created group $SVC_GROUP (gid $(lookup_id group "$SVC_GROUP"))"
	fi
	if [ -z "$(lookup_id passwd "$SVC_USER")" ]; then
		set -- --system --gid "$SVC_GROUP" --no-create-home --home-dir /nonexistent --shell "$NOLOGIN" --comment "svc data store" "$SVC_USER"
		if [ "$ACCOUNTS" = prefix ]; then useradd --prefix "$ROOT" "$@"; else useradd "$@"; fi
		changed "created user $SVC_USER (uid $(lookup_id passwd "$SVC_USER"), no login shell, no home)"
	fi
	SVC_UID=$(lookup_id passwd "$SVC_USER")
	SVC_GID=$(lookup_id group "$SVC_GROUP")
	if [ -z "$SVC_UID" ] || [ -z "$SVC_GID" ]; then die "user or group $SVC_USER was not created"; fi
}

# ---------------------------------------------------------------------------------------------
# Generated files

# host:port as the config writes it: an IPv6 host in brackets.
listen_address() {
	case $1 in
	*:*) printf '[%s]:%s' "$1" "$2" ;;
	*) printf '%s:%s' "$1" "$2" ;;
	esac
}

config_toml() {
	cat <<EOF
# svc node configuration, generated by install.sh. Check it with:
#   svc --config $CONFIG_PATH --validate
# To form a cluster, list every node under [cluster] members (this one among them) and set
# bootstrap = true on one node only, for the first start of the new cluster.
node_id = "$1"
data_dir = "$DATA_DIR"
max_memory_mb = 2048
snapshot_interval = 10000          # log entries between automatic snapshots

# Loopback unless install.sh --listen said otherwise: before other machines may reach the
# client and admin ports, configure [tls] and [auth] (README "Security").
[listen]                           # where this node binds
client = "$(listen_address "$LISTEN_HOST" 7878)"
admin = "$(listen_address "$LISTEN_HOST" 9090)"
peer = "$(listen_address "$LISTEN_HOST" 7879)"              # Raft over TCP and gossip over UDP

[cluster]
bootstrap = false                  # true on one node only, the first time a new cluster starts
members = []                       # how the nodes reach each other

[wal]
archive_command = ""               # e.g. "$(archive_example)"; empty: no archiving
archive_timeout = 60               # seconds
segment_size_mb = 64

[raft]
heartbeat_interval_ms = 100
election_timeout_ms = 1000         # at least 5 x heartbeat_interval_ms
EOF
	if [ "$GENERATE_CERTS" = 1 ]; then
		cat <<EOF

[tls]                              # made by install.sh --generate-certs
cert_file = "$TLS_DIR/node.crt"
key_file = "$TLS_DIR/node.key"
ca_file = "$TLS_DIR/ca.crt"        # what svc admin and the other nodes trust
peer_ca_file = "$TLS_DIR/ca.crt"   # mutual TLS on the peer port

[auth]
tokens_file = "$TOKENS_PATH"       # hashes and roles; add tokens with svc admin token create
token_file = "$ADMIN_TOKEN_PATH"   # the admin token svc admin sends

[gossip]
key_file = "$TLS_DIR/gossip.key"   # the cluster's shared key: gossip is encrypted
EOF
	fi
}

# The names this node's certificate holds: its node id (DNS and svc://<id>, what its peers
# check), this host's names and IPv4 addresses, and loopback.
node_san() {
	san="DNS:$1,URI:svc://$1,DNS:localhost,IP:127.0.0.1"
	for name in $(hostname 2>/dev/null) $(hostname -f 2>/dev/null); do
		case ",$san," in *",DNS:$name,"*) ;; *) san="$san,DNS:$name" ;; esac
	done
	for ip in $(hostname -I 2>/dev/null); do
		case $ip in *:*) ;; *) case ",$san," in *",IP:$ip,"*) ;; *) san="$san,IP:$ip" ;; esac ;; esac
	done
	printf '%s' "$san"
}

# A cluster CA and gossip key (kept if present: the first node's, copied to the others), this
# node's certificate, the tokens file and an admin token, each made once and never overwritten.
generate_certs() {
	command -v openssl >/dev/null 2>&1 || die "--generate-certs needs openssl (apt-get install openssl)"
	ensure_dir "$TLS_DIR" 750 "$SVC_UID" "$SVC_GID"
	tls=$(R "$TLS_DIR")
	cat >"$WORK/openssl.ext" <<EOF
[ca]
basicConstraints=critical,CA:true
keyUsage=critical,keyCertSign,cRLSign
[node]
basicConstraints=CA:false
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$(node_san "$NODE_ID")
EOF
	if [ ! -e "$tls/ca.crt" ]; then
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/ca.key" -out "$WORK/ca.crt" \
			-days 3650 -subj "/CN=svc cluster CA" -extensions ca -config "$WORK/openssl.ext" 2>"$WORK/openssl.err" ||
			die "openssl could not make the CA: $(cat "$WORK/openssl.err")"
		put_file "$WORK/ca.key" "$TLS_DIR/ca.key" 600 "$SVC_UID" "$SVC_GID"
		put_file "$WORK/ca.crt" "$TLS_DIR/ca.crt" 600 "$SVC_UID" "$SVC_GID"
	fi
	if [ ! -e "$tls/node.crt" ]; then
		[ -e "$tls/ca.key" ] || die "$TLS_DIR/ca.crt has no ca.key beside it to sign this node's certificate; copy both from the first node"
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/node.key" -out "$WORK/node.csr" \
			-subj "/CN=$NODE_ID" 2>"$WORK/openssl.err" || die "openssl could not make the node key: $(cat "$WORK/openssl.err")"
		openssl x509 -req -in "$WORK/node.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" -CAcreateserial -CAserial "$WORK/ca.srl" \
			-out "$WORK/node.crt" -days 825 -extfile "$WORK/openssl.ext" -extensions node 2>"$WORK/openssl.err" ||
			die "openssl could not sign the node certificate: $(cat "$WORK/openssl.err")"
		put_file "$WORK/node.key" "$TLS_DIR/node.key" 600 "$SVC_UID" "$SVC_GID"
		put_file "$WORK/node.crt" "$TLS_DIR/node.crt" 600 "$SVC_UID" "$SVC_GID"
	fi
	if [ ! -e "$tls/gossip.key" ]; then
		(umask 077 && "$BINARY" admin gossip keygen >"$WORK/gossip.key" 2>"$WORK/gossip.err") ||
			die "could not make the gossip key: $(cat "$WORK/gossip.err")"
		put_file "$WORK/gossip.key" "$TLS_DIR/gossip.key" 600 "$SVC_UID" "$SVC_GID"
	fi
	if [ ! -e "$(R "$ADMIN_TOKEN_PATH")" ]; then
		# The binary writes the hash, in the form svc reads; the token itself goes to its own file.
		if [ -e "$(R "$TOKENS_PATH")" ]; then cp "$(R "$TOKENS_PATH")" "$WORK/tokens"; chmod 600 "$WORK/tokens"; fi
		(umask 077 && "$BINARY" admin token create --role admin --tokens-file "$WORK/tokens" --name install.sh >"$WORK/admin-token" 2>"$WORK/token.err") ||
			die "could not make the admin token: $(cat "$WORK/token.err")"
		put_file "$WORK/tokens" "$TOKENS_PATH" 600 "$SVC_UID" "$SVC_GID"
		put_file "$WORK/admin-token" "$ADMIN_TOKEN_PATH" 600 "$SVC_UID" "$SVC_GID"
	fi
}

# Sandboxing shared by the node and its cleanup jobs. Never MemoryDenyWriteExecute=: it
# silently disables the JIT of Bun's JavaScript engine (about 3x slower).
hardening() {
	cat <<EOF
NoNewPrivileges=yes
ProtectSystem=strict
ReadWritePaths=$1
ProtectHome=yes
PrivateTmp=yes
PrivateDevices=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
ProtectProc=invisible
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
RemoveIPC=yes
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK
SystemCallArchitectures=native
CapabilityBoundingSet=
AmbientCapabilities=
UMask=0027
EOF
}

service_unit() {
	cat <<EOF
# Written by install.sh; put local changes in a drop-in (systemctl edit $SERVICE).
[Unit]
Description=svc replicated SQL data store node
Wants=network-online.target
After=network-online.target
# The data directory's file system, when it is a mount of its own, is there before the node
# starts (else the node would find root's empty mount point and stop with exit 3).
RequiresMountsFor=$DATA_DIR

[Service]
# exec, not notify: the node sends READY=1 only once it has joined its cluster (healthy), and a
# node waiting for its cluster (first start, or the rest of the cluster down) would hold
# "systemctl start" and be killed by the start timeout. GET /health on 9090 shows its recovery.
Type=exec
User=$SVC_USER
Group=$SVC_GROUP
ExecStart=$BIN_PATH serve --config $CONFIG_PATH
Restart=on-failure
RestartSec=5s
# Exit 2 (the configuration is wrong) and 3 (the message names data to repair: a gap in the
# log, Raft state of another node, a damaged backup being restored, a data directory svc may
# not use): starting again unchanged fails the same way, so the unit stays failed with the
# message in the journal. Exit 1 (a failing disk, a port still held, TLS or key files not in
# place yet) is restarted.
RestartPreventExitStatus=2 3
# Stopping flushes the WAL and closes the store.
TimeoutStopSec=90s
LimitNOFILE=1048576
# A follower far behind catches up at nice 10 and goes back to nice 0 once caught up: going
# back needs an RLIMIT_NICE of 20 (raw value: nice 0). Without it the node catches up at nice 0.
LimitNICE=20
# Recovery progress (recovery, replay, caught_up) is logged at info.
Environment=RUST_LOG=info
# A memory cap goes in a drop-in as MemoryMax=, never MemoryDenyWriteExecute= (see hardening).
# Data, and the WAL archive that wal.archive_command may copy segments to. A data_dir or an
# archive place elsewhere needs its own ReadWritePaths= in a drop-in.
$(hardening "$DATA_DIR$(local_archive_path " -")")

[Install]
WantedBy=multi-user.target
EOF
}

# cleanup_service DESCRIPTION WRITABLE_PATH CONDITION COMMAND...
# The WAL archive directory with a prefix, when it is one on this host (nothing for s3://).
local_archive_path() {
	[ "$WAL_ARCHIVE_LOCAL" = 0 ] || printf '%s%s' "$1" "$WAL_ARCHIVE_DIR"
}

# The archive_command the generated config suggests for the archive place.
archive_example() {
	if [ "$WAL_ARCHIVE_LOCAL" = 1 ]; then
		printf 'cp %%p %s/%%f' "$WAL_ARCHIVE_DIR"
	else
		printf '%s admin wal-archive-put %%p %s/%%f' "$BIN_PATH" "$WAL_ARCHIVE_DIR"
	fi
}

# cleanup_service DESCRIPTION WRITABLE UNIT_LINES COMMAND...
cleanup_service() {
	description=$1 writable=$2 condition=$3 command=$4 env_file=${5:-}
	cat <<EOF
# Written by install.sh; run by the timer of the same name.
[Unit]
Description=$description
$condition

[Service]
Type=oneshot
User=$SVC_USER
Group=$SVC_GROUP
EOF
	[ -z "$env_file" ] || echo "EnvironmentFile=$env_file"
	cat <<EOF
ExecStart=$command
Nice=10
IOSchedulingClass=idle
$(hardening "$writable")
EOF
}

# backup_service DESCRIPTION COMMAND...: as cleanup_service, with the data directory (where an
# archive is staged) and /var/backups/svc writable; another destination needs a drop-in.
backup_service() {
	description=$1
	shift
	cat <<EOF
# Written by install.sh; run by the timer of the same name.
[Unit]
Description=$description
ConditionPathExists=$CONFIG_PATH
After=svc.service

[Service]
Type=oneshot
User=$SVC_USER
Group=$SVC_GROUP
EnvironmentFile=-$CONFIG_DIR/backup.env
ExecStart=$*
Nice=10
IOSchedulingClass=idle
$(hardening "$DATA_DIR -/var/backups/svc")
EOF
}

# cleanup_timer DESCRIPTION ON_CALENDAR
cleanup_timer() {
	cat <<EOF
# Written by install.sh. Persistent=true: a run missed while the host was off happens at boot.
[Unit]
Description=$1

[Timer]
OnCalendar=$2
Persistent=true

[Install]
WantedBy=timers.target
EOF
}

# The user and group for systemd-sysusers: what ensure_accounts creates, declared for a package
# built from a staging root without accounts.
sysusers_conf() {
	cat <<EOF
# Written by install.sh: the system user and group svc (systemd-sysusers).
u $SVC_USER - "svc data store" /nonexistent $NOLOGIN
EOF
}

# The directories for systemd-tmpfiles: created with these modes and owners when missing.
tmpfiles_conf() {
	echo "# Written by install.sh: svc's directories (systemd-tmpfiles --create)."
	echo "d $DATA_DIR 0750 $SVC_USER $SVC_GROUP -"
	[ "$WAL_ARCHIVE_LOCAL" = 0 ] || echo "d $WAL_ARCHIVE_DIR 0750 $SVC_USER $SVC_GROUP -"
	echo "d $CONFIG_DIR 0750 root $SVC_GROUP -"
}

unit_text() {
	case $1 in
	svc.service) service_unit ;;
	svc-cleanup-snapshots.service)
		cleanup_service "svc: remove snapshots older than 7 days, never the newest valid one" "$DATA_DIR" \
			"ConditionPathExists=$CONFIG_PATH" \
			"$BIN_PATH admin cleanup-snapshots --config $CONFIG_PATH --older-than 7d" ;;
	svc-cleanup-snapshots.timer) cleanup_timer "Daily removal of svc snapshots older than 7 days" "*-*-* 02:00:00" ;;
	svc-cleanup-wal-archive.service)
		if [ "$WAL_ARCHIVE_LOCAL" = 1 ]; then
			cleanup_service "svc: remove archived WAL segments (*.wal) older than 30 days" "$WAL_ARCHIVE_DIR" \
				"ConditionPathIsDirectory=$WAL_ARCHIVE_DIR" \
				"$BIN_PATH admin cleanup-wal-archive --dir $WAL_ARCHIVE_DIR --older-than 30d"
		else
			# An object store: credentials (AWS_*) from backup.env, as the backups take them.
			cleanup_service "svc: remove archived WAL segments (*.wal) older than 30 days from $WAL_ARCHIVE_DIR" "" \
				"Wants=network-online.target
After=network-online.target" \
				"$BIN_PATH admin cleanup-wal-archive --dir $WAL_ARCHIVE_DIR --older-than 30d" "-$CONFIG_DIR/backup.env"
		fi ;;
	svc-cleanup-wal-archive.timer) cleanup_timer "Weekly removal of archived svc WAL segments older than 30 days" "Sun *-*-* 03:00:00" ;;
	# Backups (SPEC §8): every node runs the timers; --if-leader makes only the node that leads
	# at that moment take the backup, and both do nothing until [backup] names a destination.
	# Object-store credentials (AWS_*) go in $CONFIG_DIR/backup.env, never in the config file.
	svc-backup-full.service)
		backup_service "svc: daily full backup of the cluster, kept 30 days (on the leader only)" \
			"$BIN_PATH admin backup full --config $CONFIG_PATH --if-leader" ;;
	svc-backup-full.timer) cleanup_timer "Daily full backup of svc (the [backup] table names where)" "*-*-* 01:00:00" ;;
	svc-backup-offsite.service)
		backup_service "svc: weekly off-site copy of the newest full backup, kept 1 year (on the leader only)" \
			"$BIN_PATH admin backup offsite --config $CONFIG_PATH --if-leader" ;;
	svc-backup-offsite.timer) cleanup_timer "Weekly off-site copy of the newest svc full backup" "Sun *-*-* 04:00:00" ;;
	*) die "no text for unit $1 (a bug in install.sh)" ;;
	esac
}

# ---------------------------------------------------------------------------------------------
# systemd

systemd_running() {
	[ -z "$ROOT" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1
}

# ---------------------------------------------------------------------------------------------
# Install

default_node_id() {
	name=$(uname -n 2>/dev/null || true)
	name=${name%%.*}
	name=$(printf '%s' "$name" | tr -c 'A-Za-z0-9_.-' '-' | cut -c1-64)
	[ -n "$name" ] || name=node1
	printf '%s' "$name"
}

find_binary() {
	here=$(dirname "$0")
	for candidate in "$here/svc" "$here/dist/svc"; do
		if [ -f "$candidate" ]; then printf '%s' "$candidate"; return 0; fi
	done
	return 1
}

check_binary() {
	[ -f "$BINARY" ] || die "no svc binary at $BINARY"
	[ -x "$BINARY" ] || die "$BINARY is not executable (chmod +x it)"
	if [ -f "$BINARY.sha256" ]; then
		want=$(cut -d' ' -f1 <"$BINARY.sha256")
		have=$(sha256sum "$BINARY" | cut -d' ' -f1)
		[ "$want" = "$have" ] || die "$BINARY does not match $BINARY.sha256 (a damaged download?): expected $want, got $have"
	fi
	VERSION_LINE=$("$BINARY" --version 2>&1) || die "$BINARY does not run here: $VERSION_LINE"
}

install_all() {
	if [ -z "$BINARY" ]; then
		BINARY=$(find_binary) || usage_error "no svc binary beside this script: give --binary PATH"
	fi
	check_binary
	if [ -n "$NODE_ID" ]; then
		printf '%s' "$NODE_ID" | grep -Eq '^[A-Za-z0-9_.-]{1,64}$' ||
			usage_error "--node-id must be 1 to 64 characters of A-Z a-z 0-9 _ . -, got: $NODE_ID"
	else
		NODE_ID=$(default_node_id)
	fi

	printf '%s: installing %s into %s\n' "$PROG" "$VERSION_LINE" "${ROOT:-/}"
	ensure_accounts
	[ "$OWNERSHIP" = 1 ] || info "no accounts to use (not root, or no $ROOT/etc/passwd): user $SVC_USER and ownership are left to the post-install step"
	SVC_UID=${SVC_UID:-0} SVC_GID=${SVC_GID:-0}

	make_dir "$(dirname "$BIN_PATH")"
	before=$CHANGES
	put_file "$BINARY" "$BIN_PATH" 755 0 0
	[ "$before" = "$CHANGES" ] || RESTART_NEEDED=1
	link=$(R "$ADMIN_LINK")
	if [ "$(readlink "$link" 2>/dev/null || true)" != svc ]; then
		ln -sfn svc "$link"
		changed "linked $ADMIN_LINK -> svc"
	fi

	ensure_dir "$DATA_DIR" 750 "$SVC_UID" "$SVC_GID"
	# The data directory belongs to svc throughout (SPEC §2.1); fix only what differs.
	if [ "$OWNERSHIP" = 1 ]; then
		# -H: a data directory that is a link to a data disk is searched through the link.
		stray=$(find -H "$(R "$DATA_DIR")" \( ! -user "$SVC_UID" -o ! -group "$SVC_GID" \) -print | wc -l)
		if [ "$stray" -gt 0 ]; then
			find -H "$(R "$DATA_DIR")" \( ! -user "$SVC_UID" -o ! -group "$SVC_GID" \) -exec chown -h "$SVC_UID:$SVC_GID" {} +
			changed "owner $SVC_USER:$SVC_GROUP on $stray paths under $DATA_DIR"
		fi
	fi
	[ "$WAL_ARCHIVE_LOCAL" = 0 ] || ensure_dir "$WAL_ARCHIVE_DIR" 750 "$SVC_UID" "$SVC_GID"

	# The config is readable by the node, writable only by root. An existing one is the
	# operator's: it is never rewritten, nor are its mode and owner, with one exception: the
	# 0640 root:root one a run without accounts writes (a package's staging tree) gets the svc
	# group once it exists, or the node could not read it.
	ensure_dir "$CONFIG_DIR" 750 0 "$SVC_GID"
	[ "$GENERATE_CERTS" = 0 ] || generate_certs
	if [ -e "$(R "$CONFIG_PATH")" ]; then
		info "kept $CONFIG_PATH (exists; never overwritten)"
		if [ "$OWNERSHIP" = 1 ] && [ "$(stat -L -c '%a %u:%g' "$(R "$CONFIG_PATH")")" = "640 0:0" ]; then
			chgrp "$SVC_GID" "$(R "$CONFIG_PATH")"
			changed "group $SVC_GROUP on $CONFIG_PATH (the node reads it as $SVC_USER)"
		fi
	else
		# Checked by the binary it is for, before it is put in place.
		config_toml "$NODE_ID" >"$WORK/config.toml"
		# Checked with its file paths under --root, where those files are.
		sed "s|= \"/etc/svc/|= \"$(R /etc/svc)/|" "$WORK/config.toml" >"$WORK/config-check.toml"
		if ! out=$("$BINARY" --config "$WORK/config-check.toml" --validate 2>&1); then
			die "the generated $CONFIG_PATH does not validate (a bug in install.sh): $out"
		fi
		put_file "$WORK/config.toml" "$CONFIG_PATH" 640 0 "$SVC_GID"
	fi

	make_dir "$(dirname "$SYSUSERS_PATH")"
	put_output "$SYSUSERS_PATH" 644 0 0 sysusers_conf
	make_dir "$(dirname "$TMPFILES_PATH")"
	put_output "$TMPFILES_PATH" 644 0 0 tmpfiles_conf

	make_dir "$UNIT_DIR"
	before=$CHANGES
	for unit in $UNITS; do
		put_output "$UNIT_DIR/$unit" 644 0 0 unit_text "$unit"
	done
	if [ "$before" != "$CHANGES" ]; then UNITS_CHANGED=1 RESTART_NEEDED=1; fi

	start_units
	if [ "$CHANGES" = 0 ]; then
		printf '%s: nothing to change: svc is installed as asked\n' "$PROG"
	else
		printf '%s: done, %s changes\n' "$PROG" "$CHANGES"
	fi
}

start_units() {
	if [ -n "$ROOT" ]; then
		info "staging root: units written, not enabled or started"
		return 0
	fi
	if ! systemd_running; then
		info "systemd is not running here: units written, not enabled; later: systemctl enable --now $SERVICE $TIMERS"
		return 0
	fi
	[ "$UNITS_CHANGED" = 0 ] || systemctl daemon-reload
	# shellcheck disable=SC2086 # unit names have no spaces
	for unit in $SERVICE $TIMERS; do
		if ! systemctl is-enabled --quiet "$unit" 2>/dev/null; then
			systemctl enable --quiet "$unit"
			changed "enabled $unit"
		fi
	done
	[ "$NO_START" = 0 ] || return 0
	# A new binary or unit takes effect in a running node only by a restart.
	if [ "$RESTART_NEEDED" = 1 ] && systemctl is-active --quiet "$SERVICE"; then
		systemctl restart "$SERVICE"
		changed "restarted $SERVICE"
	fi
	for unit in $TIMERS $SERVICE; do
		if ! systemctl is-active --quiet "$unit"; then
			systemctl start "$unit"
			changed "started $unit"
		fi
	done
}

# ---------------------------------------------------------------------------------------------
# Uninstall

remove_path() {
	if [ -e "$(R "$1")" ] || [ -L "$(R "$1")" ]; then
		rm -rf "$(R "$1")"
		changed "removed $1"
	fi
}

uninstall_all() {
	printf '%s: uninstalling svc from %s\n' "$PROG" "${ROOT:-/}"
	if systemd_running; then
		for unit in $TIMERS $SERVICE; do
			if systemctl is-enabled --quiet "$unit" 2>/dev/null || systemctl is-active --quiet "$unit" 2>/dev/null; then
				systemctl disable --now --quiet "$unit" || true
				changed "stopped and disabled $unit"
			fi
		done
	fi
	for unit in $UNITS; do remove_path "$UNIT_DIR/$unit"; done
	[ "$CHANGES" = 0 ] || ! systemd_running || systemctl daemon-reload
	if [ "$(readlink "$(R "$ADMIN_LINK")" 2>/dev/null || true)" = svc ]; then remove_path "$ADMIN_LINK"; fi
	remove_path "$BIN_PATH"
	remove_path "$TMPFILES_PATH"
	remove_path "$SYSUSERS_PATH"

	if [ "$PURGE" = 1 ]; then
		remove_path "$DATA_DIR"
		remove_path "$CONFIG_DIR"
		# Archived WAL is backup data: the directory goes only when it is empty (an object
		# store's is never touched).
		if [ "$WAL_ARCHIVE_LOCAL" = 1 ]; then
			for dir in "$WAL_ARCHIVE_DIR" "$(dirname "$WAL_ARCHIVE_DIR")"; do
				if [ -d "$(R "$dir")" ] && rmdir "$(R "$dir")" 2>/dev/null; then changed "removed $dir (empty)"; fi
			done
			[ ! -d "$(R "$WAL_ARCHIVE_DIR")" ] || info "kept $WAL_ARCHIVE_DIR: it holds archived WAL segments"
		fi
		remove_accounts
	else
		for path in "$DATA_DIR" "$CONFIG_PATH"; do
			[ ! -e "$(R "$path")" ] || info "kept $path (remove it with --uninstall --purge)"
		done
	fi
	if [ "$CHANGES" = 0 ]; then
		printf '%s: nothing to remove: svc is not installed\n' "$PROG"
	else
		printf '%s: done, %s changes\n' "$PROG" "$CHANGES"
	fi
}

remove_accounts() {
	[ "$ACCOUNTS" != none ] || return 0
	if [ -n "$(lookup_id passwd "$SVC_USER")" ]; then
		if [ "$ACCOUNTS" = prefix ]; then userdel --prefix "$ROOT" "$SVC_USER"; else userdel "$SVC_USER"; fi
		changed "removed user $SVC_USER"
	fi
	if [ -n "$(lookup_id group "$SVC_GROUP")" ]; then
		if [ "$ACCOUNTS" = prefix ]; then groupdel --prefix "$ROOT" "$SVC_GROUP"; else groupdel "$SVC_GROUP"; fi
		changed "removed group $SVC_GROUP"
	fi
}

if [ "$UNINSTALL" = 1 ]; then uninstall_all; else install_all; fi
