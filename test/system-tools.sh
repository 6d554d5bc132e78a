#!/bin/sh
# The system tools some tests drive, brought in before `npm test` runs (the pretest script):
#   install.sh is POSIX sh: the shellcheck command (test/install/guards.test.ts)
#   the unit and timers install.sh writes: systemd-analyze, systemd-sysusers, systemd-tmpfiles,
#     and libsystemd0 for sd_notify (package systemd)
#   a network namespace for the installed node: ip (package iproute2)
#   /metrics is valid Prometheus text: promtool (package prometheus)
#   the sd_notify test's socket: python3
#   test processes run as another user and killed with the runner: setpriv (util-linux)
# As root with apt-get, missing ones are installed. Otherwise they are named with the command
# that installs them, loudly, and the tests go on: those that need a missing tool fail.
# SVC_TEST_TOOLS=skip skips this step.

set -eu

[ "${SVC_TEST_TOOLS:-}" != skip ] || exit 0

need=
missing() { # missing COMMAND PACKAGE
	command -v "$1" >/dev/null 2>&1 || need="$need $2"
}
missing shellcheck shellcheck
missing systemd-analyze systemd
missing ip iproute2
missing promtool prometheus
missing python3 python3
missing setpriv util-linux
[ -n "$need" ] || exit 0

command="apt-get update && apt-get install -y --no-install-recommends$need"
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
	printf 'test tools: installing%s (apt-get)\n' "$need" >&2
	export DEBIAN_FRONTEND=noninteractive
	# shellcheck disable=SC2086 # package names without spaces
	if apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends $need >/dev/null; then
		exit 0
	fi
	printf '\n*** test tools: could not install%s; run as root: %s\n\n' "$need" "$command" >&2
	exit 1
fi
printf '\n*** test tools missing:%s\n*** the tests that use them will fail; install them with:\n***   sudo sh -c "%s"\n\n' "$need" "$command" >&2
