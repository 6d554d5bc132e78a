#!/bin/sh
# A stand-in for systemctl in the install tests: appends each call to $FAKE_SYSTEMD_DIR/calls
# and keeps "enabled" and "active" flags per unit as files, so is-enabled and is-active answer
# as systemd would after the calls seen so far.
state=$FAKE_SYSTEMD_DIR
printf '%s\n' "$*" >>"$state/calls"
now=0 verb='' units=''
for arg in "$@"; do
	case $arg in
	--now) now=1 ;;
	-*) ;;
	*) if [ -z "$verb" ]; then verb=$arg; else units="$units $arg"; fi ;;
	esac
done
for unit in $units; do
	case $verb in
	is-enabled) [ -e "$state/enabled.$unit" ] || exit 1 ;;
	is-active) [ -e "$state/active.$unit" ] || exit 3 ;;
	enable) touch "$state/enabled.$unit"; [ "$now" = 0 ] || touch "$state/active.$unit" ;;
	disable) rm -f "$state/enabled.$unit"; [ "$now" = 0 ] || rm -f "$state/active.$unit" ;;
	start | restart) touch "$state/active.$unit" ;;
	stop) rm -f "$state/active.$unit" ;;
	esac
done
exit 0
